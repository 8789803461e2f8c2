"""Restarts say why: each restart's `previous_outcome` is how the launch before it ended,
decided by the outcome analysis over the lines between that launch's last iteration and the
next launch's start; and the report marks the run's ending on the step-time chart.

The logs are built from pieces, never edited:
- two launches of a Megatron log: fixtures/megatron/quirks/restart_in_file.log (written from
  Megatron-LM's format strings): lines 1-27 the first launch (iterations 10-60), lines 29-51
  the relaunch (arguments again, iterations 50-80); its own ending line (28) left out;
- a real ending between them: fixtures/endings/nan/pai_megatron_60_assert_interleaved.log
  (whole, 11 lines: https://github.com/alibaba/Pai-Megatron-Patch/issues/60, Megatron's
  `found NaN in local grad norm` assertion on rank 3, its traceback interleaved with another
  rank's), or fixtures/endings/nccl_timeout/ofa_271_torch1_eight_ranks.log (whole, 5 lines:
  https://github.com/OFA-Sys/OFA/issues/271, PyTorch 1.x watchdog timeouts, ranks 1, 3, 2, 6,
  7 on one ALLREDUCE);
- for the chart: lines 1-226 of fixtures/megatron/bigscience_gpt2_tp4_pp8.out (bigscience-
  workshop/bigscience:experiments/gpt2-meg/meg_gpt2_base_n8_dp1_tp4_pp8-1809562.out,
  Megatron-LM May 2021: arguments, iterations 10-200, the validation at 200), before its own
  ending, then the NaN excerpt.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.render.html import view_json
from loganalyzer.render.view import build_view
from tests.conftest import ROOT
from tests.report_helpers import loaded_run

TWO_LAUNCHES = ROOT / "fixtures" / "megatron" / "quirks" / "restart_in_file.log"
FIRST_LAUNCH = 27  # its lines 1-27; 28 is its own ending line; 29- the relaunch
BIGSCIENCE = ROOT / "fixtures" / "megatron" / "bigscience_gpt2_tp4_pp8.out"
BIGSCIENCE_LAUNCH = 226  # before the scancel's `srun: Job step aborted` (227)
ENDINGS = ROOT / "fixtures" / "endings"
NAN_ENDING = ENDINGS / "nan" / "pai_megatron_60_assert_interleaved.log"
NCCL_ENDING = ENDINGS / "nccl_timeout" / "ofa_271_torch1_eight_ranks.log"


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines(keepends=True)


def _two_launches(tmp_path: Path, ending: str) -> Path:
    lines = _lines(TWO_LAUNCHES)
    assert "iteration       60/" in lines[FIRST_LAUNCH - 1]
    assert lines[FIRST_LAUNCH + 1].startswith("-------")  # the relaunch's arguments
    log = tmp_path / "two_launches.log"
    log.write_text("".join(lines[:FIRST_LAUNCH]) + ending + "".join(lines[FIRST_LAUNCH + 1 :]))
    return log


def _summary(log: Path) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["summary", "-q", str(log), "--json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_a_restart_after_a_traceback_says_the_crash(tmp_path: Path) -> None:
    log = _two_launches(tmp_path, NAN_ENDING.read_text(encoding="utf-8"))
    document = _summary(log)

    (restart,) = document["restarts"]
    assert (restart["resumed_at"], restart["after_iteration"]) == (40, 60)
    previous = restart["previous_outcome"]
    assert previous["status"] == "crashed"
    assert previous["reason"] == "nan"
    assert previous["exception"] == "AssertionError"
    assert previous["rank"] == 3
    assert previous["host"] == "set-zw04-kubernetes-pc133.mt"
    assert previous["last_iteration"] == 60
    decides, traceback = previous["evidence"][:2]
    # the excerpt's line 4 (the AssertionError) and line 1 (the Traceback)
    assert (decides["line"], traceback["line"]) == (FIRST_LAUNCH + 4, FIRST_LAUNCH + 1)
    assert "found NaN in local grad norm" in decides["text"]
    # the earlier launch's crash is not the run's ending: the relaunch's log just stops
    assert document["outcome"]["status"] == "unknown"
    assert document["outcome"]["last_iteration"] == 80

    words = (
        "restart at iteration 40 after a NaN on rank 3 at set-zw04-kubernetes-pc133.mt "
        "(AssertionError) at iteration 60: 20 iterations redone"
    )
    text = CliRunner().invoke(main, ["summary", "-q", str(log)]).stdout
    assert f"  {words}, gap 15.0 min, 15.2 min lost\n" in text
    markdown = CliRunner().invoke(main, ["summary", "-q", str(log), "--markdown"]).stdout
    assert f"**Restarts**\n\n- {words}\n" in markdown
    view = build_view(document, loaded_run([str(log)]))
    assert view.restart_sentences == (words,)
    last_cell = "a NaN on rank 3 at set-zw04-kubernetes-pc133.mt (AssertionError)"
    assert view.restarts[0].cells[-1] == last_cell


def test_a_restart_after_an_nccl_timeout_names_rank_and_collective(tmp_path: Path) -> None:
    document = _summary(_two_launches(tmp_path, NCCL_ENDING.read_text(encoding="utf-8")))
    (restart,) = document["restarts"]
    previous = restart["previous_outcome"]
    assert (previous["status"], previous["reason"], previous["rank"]) == (
        "crashed",
        "nccl_timeout",
        1,
    )
    assert previous["collective"]["op"] == "ALLREDUCE"
    assert previous["other_ranks"] == [2, 3, 6, 7]
    view = build_view(document, None)
    assert view.restart_sentences == (
        "restart at iteration 40 after an NCCL timeout on rank 1 (`ALLREDUCE`) at iteration "
        "60: 20 iterations redone",
    )


@pytest.mark.parametrize("split", [False, True], ids=["one file", "a file per launch"])
def test_a_launch_with_no_ending_line_has_an_unknown_previous_outcome(
    tmp_path: Path, split: bool
) -> None:
    if split:  # the synthetic run directory: slurm-1001.out ends at iteration 50, no ending
        log = ROOT / "fixtures" / "megatron" / "restart_dir"
        last, after = (ROOT / "fixtures/megatron/restart_dir/slurm-1001.out", 50)
    else:
        log = _two_launches(tmp_path, "")
        last, after = (log, 60)
    document = _summary(log)

    (restart,) = document["restarts"]
    previous = restart["previous_outcome"]
    assert previous["status"] == "unknown"
    assert previous["reason"] is None
    assert previous["last_iteration"] == after
    # what it rests on: the launch's last iteration record
    (evidence,) = previous["evidence"]
    assert evidence["role"] == "last_record"
    assert f"iteration {after:>8}/" in _lines(Path(last))[evidence["line"] - 1]
    text = CliRunner().invoke(main, ["summary", "-q", str(log)]).stdout
    assert f"after an unknown ending at iteration {after}: " in text


def test_a_single_launch_has_no_restart_to_explain() -> None:
    document = _summary(BIGSCIENCE)
    assert document["restarts"] == []
    assert document["outcome"]["status"] == "killed"


def test_the_step_time_chart_marks_the_ending(tmp_path: Path) -> None:
    """The ending's mark: a dash-dotted vertical line at the last iteration, labelled with its
    status and what it was; a completed run's line ends where it completed, unmarked."""
    # the NaN crash after one launch, no relaunch: the run's own ending
    log = tmp_path / "crashed.out"
    log.write_text("".join(_lines(BIGSCIENCE)[:BIGSCIENCE_LAUNCH]) + NAN_ENDING.read_text())
    document = _summary(log)
    view = build_view(document, loaded_run([str(log)]))
    (chart,) = [c for c in view.charts if c.id == "chart-step-time"]
    layout = chart.figure["layout"]
    (mark,) = [s for s in layout["shapes"] if s.get("x0") == 200 and s["type"] == "line"]
    assert mark["x1"] == 200 and mark["line"]["dash"] == "dashdot"
    assert [a["text"] for a in layout["annotations"]] == ["crashed: AssertionError"]
    assert "ending: crashed: AssertionError" in [t.get("name") for t in chart.figure["data"]]
    assert '"text": "crashed: AssertionError"' in view_json(view)  # what the golden pins

    completed = (
        ROOT / "fixtures" / "endings" / "completed" / "megatron_bridge_3427_after_training_done.log"
    )
    done = _summary(completed)
    assert done["outcome"]["status"] == "completed"
    view = build_view(done, loaded_run([str(completed)]))
    charts = [c for c in view.charts if c.id == "chart-step-time"]
    assert all("annotations" not in c.figure["layout"] for c in charts)
