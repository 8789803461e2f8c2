"""The report's first screen in headless Chromium at 1400x900: the identity with parallelism,
batch and precision, the headline MFU with HFU and goodput MFU, the time lost by cause as a
ranked table and the costliest verdicts, all inside the viewport without overlapping; below
it the MFU waterfall chart and the causes table. Every figure checked is the document's.

Runs: the bundled example, a TensorBoard run written by tensorboard's own writer, a W&B
offline run written by wandb, and two DeepSpeed logs (a restarted DeepSpeed run, and a
Megatron-DeepSpeed run with FLOPs, so with a waterfall)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from loganalyzer.render.numbers import duration, percent
from tests.chromium import Page, screen
from tests.conftest import FIXTURES
from tests.first_screen_runs import SPIKE_AT, write_tensorboard_run, write_wandb_run
from tests.report_helpers import EXAMPLE, EXAMPLE_ARGS, summary_json, write_report

WIDTH, HEIGHT = 1400, 900
BIG_RUN = ["--gpu", "h100-sxm", "--num-gpus", "64"]
TOP_VERDICTS = 3


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    with screen(WIDTH, HEIGHT) as tab:
        yield tab


@pytest.fixture(scope="module")
def tensorboard_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tensorboard_run(tmp_path_factory.mktemp("tensorboard")).parent


@pytest.fixture(scope="module")
def wandb_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_wandb_run(tmp_path_factory.mktemp("wandb"))


def _lost_lines(document: dict[str, Any]) -> list[dict[str, Any]]:
    """The budget's lost lines as the first screen ranks them: largest first."""
    kept = ("productive steady steps", "iterations not in the log")
    lines = [
        line
        for line in document["goodput"]["lines"]
        if line["name"] not in kept and line["seconds"] and line["seconds"] > 0
    ]
    return sorted(lines, key=lambda line: -line["seconds"])


def _top_codes(document: dict[str, Any]) -> list[str]:
    """The verdicts the first screen leads with: the document's first (the analysis ranks
    them by severity from the time at stake, then by `lost_s`), the ending's verdict left to
    the banner."""
    codes = [v["code"] for v in document["verdicts"]]
    return [code for code in codes if not code.startswith("ENDING_")][:TOP_VERDICTS]


def _box(page: Page, selector: str) -> dict[str, float]:
    box: dict[str, float] = page.evaluate(
        f"(() => {{ const r = document.querySelector({selector!r}).getBoundingClientRect();"
        " return {top: r.top, bottom: r.bottom, left: r.left, right: r.right}; })()"
    )
    return box


def _apart(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        a["right"] <= b["left"]
        or b["right"] <= a["left"]
        or a["bottom"] <= b["top"]
        or b["bottom"] <= a["top"]
    )


def _check_first_screen(page: Page, report: Path, document: dict[str, Any], shot: Path) -> None:
    opened = page.open(report)
    assert (opened.errors, opened.requests, opened.dialogs) == ([], [], [])
    page.evaluate("window.scrollTo(0, 0)")
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH  # no sideways scroll

    # identity: parallelism, batch, sequence length and precision, as the document has them
    setup = page.evaluate("document.querySelector('.identity .setup').textContent")
    run = document["run"]
    assert f"global batch {run['global_batch_size']:,}" in setup or run["global_batch_size"] is None
    assert str(run["dtype"]) in setup
    for name, value in run["parallelism"].items():
        if value is not None:
            assert f"{name[0].upper()}P={value}" in setup

    # headline: MFU with HFU and goodput MFU, the document's figures
    flops = document["flops"]
    for key, value in (("mfu", "mfu"), ("hfu", "hfu"), ("mfu_goodput", "mfu_goodput")):
        text = page.evaluate(f"document.querySelector('#figure-{key} .value').textContent")
        if flops.get(value) is not None:
            assert text == percent(flops[value])
    overflowing = page.evaluate(
        "[...document.querySelectorAll('.figure .value')]"
        ".filter(v => v.scrollWidth > v.clientWidth + 1).length"
    )
    assert overflowing == 0

    # time lost by cause: the budget's lines, largest first, with their shares of the wall clock
    expected = _lost_lines(document)
    assert expected, "each run of this test loses time"
    rows = page.evaluate(
        "[...document.querySelectorAll('#time-lost tbody tr')]"
        ".map(r => [...r.cells].map(c => c.textContent.trim()))"
    )
    assert [r[0] for r in rows] == [line["name"] for line in expected]
    assert [r[1] for r in rows] == [duration(line["seconds"]) for line in expected]
    assert [r[2] for r in rows] == [percent(line["share"]) for line in expected]
    assert all(r[3] and r[4] for r in rows)  # GPU-hours and what measured it

    # the costliest verdicts, then both blocks on the first screen, side by side
    codes = page.evaluate(
        "[...document.querySelectorAll('#top-verdicts li code')].map(c => c.textContent)"
    )
    assert codes == _top_codes(document)
    lost, verdicts = _box(page, "#time-lost table"), _box(page, "#top-verdicts")
    assert lost["bottom"] <= HEIGHT and verdicts["bottom"] <= HEIGHT
    assert _apart(lost, verdicts)
    assert _box(page, ".headline")["bottom"] <= min(lost["top"], verdicts["top"])
    page.screenshot(shot)

    # below: the waterfall chart (where the document has a waterfall) and the causes table
    steps = (document.get("waterfall") or {}).get("steps") or []
    if steps:
        assert page.evaluate("!!document.querySelector('#chart-waterfall-plot svg.main-svg')")
        labels = page.evaluate("document.getElementById('chart-waterfall-plot').data[0].y")
        assert len(labels) == len(steps) + 2  # the peak, each factor, what was achieved
        for label, step in zip(labels[1:], steps, strict=False):
            assert step["name"] in label
            assert step["formula"].split("(")[0].strip() in label.replace("&amp;", "&")
        table = page.evaluate("document.querySelector('#waterfall table').textContent")
        assert all(step["formula"] in table for step in steps)
        assert percent(document["waterfall"]["achieved"]) in table
        assert _box(page, "#waterfall")["top"] >= max(lost["bottom"], verdicts["bottom"])
    else:
        assert "No waterfall" in page.evaluate("document.getElementById('waterfall').textContent")
    intervals = (
        len(document["slow_steps"])
        + len(document["stalls"])
        + len(document["restarts"])
        + len(document["goodput"].get("attributed") or [])
    )
    shown = page.evaluate("document.querySelectorAll('#causes tbody tr').length")
    assert shown == min(intervals, 50)
    assert page.evaluate("!!document.querySelector('#health')")
    page.screenshot(shot.with_name(shot.stem + "-full.png"), full_page=True)


def test_bundled_example(page: Page, tmp_path: Path) -> None:
    report = write_report([str(EXAMPLE)], EXAMPLE_ARGS, tmp_path / "report.html")
    document = summary_json([str(EXAMPLE)], EXAMPLE_ARGS)
    _check_first_screen(page, report, document, tmp_path / "example.png")
    # the example's evaluation stall is a row of the causes table, with its evidence
    causes = page.evaluate("document.querySelector('#causes tbody').textContent")
    (stall,) = document["slow_steps"]
    assert stall["cause"]["evidence"] in causes
    # the timer chart's phases are told apart by hue: no two share a colour
    colours = page.evaluate(
        "document.getElementById('chart-timers-plot')._fullData.map(t => t.marker.color)"
    )
    assert len(colours) >= 8 and len(set(colours)) == len(colours)


def test_tensorboard_run(page: Page, tmp_path: Path, tensorboard_run: Path) -> None:
    sources = [str(tensorboard_run)]
    report = write_report(sources, BIG_RUN, tmp_path / "report.html")
    document = summary_json(sources, BIG_RUN)
    _check_first_screen(page, report, document, tmp_path / "tensorboard.png")
    # the 47x spike: the time axis opens on log, which keeps the 1.5 s baseline readable, and
    # the buttons under the chart switch it
    plot = "document.getElementById('chart-step-time-plot')"
    assert SPIKE_AT in page.evaluate(f"{plot}.data[0].x")
    assert page.evaluate(f"{plot}.layout.yaxis.type") == "log"
    page.evaluate(f"{plot}.scrollIntoView()")
    page.screenshot(tmp_path / "tensorboard-log-axis.png")
    for button, axis in ((0, "linear"), (1, "log")):
        page.evaluate(
            f"document.querySelectorAll('#chart-step-time-plot .updatemenu-button')[{button}]"
            ".dispatchEvent(new MouseEvent('click', {bubbles: true}))"
        )
        assert page.evaluate(f"{plot}.layout.yaxis.type") == axis


def test_wandb_offline_run(page: Page, tmp_path: Path, wandb_run: Path) -> None:
    sources = [str(wandb_run)]
    report = write_report(sources, BIG_RUN, tmp_path / "report.html")
    document = summary_json(sources, BIG_RUN)
    _check_first_screen(page, report, document, tmp_path / "wandb.png")


@pytest.mark.parametrize(
    ("log", "args"),
    [
        ("deepspeed/pipeline_restart", ["--gpu", "a100-sxm4-80gb"]),
        ("megatron_deepspeed/bigscience_gpt2_3d_ds_on.out", ["--gpu", "v100-sxm2"]),
    ],
)
def test_deepspeed_log(page: Page, tmp_path: Path, log: str, args: list[str]) -> None:
    sources = [str(FIXTURES / log)]
    report = write_report(sources, args, tmp_path / "report.html")
    document = summary_json(sources, args)
    _check_first_screen(page, report, document, tmp_path / "deepspeed.png")
