"""`compare -o` in real headless Chromium (Debian's `chromium`), with networking cut off:
what a reader sees first when the runs' logs differ in length and in identity.

Skipped only where Chromium is not installed and CI is not set (as `test_report_browser`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.chromium import Page, screen

# The first screen of issue 30's first-screen tests.
WIDTH, HEIGHT = 1400, 900


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    with screen(WIDTH, HEIGHT) as tab:
        yield tab


def test_comparison_of_logs_of_different_lengths_shows_per_iteration_rows(
    page: Page, tmp_path: Path, shared_logs: Path
) -> None:
    # ds-3d on and off: 49 and 62 iterations logged (issue 30: "wall clock 2.2 h vs 111.9 min
    # (-19.2 min)" read as a win)
    runs = shared_logs / "bigscience" / "gpt2-meg-ds-3d"
    sources = [str(runs / f"meg_ds_3d_gpt2_perf_n16-ds-{x}.out") for x in ("off", "on")]
    args = ["compare", "-q", *sources, "--gpu", "v100-sxm2", "--label", "off", "--label", "on"]
    out = tmp_path / "compare.html"
    assert CliRunner().invoke(main, [*args, "-o", str(out)]).exit_code == 0
    compared = json.loads(CliRunner().invoke(main, [*args, "--json"]).stdout)
    opened = page.open(out)
    assert (opened.errors, opened.requests, opened.dialogs) == ([], [], [])

    def row(key: str) -> dict[str, Any]:
        found: dict[str, Any] = page.evaluate(
            f"(() => {{ const r = document.getElementById('compare-{key}'); "
            "const box = r.getBoundingClientRect(); return {bottom: box.bottom, height: "
            "box.height, cells: [...r.querySelectorAll('td.num')].map(c => c.firstChild"
            ".textContent)}; })()"
        )
        return found

    for key in ("iterations", "time_per_iteration", "time_per_1k_iterations"):
        shown = row(key)
        assert shown["cells"] == [c["text"] for c in compared["figures"][key]]
        assert shown["height"] > 0 and shown["bottom"] <= HEIGHT  # on the first screen
    assert row("iterations")["cells"] == ["62 (1–62)", "49 (1–49)"]
    wall = page.evaluate("document.querySelector('#compare-wall_clock .change').textContent")
    assert wall == "other iterations logged: compare per iteration"
    headline = page.evaluate("document.getElementById('compare-headline').textContent")
    assert headline == compared["headline"]
    marked = page.evaluate(
        "[...document.querySelectorAll('.run-identity mark')].map(m => m.textContent)"
    )
    assert marked == ["megatron-deepspeed (DeepSpeed off)", "megatron-deepspeed (DeepSpeed on)"]
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH  # lines wrap
    page.screenshot(tmp_path / "compare-lengths.png")


def test_comparison_marks_what_differs_and_folds_the_rest(
    page: Page, tmp_path: Path, shared_logs: Path
) -> None:
    # Megatron-LM TP4-PP16 at batch 1024 against Megatron-DeepSpeed ZeRO-3 TP4-DP16 at batch
    # 768, 2 and 4 steady records (issue 30: two identical identity lines, 104 differences in
    # alphabetical order, no "low confidence")
    logs = shared_logs / "bigscience"
    sources = [
        str(logs / "gpt2-meg" / "meg_gpt2_perf_n16.out"),
        str(logs / "gpt2-meg-ds-zero" / "meg_ds_zero_gpt2_perf_n16-1999616.out"),
    ]
    out = tmp_path / "compare.html"
    args = ["compare", "-q", *sources, "--gpu", "v100-sxm2", "-o", str(out)]
    assert CliRunner().invoke(main, args).exit_code == 0
    opened = page.open(out)
    assert (opened.errors, opened.requests, opened.dialogs) == ([], [], [])
    marked = page.evaluate(
        "[...document.querySelectorAll('#identity-1 mark')].map(m => m.textContent)"
    )
    assert marked == [
        "megatron-deepspeed (DeepSpeed on)",
        "ZeRO-3 TP4-DP16",
        "batch 768 (micro 48)",
    ]
    assert "TP4-PP16" in page.evaluate("document.getElementById('identity-0').textContent")
    tags = page.evaluate("document.querySelectorAll('.low-confidence').length")
    assert tags == 2
    ranked = page.evaluate(
        "[...document.querySelectorAll('#config-ranked tbody tr td:first-child')]"
        ".map(c => c.textContent)"
    )
    assert ranked[:2] == ["global_batch_size", "micro_batch_size"] and "data_path" not in ranked
    assert page.evaluate("document.getElementById('config-folded').open") is False
    hidden = page.evaluate(
        "[...document.querySelectorAll('#config-folded td:first-child')]"
        ".map(c => c.textContent).includes('data_path')"
    )
    assert hidden is True
    assert page.evaluate("document.documentElement.scrollWidth") <= WIDTH
    page.screenshot(tmp_path / "compare-identity.png")
