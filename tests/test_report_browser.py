"""The report in real headless Chromium (Debian's `chromium`), with networking cut off.

Skipped only where Chromium is not installed and CI is not set: under CI=true a missing
browser fails these tests (`.ci/run` installs it).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.render.numbers import duration, number, percent
from tests.chromium import Page, chromium, chromium_path
from tests.hostile import PAYLOADS, write_hostile_log
from tests.report_helpers import EXAMPLE, EXAMPLE_ARGS, summary_json, write_report


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    if chromium_path() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; CI must install it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with chromium() as tab:
        yield tab


def test_bundled_example_opens_offline_with_every_chart(page: Page, tmp_path: Path) -> None:
    report = write_report([str(EXAMPLE)], EXAMPLE_ARGS, tmp_path / "report.html")
    document = summary_json([str(EXAMPLE)], EXAMPLE_ARGS)
    opened = page.open(report)
    assert opened.errors == []
    assert opened.requests == []
    assert opened.dialogs == []

    plots = page.evaluate("document.querySelectorAll('.plot').length")
    drawn = page.evaluate("document.querySelectorAll('.plot svg.main-svg').length")
    empty = page.evaluate(
        "[...document.querySelectorAll('.plot')]"
        ".filter(p => !p.querySelector('svg.main-svg')).length"
    )
    assert plots >= 5  # step time, TFLOPS, curves, distribution, timers, ranks
    assert drawn >= plots
    assert empty == 0

    mfu = page.evaluate("document.querySelector('#figure-mfu .value').dataset.value")
    mfu_text = page.evaluate("document.querySelector('#figure-mfu .value').textContent")
    step = page.evaluate("document.querySelector('#figure-step_time .value').dataset.value")
    step_text = page.evaluate("document.querySelector('#figure-step_time .value').textContent")
    assert float(mfu) == document["flops"]["mfu"]
    assert mfu_text == percent(document["flops"]["mfu"])
    assert float(step) == document["step_time_s"]["median"]
    assert step_text == number(document["step_time_s"]["median"], ".4g", " s")
    budget = page.evaluate("document.querySelector('#time-budget .legend').textContent")
    productive = document["goodput"]["lines"][0]
    assert productive["name"] == "productive steady steps"
    assert duration(productive["seconds"]) in budget

    shot = page.screenshot(tmp_path / "report.png")
    assert shot.stat().st_size > 20_000
    page.screenshot(tmp_path / "report-full.png", full_page=True)


def test_hostile_log_text_stays_text(page: Page, tmp_path: Path) -> None:
    log = write_hostile_log(tmp_path)
    report = write_report([str(log)], ["--gpu", "h100-sxm"], tmp_path / "report.html")
    opened = page.open(report)
    assert opened.dialogs == []
    assert opened.errors == []
    assert opened.requests == []
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("document.scripts.length") == 3  # chart data, plotly.js, the page's
    text = page.evaluate("document.body.innerText")
    for payload in PAYLOADS:
        assert payload in text  # shown as text, in the config table and the quoted log line
    config = page.evaluate("document.querySelector('#config details').textContent")
    assert all(payload in config for payload in PAYLOADS)  # the tensorboard_dir value
    quoted = page.evaluate("document.querySelector('#slow-steps code').textContent")
    assert all(payload in quoted for payload in PAYLOADS)
    # the file name reaches the chart data and its hover text as text too
    hover = page.evaluate("document.getElementById('chart-step-time-plot').data[0].customdata[0]")
    assert "&lt;img src=x onerror=alert(3)&gt;" in hover


def test_prints_to_pdf(page: Page, tmp_path: Path) -> None:
    report = write_report([str(EXAMPLE)], EXAMPLE_ARGS, tmp_path / "report.html")
    page.open(report)
    pdf = base64.b64decode(page.send("Page.printToPDF", printBackground=True)["data"])
    assert pdf.startswith(b"%PDF")
    assert pdf.count(b"/Type /Page") - pdf.count(b"/Type /Pages") >= 3


def test_comparison_opens_offline_with_its_charts(
    page: Page, tmp_path: Path, shared_logs: Path
) -> None:
    runs = shared_logs / "bigscience" / "gpt2-meg-ds-3d"
    out = tmp_path / "compare.html"
    result = CliRunner().invoke(
        main,
        [
            "compare",
            "-q",
            str(runs / "meg_ds_3d_gpt2_perf_n16-ds-on.out"),
            str(runs / "meg_ds_3d_gpt2_perf_n16-ds-off.out"),
            "--gpu",
            "v100-sxm2",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    opened = page.open(out)
    assert (opened.errors, opened.requests, opened.dialogs) == ([], [], [])
    assert page.evaluate("document.querySelectorAll('.plot svg.main-svg').length") >= 2
    traces = page.evaluate("document.getElementById('chart-compare-step-time-plot').data.length")
    assert traces == 2
    page.screenshot(tmp_path / "compare.png")
