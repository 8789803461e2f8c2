"""`compare`: the bigscience 3D runs with and without DeepSpeed, side by side."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.report_helpers import summary_json

PAIR = "bigscience/gpt2-meg-ds-3d/meg_ds_3d_gpt2_perf_n16-ds-{}.out"


@pytest.fixture
def pair(shared_logs: Path) -> list[str]:
    return [str(shared_logs / PAIR.format("on")), str(shared_logs / PAIR.format("off"))]


def test_names_the_faster_run_and_by_how_much(pair: list[str]) -> None:
    args = ["compare", "-q", *pair, "--label", "ds-on", "--label", "ds-off", "--gpu", "v100-sxm2"]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    compared = json.loads(result.stdout)
    on, off = (summary_json([p], ["--gpu", "v100-sxm2"]) for p in pair)
    ratio = off["throughput"]["tokens_per_s"] / on["throughput"]["tokens_per_s"]
    assert ratio > 1  # ds-off trained faster in these logs
    assert compared["faster"].startswith("ds-off is the fastest")
    assert f"{ratio:.3f}×" in compared["faster"]
    tokens = compared["figures"]["tokens_per_s"]
    assert [t["value"] for t in tokens] == [
        on["throughput"]["tokens_per_s"],
        off["throughput"]["tokens_per_s"],
    ]
    assert tokens[0]["change"] is None
    assert f"({ratio:.3f}×)" in tokens[1]["change"]
    assert compared["config_differences"]["deepspeed"] == ["True", "False"]
    assert "num_layers" not in compared["config_differences"]

    text = CliRunner().invoke(main, args)
    assert text.exit_code == 0
    assert "ds-off is the fastest" in text.stdout


def test_html_overlays_both_runs(pair: list[str], tmp_path: Path) -> None:
    out = tmp_path / "compare.html"
    result = CliRunner().invoke(
        main, ["compare", "-q", *pair, "--gpu", "v100-sxm2", "--x", "tokens", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert 'id="chart-compare-step-time"' in page
    assert 'id="chart-compare-rate"' in page
    assert "Config differences" in page


def test_one_run_or_mismatched_labels_is_a_usage_error(pair: list[str]) -> None:
    one = CliRunner().invoke(main, ["compare", "-q", pair[0]])
    assert one.exit_code == 2
    labels = CliRunner().invoke(main, ["compare", "-q", *pair, "--label", "a"])
    assert labels.exit_code == 2
    assert "one per run" in labels.stderr


def test_without_tokens_the_faster_run_is_judged_per_step() -> None:
    from loganalyzer.render.compare import faster_sentence
    from loganalyzer.render.viewmodel import Figure

    def headline(step: float) -> tuple[Figure, ...]:
        return (
            Figure("tokens_per_s", "tokens/s", "unknown", None),
            Figure("step_time", "median step time", f"{step} s", step),
        )

    text = faster_sentence(["a", "b"], [headline(2.0), headline(1.6)])
    assert text.startswith("b is the fastest per iteration: median step time 1.6 s against 2 s")
    assert "1.250×" in text


def test_time_axis_falls_back_to_logged_time_without_timestamps(pair: list[str]) -> None:
    from loganalyzer.render.compare import RunInput, build_compare
    from tests.report_helpers import loaded_run

    runs = [RunInput(p, summary_json([p], ["--gpu", "v100-sxm2"]), loaded_run([p])) for p in pair]
    view = build_compare(runs, x_axis="time")
    step = next(c for c in view.charts if c.id == "chart-compare-step-time")
    xs = step.figure["data"][0]["x"]
    assert xs == sorted(xs) and xs[-1] > 1  # hours, increasing
