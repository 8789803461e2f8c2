"""The summary as Markdown for a postmortem or a ticket: headline, verdicts, time budget.

GitHub-flavoured tables, fed by the same view model as the HTML report. Text from a log is
escaped so that it cannot break a table or turn into markup where the block is pasted.
"""

from __future__ import annotations

from typing import Any

from loganalyzer.render.view import build_view
from loganalyzer.render.viewmodel import ReportView


def _cell(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace("|", "\\|")
        .replace("\n", " ")
    )


def render_markdown(view: ReportView) -> str:
    """A Markdown block: a heading, how the run ended (with the lines it rests on), the
    identity line and three sections."""
    identity = view.identity
    lines = [f"### {_cell(identity.name)}", ""]
    if view.ending is not None:
        lines += [f"**{_cell(view.ending.sentence)}**", ""]
        lines += [
            f"- {row.cells[0]} {_cell(row.cells[1])}: {_cell(row.cells[2])}"
            for row in view.ending.evidence
        ]
        lines += [""] if view.ending.evidence else []
    lines += [
        " · ".join(
            _cell(part)
            for part in (identity.framework, identity.gpus, identity.model, identity.dates)
        ),
        "",
        "| figure | value | verdict | note |",
        "|---|--:|---|---|",
    ]
    for figure in view.headline:
        lines.append(
            f"| {figure.label} | {_cell(figure.text)} | {figure.severity or ''} "
            f"| {_cell(figure.note)} |"
        )
    lines += ["", _cell(view.reported), "", "**Verdicts**", ""]
    if view.verdicts:
        for verdict in view.verdicts:
            lines.append(f"- **{verdict.severity}** `{verdict.code}`: {_cell(verdict.message)}")
    else:
        lines.append("- none")
    if view.incidents:
        lines += ["", "**Incidents**", "", "| kind | iterations | size | recovered in |"]
        lines.append("|---|--:|---|--:|")
        lines += [
            f"| {row.kind} | {row.iterations} | {_cell(row.size)} | {row.recovery} |"
            for row in view.incidents
        ]
    if view.restart_sentences:
        lines += ["", "**Restarts**", ""]
        lines += [f"- {_cell(sentence)}" for sentence in view.restart_sentences]
    lines += ["", "**Where the time went**", ""]
    if view.budget:
        lines += ["| cause | time | share |", "|---|--:|--:|"]
        lines += [f"| {part.label} | {part.text} | {part.share} |" for part in view.budget]
        lines.append("")
    lines.append(_cell(view.budget_summary))
    return "\n".join(lines)


def render_document_markdown(document: dict[str, Any]) -> str:
    """The Markdown block of a summary document alone (no run tables: no quoted log lines)."""
    return render_markdown(build_view(document, charts=False))
