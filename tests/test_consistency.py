"""Consistency by construction: every output of every fixture and every shared log agrees.

Each input (every file and folder under fixtures/ and ../shared/logs) is summarised once, as
`summary --json --split-runs` does, and each run's document is rendered the four ways a
reader meets it: the JSON itself, the terminal summary, the Markdown block and the HTML
report (with its charts and quoted log lines). The checks then read the texts:

- no two statements disagree: slow steps listed as stalls beside a sentence saying there are
  none; a published reference range stated two ways; an MFU stated where the headline says it
  is unknown (the framework's own figure presented as the steady MFU);
- no text holds a control character or the replacement character (bytes of a binary source
  printed as text);
- each headline figure shown (MFU, TFLOPS/GPU, step time, wall clock, goodput, time lost) is
  its JSON value, printed the one way `render.numbers` prints it.

A source no parser reads, or that holds nothing usable, must be refused in one line (exit 1 or
3), never a traceback.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest
from click.testing import CliRunner
from markupsafe import Markup

from loganalyzer.cli import main
from loganalyzer.commands.analysed import Settings, summarise
from loganalyzer.errors import LogAnalyzerError
from loganalyzer.render.html import render_html
from loganalyzer.render.markdown import render_markdown
from loganalyzer.render.numbers import duration, number, percent, seconds
from loganalyzer.render.text import render_summary
from loganalyzer.render.view import build_view, headline
from loganalyzer.render.viewmodel import ReportView
from tests.conftest import FIXTURES, SHARED, SessionResults
from tests.test_golden import EXTRA_ARGS
from tests.test_output_formats import _ReadableText, strings

SKIPPED_SUFFIXES = (".py", ".md")
# A folder is read whole when it is one run's: a few files (a run directory, an output_dir
# with its checkpoints, a W&B run); folders of many logs are read file by file.
RUN_FOLDER_FILES = 16


def _inputs(root: Path) -> list[Path]:
    """Every file under `root` but the notes and scripts beside the logs (and the expected
    outcome `NAME.json` beside an ending's `NAME.log`), and every folder small enough to be
    one run's, unless it holds nothing but one sub-folder (read as that sub-folder)."""
    found = [p for p in sorted(root.rglob("*")) if not p.name.startswith(".")]
    files = [
        p
        for p in found
        if p.is_file()
        and not p.name.endswith(SKIPPED_SUFFIXES)
        and not (p.suffix == ".json" and p.with_suffix(".log").exists())
    ]
    folders = []
    for folder in (p for p in found if p.is_dir()):
        inside = [f for f in files if f.is_relative_to(folder)]
        entries = {folder / f.relative_to(folder).parts[0] for f in inside}
        one_folder = len(entries) == 1 and next(iter(entries)).is_dir()
        if 0 < len(inside) <= RUN_FOLDER_FILES and not one_folder:
            folders.append(folder)
    return sorted(files + folders)


INPUTS = _inputs(FIXTURES) + _inputs(SHARED / "logs")


def _id(path: Path) -> str:
    base = FIXTURES if path.is_relative_to(FIXTURES) else SHARED
    return path.relative_to(base.parent).as_posix()


# The facts a log lacks, as a user would pass them: the fixtures' from the golden tests, the
# BigScience logs' GPU from their notes (V100s); the Llama-3-8B fixture (its throughput is the
# FLOPs oracle's over H100-sized step times) on H100, so that a reference band is stated.
ARGS = {**EXTRA_ARGS, "core_0_12_llama3_8b_throughput.log": ["--gpu", "h100-sxm"]}


def _args(path: Path) -> list[str]:
    if path.name in ARGS:
        return ARGS[path.name]
    if "bigscience" in path.as_posix():
        return ["--gpu", "v100-sxm2"]
    return []


@dataclass(frozen=True)
class Rendered:
    """One run's document and what each output shows of it."""

    document: dict[str, Any]
    texts: dict[str, str]  # output name -> the text a reader sees


@dataclass(frozen=True)
class Outcome:
    """What an input gave: its runs rendered, or the one-line refusal."""

    runs: tuple[Rendered, ...]
    error: str | None = None


def _visible(page: str) -> str:
    reader = _ReadableText()
    reader.feed(page)
    return "\n".join(reader.parts)


def _page(view: ReportView) -> str:
    """The report page without the copy of plotly.js it inlines (4 MB of no text)."""
    with patch("loganalyzer.render.html.plotly_js", lambda: Markup("")):
        return render_html(view)


def _render(path: Path) -> Outcome:
    """Summarise `path` as the CLI does (its options parsed by the CLI itself) and render each
    run every way."""
    settings = _settings(_args(path))
    try:
        summarised = summarise([str(path)], settings, split_runs=True)
    except LogAnalyzerError as exc:
        return Outcome((), str(exc))
    runs = []
    for loaded, document in summarised:
        as_json = json.dumps(document, indent=2, allow_nan=False, default=str)
        parsed: dict[str, Any] = json.loads(as_json)
        texts = {
            "json": as_json,
            "text": render_summary(parsed),
            "markdown": render_markdown(build_view(parsed, loaded.run, charts=False, quotes=False)),
            "html": _visible(_page(build_view(parsed, loaded.run))),
        }
        runs.append(Rendered(parsed, texts))
    return Outcome(tuple(runs))


def _settings(args: list[str]) -> Settings:
    """The settings `summary` builds from `args` (the same option parsing, no copy of it)."""
    from loganalyzer.commands import analysed

    captured: list[Settings] = []

    @analysed.analysis_options
    def probe(settings: Settings) -> None:
        captured.append(settings)

    import click

    command = click.command()(probe)
    command.main(["--quiet", *args], standalone_mode=False)
    return captured[0]


@pytest.fixture(scope="module")
def outputs(session_results: SessionResults) -> Iterator[dict[Path, Outcome]]:
    """Each input's outputs, rendered once for every check of this module, on whichever
    worker reaches it first (an input's four checks are spread over the workers)."""

    class Lazy(dict[Path, Outcome]):
        def __missing__(self, path: Path) -> Outcome:
            outcome = session_results.get(f"consistency {path}", lambda: _render(path))
            self[path] = outcome
            return outcome

    yield Lazy()


# --- the checks -------------------------------------------------------------------------

# A control character (not tab or newline) or the replacement character of undecodable bytes.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffd]")
# "29.0–46.4 %" or "39.0 % to 46.4 %": a range of percents (a band of published runs).
_RANGE = re.compile(r"(\d+(?:\.\d+)?)(?: ?% to |–)(\d+(?:\.\d+)?) ?%")


def unprintable(text: str) -> list[str]:
    """Each control or replacement character of `text`, with what surrounds it."""
    found = []
    for m in _UNPRINTABLE.finditer(text):
        around = text[max(m.start() - 30, 0) : m.end() + 30]
        found.append(f"{unicodedata.name(m.group(), hex(ord(m.group())))} in …{around!r}…")
    return found


def disagreements(run: Rendered) -> list[str]:
    """Statements of one run's outputs that contradict each other or the document."""
    doc, texts = run.document, run.texts
    found = []
    stalled = [s for s in doc.get("slow_steps") or () if s.get("kind") == "stall"]
    for name, text in texts.items():
        if stalled and re.search(r"\bno stalls\b", text, re.IGNORECASE):
            found.append(
                f"{name}: 'No stalls' while slow steps list {len(stalled)} stall(s), e.g. "
                f"iteration {stalled[0].get('iteration')}"
            )
    # a range is stated one way: two ranges that share one end share the other
    ranges = {m.groups() for name, text in texts.items() for m in _RANGE.finditer(text)}
    for low, high in ranges:
        for other_low, other_high in ranges:
            if (low == other_low) != (high == other_high):
                found.append(f"range {low}–{high} % and {other_low}–{other_high} % disagree")
    # the steady MFU is stated only where it is known
    if (doc.get("flops") or {}).get("mfu") is None:
        for name, text in texts.items():
            if name == "json":
                continue
            for m in re.finditer(r"\d+\.\d %,? steady MFU|steady MFU:? \d+\.\d %", text):
                found.append(f"{name}: {m.group()!r} while the document's steady MFU is unknown")
    return sorted(set(found))


def figure_mismatches(run: Rendered) -> list[str]:
    """Headline figures whose shown value is not the document's, or that an output lacks."""
    doc = run.document
    flops = doc.get("flops") or {}
    goodput = doc.get("goodput") or {}
    figures = {figure.key: figure for figure in headline(doc)}
    expected: dict[str, Any] = {
        "mfu": flops.get("mfu"),
        "tflops": flops.get("tflops_per_gpu"),
        "step_time": (doc.get("step_time_s") or {}).get("median"),
        "wall_clock": goodput.get("wall_s") or None,
    }
    found = []
    for key, value in expected.items():
        if key in figures and figures[key].value != value:
            found.append(f"headline {key} is {figures[key].value}, the document's {value}")
    # each output shows the figure as `render.numbers` prints the document's value
    shown = {
        "text": [
            percent(flops.get("mfu")) if flops.get("mfu") is not None else None,
            number(flops.get("tflops_per_gpu"), ".1f")
            if flops.get("tflops_per_gpu") is not None
            else None,
            seconds(expected["step_time"]) if expected["step_time"] is not None else None,
            duration(goodput["wall_s"]) if goodput.get("wall_s") else None,
        ],
        "markdown": [f.text for f in figures.values() if f.value is not None],
        "html": [f.text for f in figures.values() if f.value is not None],
    }
    goodput_share = _goodput_share(goodput)
    if goodput_share is not None:
        shown["text"].append(percent(goodput_share))
        shown["html"].append(percent(goodput_share))
        shown["markdown"].append(percent(goodput_share))
    for name, figures_shown in shown.items():
        for text in figures_shown:
            if text is not None and text not in run.texts[name]:
                found.append(f"{name} lacks {text!r}")
    return found


def _goodput_share(goodput: dict[str, Any]) -> float | None:
    """The productive share of the wall clock, as the budget's first line gives it."""
    for line in goodput.get("lines") or ():
        if line.get("name") == "productive steady steps":
            share = line.get("share")
            return float(share) if isinstance(share, (int, float)) else None
    return None


# --- the tests ------------------------------------------------------------------------------

IDS = [_id(p) for p in INPUTS]


@pytest.mark.parametrize("path", INPUTS, ids=IDS)
def test_an_input_is_summarised_or_refused_in_one_line(
    path: Path, outputs: dict[Path, Outcome]
) -> None:
    outcome = outputs[path]
    if outcome.error is not None:
        assert "\n" not in outcome.error.strip() and "Traceback" not in outcome.error
    else:
        assert outcome.runs


@pytest.mark.parametrize("path", INPUTS, ids=IDS)
def test_no_two_statements_disagree(path: Path, outputs: dict[Path, Outcome]) -> None:
    found = [p for run in outputs[path].runs for p in disagreements(run)]
    assert not found, "\n".join(found)


@pytest.mark.parametrize("path", INPUTS, ids=IDS)
def test_no_output_holds_binary_or_control_characters(
    path: Path, outputs: dict[Path, Outcome]
) -> None:
    found = [
        f"{name}: {p}"
        for run in outputs[path].runs
        for name, text in run.texts.items()
        for p in unprintable(text if name != "json" else "\n".join(strings(run.document)))
    ]
    assert not found, "\n".join(found[:10])


@pytest.mark.parametrize("path", INPUTS, ids=IDS)
def test_each_figure_shown_is_its_json_value(path: Path, outputs: dict[Path, Outcome]) -> None:
    found = [p for run in outputs[path].runs for p in figure_mismatches(run)]
    assert not found, "\n".join(found)


def test_the_checks_catch_what_they_look_for() -> None:
    stall = {"kind": "stall", "iteration": 110}
    doc: dict[str, Any] = {"slow_steps": [stall], "flops": {"mfu": None}}
    texts = {
        "html": "Slow steps 110 stall ... No stalls.",
        "markdown": "published runs reached 29.0–46.4 %",
        "text": "verdict: 39.0–46.4 %; achieved: 47.3 %, steady MFU (the framework's)",
    }
    found = disagreements(Rendered(doc, texts))
    assert len(found) == 4, found
    assert unprintable("grad-norm\ufffd 3Pt?") and unprintable("a\x00b")
    assert not unprintable("tab\tand newline\n, “quotes” and × and – fine")


def test_the_cli_prints_what_the_cache_renders(outputs: dict[Path, Outcome]) -> None:
    """The cache renders as the CLI does: the terminal summary and the JSON are the same."""
    path = FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out"
    (run,) = outputs[path].runs
    args = ["summary", "-q", str(path), *_args(path)]
    assert CliRunner().invoke(main, args).stdout.rstrip("\n") == run.texts["text"]
    assert json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout) == run.document
