"""The view model behind the report's first screen and the sections below it: each figure is
the summary document's, printed; nothing is recomputed but the GPU-hours (seconds x GPUs)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from loganalyzer.render.charts import LOG_SPREAD, build_charts
from loganalyzer.render.numbers import duration, percent
from loganalyzer.render.view import build_view, chart_facts, top_verdicts
from tests.conftest import ROOT
from tests.first_screen_runs import write_tensorboard_run
from tests.report_helpers import EXAMPLE, EXAMPLE_ARGS, loaded_run, summary_json


@pytest.fixture(scope="module")
def example() -> tuple[dict[str, Any], Any]:
    return summary_json([str(EXAMPLE)], EXAMPLE_ARGS), loaded_run([str(EXAMPLE)])


def test_time_lost_is_the_budget_ranked_with_gpu_hours(example: tuple[dict[str, Any], Any]) -> None:
    document, run = example
    view = build_view(document, run)
    lines = {line["name"]: line for line in document["goodput"]["lines"]}
    assert [row.label for row in view.lost] == ["warm-up", "evaluation", "start-up"]
    for row in view.lost:
        line = lines[row.label]
        assert row.text == duration(line["seconds"])
        assert row.share == percent(line["share"])
        assert row.evidence
    # 32 GPUs: 15.54 s of warm-up is 0.138 GPU-hours
    assert view.lost[0].gpu_hours == f"{15.5435 * 32 / 3600:.3g}"


def test_top_verdicts_leave_the_ending_to_its_banner(
    example: tuple[dict[str, Any], Any],
) -> None:
    document, run = example
    view = build_view(document, run)
    codes = [v["code"] for v in document["verdicts"]]
    assert "ENDING_KILLED" in codes
    assert [v.code for v in view.top_verdicts] == [c for c in codes if c != "ENDING_KILLED"][:3]
    assert view.ending is not None


def test_top_verdicts_follow_the_documents_ranking_and_never_rank_again(
    example: tuple[dict[str, Any], Any],
) -> None:
    """The analysis ranks verdicts (severity from the time at stake, then `lost_s`); the page
    shows its first three as they come, so page and JSON cannot disagree on what costs most."""
    document, run = example
    reversed_order = copy.deepcopy(document)
    reversed_order["verdicts"] = reversed_order["verdicts"][::-1]
    view = build_view(reversed_order, run)
    ranked = top_verdicts(reversed_order, view.verdicts)
    codes = [v["code"] for v in reversed_order["verdicts"] if not v["code"].startswith("ENDING_")]
    assert [v.code for v in ranked] == codes[:3]


def test_identity_states_parallelism_batch_and_precision(
    example: tuple[dict[str, Any], Any],
) -> None:
    document, run = example
    setup = build_view(document, run).identity.setup
    # the micro-batch size is the run's config (the document has no key for it)
    assert setup == (
        "TP=4 PP=8 DP=1",
        "global batch 4 (micro 1)",
        "sequence length 1,024",
        "fp16",
        "recompute full",
    )
    assert build_view(document).identity.setup[1] == "global batch 4"


def test_waterfall_is_the_documents(example: tuple[dict[str, Any], Any]) -> None:
    document, run = example
    falls = build_view(document, run).waterfall
    assert falls is not None
    steps = document["waterfall"]["steps"]
    assert [s.name for s in falls.steps] == [s["name"] for s in steps]
    assert [s.formula for s in falls.steps] == [s["formula"] for s in steps]
    assert [s.after for s in falls.steps] == [percent(s["value_after"]) for s in steps]
    bubble = falls.steps[0]
    assert bubble.factor == "× 0.364"
    assert bubble.inputs == "p=8, m=4, v=1, bubble_share=63.6 %"
    communication = falls.steps[1]
    assert "backward-embedding-all-reduce 726.2" in communication.inputs  # every timer
    assert "timers_ms: 5 values" in communication.short  # the chart's label: how many
    assert falls.achieved == percent(document["waterfall"]["achieved"])
    chart = build_view(document, run).waterfall_chart
    assert chart is not None
    assert len(chart.figure["data"][0]["y"]) == len(steps) + 2
    assert build_view(document, run, charts=False).waterfall_chart is None


def test_causes_and_health_lay_out_the_document(example: tuple[dict[str, Any], Any]) -> None:
    document, run = example
    view = build_view(document, run)
    (stall,) = document["slow_steps"]
    (row,) = view.causes
    assert (row.iterations, row.entry, row.cause) == ("101–110", "slow step (stall)", "evaluation")
    assert row.evidence == stall["cause"]["evidence"]
    assert row.location.endswith("bigscience_gpt2_tp4_pp8.out:204")  # iteration 110's record
    health = view.health
    assert health is not None
    assert [r.cells[:2] for r in health.counts] == [
        ("skipped iterations", "19"),
        ("NaN iterations", "0"),
        ("loss-scale drops", "2"),
    ]
    assert health.memory == "max allocated 21.6 GB on rank 2 of 32 GB, headroom 32.5 %"
    assert len(health.phases) == 8


def test_step_time_opens_on_a_log_axis_past_a_spike(tmp_path: Path) -> None:
    source = str(write_tensorboard_run(tmp_path / "tb").parent)
    document = summary_json([source], ["--gpu", "h100-sxm", "--num-gpus", "64"])
    charts = {c.id: c for c in build_charts(loaded_run([source]), chart_facts(document))}
    layout = charts["chart-step-time"].figure["layout"]
    assert document["step_time_s"]["max"] / document["step_time_s"]["median"] >= LOG_SPREAD
    assert layout["yaxis"]["type"] == "log"
    assert layout["updatemenus"][0]["active"] == 1


def test_step_time_stays_linear_without_a_spike(example: tuple[dict[str, Any], Any]) -> None:
    document, run = example
    charts = {c.id: c for c in build_charts(run, chart_facts(document))}
    layout = charts["chart-step-time"].figure["layout"]
    assert "type" not in layout["yaxis"]
    assert layout["updatemenus"][0]["active"] == 0
    timers = charts["chart-timers"].figure
    colours = timers["layout"]["colorway"][: len(timers["data"])]
    assert len(set(colours)) == len(colours) == len(timers["data"])


def test_no_waterfall_says_what_is_missing() -> None:
    """The example without `--gpu`: FLOPs are known, the peak is not; a crashed run's log
    with `--gpu`: the peak is known, its FLOPs are not."""
    no_peak = build_view(summary_json([str(EXAMPLE)], []), charts=False)
    assert no_peak.waterfall is None
    assert no_peak.waterfall_missing == "steady MFU unknown; GPU peak unknown"
    crash = str(ROOT / "fixtures/endings/cuda_error/bigscience_tr1_ecc_uncorrectable.log")
    no_flops = build_view(summary_json([crash], ["--gpu", "a100-sxm4-80gb"]), charts=False)
    assert no_flops.waterfall_missing == "steady MFU unknown; FLOPs per iteration unknown"
