"""Runs side by side: the comparison's view model and its overlaid charts.

Each run is summarised alone (the same document `summary --json` gives); the first run is
the baseline every difference is taken against. Figures are the documents' numbers, read
through `render.view`; only the differences between them are computed here.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from loganalyzer.model import Run
from loganalyzer.render.charts import base_layout
from loganalyzer.render.clip import clip
from loganalyzer.render.downsample import keep_shape
from loganalyzer.render.numbers import TIMES, duration, number, percent
from loganalyzer.render.view import build_view, chart_facts
from loganalyzer.render.viewmodel import BudgetPart, Chart, Ending, Figure
from loganalyzer.secrets import mask_value, run_secrets

XAxis = Literal["iteration", "tokens", "time"]
# One colour per run: the accent first, then quieter inks.
RUN_COLOURS = ("#1f5f99", "#b0651a", "#475467", "#7fa7cc", "#98a2b3")
# Figures compared, by headline key; for each, whether more is better.
COMPARED = {
    "mfu": True,
    "tflops": True,
    "tokens_per_s": True,
    "step_time": False,
    "wall_clock": False,
    "lost": False,
}


@dataclass(frozen=True)
class RunInput:
    """One run to compare: its label, summary document and tables."""

    label: str
    document: Mapping[str, Any]
    run: Run | None


@dataclass(frozen=True)
class Cell:
    text: str
    value: float | None
    change: str


@dataclass(frozen=True)
class FigureRow:
    key: str
    label: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class ConfigDifference:
    name: str
    values: tuple[str, ...]

    @property
    def label(self) -> str:
        """The name as shown (cut, `clip`)."""
        return clip(self.name)

    @property
    def shown(self) -> tuple[str, ...]:
        """The values as the page and the terminal show them (cut, `clip`)."""
        return tuple(clip(value) for value in self.values)


@dataclass(frozen=True)
class RunBudget:
    label: str
    parts: tuple[BudgetPart, ...]
    summary: str


@dataclass(frozen=True)
class CompareView:
    title: str
    tool_version: str
    generated_at: str | None
    labels: tuple[str, ...]
    identities: tuple[str, ...]
    figures: tuple[FigureRow, ...]
    faster: str
    lost_most: str
    config: tuple[ConfigDifference, ...]
    budgets: tuple[RunBudget, ...]
    charts: tuple[Chart, ...]
    x_axis: str
    # each run's ending (None for a document without `outcome`)
    endings: tuple[Ending | None, ...] = ()


def build_compare(
    runs: Sequence[RunInput], *, x_axis: XAxis = "iteration", generated_at: str | None = None
) -> CompareView:
    """The comparison of two or more runs, against the first."""
    views = [build_view(r.document, r.run, charts=False, quotes=False) for r in runs]
    labels = tuple(r.label for r in runs)
    figures = []
    for key in COMPARED:
        row = [next(f for f in v.headline if f.key == key) for v in views]
        figures.append(FigureRow(key, row[0].label, tuple(_cell(f, row[0]) for f in row)))
    return CompareView(
        title=" vs ".join(labels),
        tool_version=str(runs[0].document.get("tool_version", "")),
        generated_at=generated_at,
        labels=labels,
        identities=tuple(
            f"{v.identity.framework} · {v.identity.gpus} · {v.identity.model}" for v in views
        ),
        figures=tuple(figures),
        faster=faster_sentence(labels, [v.headline for v in views]),
        lost_most=_lost_most(labels, views),
        config=_config_differences(runs),
        budgets=tuple(
            RunBudget(label, v.budget, v.budget_summary)
            for label, v in zip(labels, views, strict=True)
        ),
        charts=_charts(runs, x_axis),
        x_axis=x_axis,
        endings=tuple(v.ending for v in views),
    )


def _cell(figure: Figure, base: Figure) -> Cell:
    if figure is base or figure.value is None or base.value is None:
        return Cell(figure.text, figure.value, "")
    difference = figure.value - base.value
    if figure.key in ("mfu",):
        change = f"{difference * 100:+.1f} pt"
    elif figure.key in ("step_time",):
        change = f"{difference:+.4g} s"
    elif figure.key in ("wall_clock", "lost"):
        change = ("+" if difference >= 0 else "-") + duration(abs(difference))
    else:
        change = f"{difference:+,.4g}"
    if base.value:
        change += f" ({number(figure.value / base.value, '.3f')}{TIMES})"
    return Cell(figure.text, figure.value, change)


def faster_sentence(labels: Sequence[str], headlines: Sequence[Sequence[Figure]]) -> str:
    """Which run trained faster, by tokens/s where every run's is known, else by the median
    step time, and by how much."""
    by_key = [{f.key: f for f in h} for h in headlines]
    tokens = [h["tokens_per_s"].value for h in by_key]
    steps = [h["step_time"].value for h in by_key]
    if all(t is not None for t in tokens):
        known = [float(t) for t in tokens if t is not None]
        best = max(range(len(known)), key=lambda i: known[i])
        rest = [known[i] for i in range(len(known)) if i != best]
        ratio = known[best] / max(rest)
        return (
            f"{labels[best]} is the fastest: {number(known[best], ',.0f')} tokens/s, "
            f"{number(ratio, '.3f')}{TIMES} the next run's ({number(max(rest), ',.0f')} tokens/s)"
            f", {percent(ratio - 1)} more tokens per second."
        )
    if all(s is not None for s in steps):
        known = [float(s) for s in steps if s is not None]
        best = min(range(len(known)), key=lambda i: known[i])
        rest = [known[i] for i in range(len(known)) if i != best]
        ratio = min(rest) / known[best]
        return (
            f"{labels[best]} is the fastest per iteration: median step time "
            f"{number(known[best], '.4g', ' s')} against {number(min(rest), '.4g', ' s')}, "
            f"{number(ratio, '.3f')}{TIMES} (tokens per iteration unknown, so per step)."
        )
    return "Which run is faster is unknown: a run has no timed records."


def _lost_most(labels: Sequence[str], views: Sequence[Any]) -> str:
    lost = [next(f for f in v.headline if f.key == "lost").value or 0.0 for v in views]
    worst = max(range(len(lost)), key=lambda i: lost[i])
    if lost[worst] <= 0:
        return "No run lost time to warm-up, slow steps, restarts or stalls."
    causes = [p for p in views[worst].budget if p.key not in ("productive", "unlogged")]
    cause = max(causes, key=lambda p: p.seconds) if causes else None
    where = f", most of it to {cause.label} ({cause.text})" if cause else ""
    return f"{labels[worst]} lost the most time: {duration(lost[worst])}{where}."


def _config_differences(runs: Sequence[RunInput]) -> tuple[ConfigDifference, ...]:
    """Config values that are not the same in every run (absent counts as different)."""
    configs = [r.run.config if r.run is not None else {} for r in runs]
    names = sorted(set().union(*configs))
    found = {secret for r in runs if r.run is not None for secret in run_secrets(r.run)}
    planted = sorted(found, key=len, reverse=True)
    rows = []
    for name in names:
        values = [
            str(mask_value(name, c[name].value, planted)) if name in c else "—" for c in configs
        ]
        if len(set(values)) > 1:
            rows.append(ConfigDifference(name, tuple(values)))
    return tuple(rows)


def _charts(runs: Sequence[RunInput], x_axis: XAxis) -> tuple[Chart, ...]:
    """Step time and MFU (TFLOPS/GPU where a peak is unknown) of every run on one axis."""
    step_traces: list[dict[str, Any]] = []
    rate_traces: list[dict[str, Any]] = []
    use_mfu = all(chart_facts(r.document).peak_tflops for r in runs)
    x_label = {"iteration": "iteration", "tokens": "tokens", "time": "hours"}[x_axis]
    for n, item in enumerate(runs):
        if item.run is None:
            continue
        facts = chart_facts(item.document)
        frame = _series(item.run.table, item.document, x_axis)
        if frame.is_empty():
            continue
        colour = RUN_COLOURS[n % len(RUN_COLOURS)]
        flagged = pl.col("iteration").is_in(list(facts.flagged))
        shown = keep_shape(frame, "step_time_s", flagged)
        step_traces.append(_trace(item.label, shown, "step_time_s", colour, ".4g", " s"))
        if facts.flops_per_iteration and facts.num_gpus:
            tflops = facts.flops_per_iteration / pl.col("step_time_s") / facts.num_gpus / 1e12
            rate = tflops / facts.peak_tflops if use_mfu and facts.peak_tflops else tflops
            rated = frame.with_columns(rate.alias("rate"))
            shown = keep_shape(rated, "rate", flagged)
            fmt, unit = (".1%", "") if use_mfu else (".1f", " TFLOPS/GPU")
            rate_traces.append(_trace(item.label, shown, "rate", colour, fmt, unit))
    charts = []
    if step_traces:
        layout = base_layout("seconds per iteration")
        layout["xaxis"]["title"]["text"] = x_label
        charts.append(
            Chart(
                "chart-compare-step-time",
                "Step time",
                _x_caption(x_axis),
                {"data": step_traces, "layout": layout},
            )
        )
    if rate_traces:
        layout = base_layout("MFU" if use_mfu else "TFLOPS/GPU")
        layout["xaxis"]["title"]["text"] = x_label
        if use_mfu:
            layout["yaxis"]["tickformat"] = ".0%"
        charts.append(
            Chart(
                "chart-compare-rate",
                "MFU" if use_mfu else "TFLOPS per GPU (a run's peak is unknown: no MFU)",
                "Each run's FLOPs per iteration over each record's step time.",
                {"data": rate_traces, "layout": layout},
            )
        )
    return tuple(charts)


def _x_caption(x_axis: XAxis) -> str:
    return {
        "iteration": "Each run against its iteration number.",
        "tokens": "Each run against the tokens trained (iterations × tokens per iteration).",
        "time": "Each run against its training time: hours since its first record where the "
        "log has timestamps, else the sum of its logged step times.",
    }[x_axis]


def _series(table: pl.DataFrame, document: Mapping[str, Any], x_axis: XAxis) -> pl.DataFrame:
    frame = table.filter(pl.col("step_time_s").is_not_null() & pl.col("step_time_s").is_finite())
    if x_axis == "iteration":
        x = pl.col("iteration").cast(pl.Float64)
    elif x_axis == "tokens":
        tokens = (document.get("run") or {}).get("tokens_per_iteration")
        if not tokens:
            return frame.clear().with_columns(pl.lit(0.0).alias("x"))
        x = pl.col("iteration").cast(pl.Float64) * tokens
    elif frame["timestamp"].null_count() == 0 and frame.height:
        x = (pl.col("timestamp") - pl.col("timestamp").min()).dt.total_seconds() / 3600
    else:
        x = (pl.col("step_time_s") * pl.col("interval")).cum_sum() / 3600
    return frame.select("iteration", "step_time_s", x.cast(pl.Float64).alias("x"))


def _trace(
    label: str, frame: pl.DataFrame, column: str, colour: str, fmt: str, unit: str
) -> dict[str, Any]:
    name = html.escape(label)
    return {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": frame["x"].to_list(),
        "y": frame[column].to_list(),
        "customdata": frame["iteration"].to_list(),
        "hovertemplate": f"{name}<br>iteration %{{customdata}}<br>%{{y:{fmt}}}{unit}"
        "<extra></extra>",
        "line": {"width": 1.3, "color": colour},
    }


def compare_json(view: CompareView) -> dict[str, Any]:
    """The comparison for scripts: figures with their differences, config differences and
    the two sentences; charts left out."""
    return {
        "schema": "loganalyzer.compare/1",
        "runs": list(view.labels),
        "figures": {
            row.key: [
                {"value": cell.value, "text": cell.text, "change": cell.change or None}
                for cell in row.cells
            ]
            for row in view.figures
        },
        "endings": [
            {"status": e.status, "severity": e.severity, "sentence": e.sentence} if e else None
            for e in view.endings
        ],
        "faster": view.faster,
        "lost_most": view.lost_most,
        "config_differences": {d.name: list(d.values) for d in view.config},
    }


def render_compare_text(view: CompareView) -> str:
    """The comparison for the terminal: each run's ending first."""
    width = max(len(label) for label in view.labels)
    lines = [
        f"{label}: {ending.sentence}"
        for label, ending in zip(view.labels, view.endings, strict=False)
        if ending is not None
    ]
    lines += [""] if lines else []
    lines.append(f"{'':<18}" + "  ".join(f"{label:>{max(width, 22)}}" for label in view.labels))
    for row in view.figures:
        cells = [f"{c.text}{f' ({c.change})' if c.change else ''}" for c in row.cells]
        lines.append(f"{row.label:<18}" + "  ".join(f"{c:>{max(width, 22)}}" for c in cells))
    lines += ["", view.faster, view.lost_most]
    if view.config:
        lines += ["", f"config differences ({len(view.config)}):"]
        for diff in view.config:
            lines.append(f"  {diff.label}: " + " | ".join(diff.shown))
    return "\n".join(lines)
