"""DeepSpeed's monitor event file beside the stdout of the run that wrote it
(`../shared/logs/generated/ds_run`): the same step times from both, and which ones.

What the monitor writes (DeepSpeed's `engine._write_monitor`, called at each gradient
accumulation boundary before the global timers are printed and reset): the *global* timers
`fwd`, `bwd`, `bwd_inner`, `bwd_allreduce` and `step`, i.e. the sum over the optimizer step's
micro-steps (2 here), in ms, against `global_samples` (16 per step: 8 per micro-step x 2).
So the x-axis is samples (iteration = samples / 16) and each value covers one optimizer
step, not one micro-step: stdout prints the same five timers on its `time (ms) | fwd: ...`
line of each step (rounded to 0.01 ms), and the micro-step lines add up to them.

Which stdout: the event file was written by the run of `combined_info.log` (its events fall
between that run's ThroughputTimer lines); `combined.log` is an earlier run of the same
script into the same folder, whose event file the second run replaced.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.model import Run
from loganalyzer.parsers.deepspeed import DeepSpeedParser
from loganalyzer.parsers.tensorboard import TensorBoardParser

TIMERS = ("timer/fwd", "timer/bwd", "timer/step")  # what the monitor's step time adds up


@pytest.fixture(scope="module")
def runs(shared_logs: Path) -> tuple[Run, Run, Run]:
    folder = shared_logs / "generated" / "ds_run"
    (event_file,) = (folder / "out" / "tb" / "tiny").glob("events.out.tfevents.*")
    parser = DeepSpeedParser()
    return (
        TensorBoardParser().parse(event_file),
        parser.parse(folder / "combined_info.log"),
        parser.parse(folder / "combined.log"),
    )


def _timer_sums(stdout: Run, names: tuple[str, ...]) -> pl.DataFrame:
    """Per step, the sum of the named timers stdout printed, in seconds."""
    timers = stdout.metrics.filter(pl.col("name").cast(pl.String).is_in(names))
    return (
        timers.group_by("iteration")
        .agg(stdout_s=pl.col("value").sum() / 1000, lines=pl.len())
        .sort("iteration")
    )


def test_the_event_file_belongs_to_the_run_of_combined_info_log(
    runs: tuple[Run, Run, Run],
) -> None:
    events, info, earlier = runs
    stamps = dict(events.table.select("iteration", "timestamp").iter_rows())
    # the ThroughputTimer lines of steps 5, 10, 15, 20 are printed as the step ends: within
    # a millisecond of the monitor's events of that step (stdout keeps milliseconds)
    for step, printed in info.table.select("iteration", "timestamp").iter_rows():
        assert abs((stamps[step] - printed).total_seconds()) < 0.002, step
    last_line_of_earlier_run = datetime(2026, 11, 22, 0, 12, 6, 305000, tzinfo=timezone.utc)
    assert min(stamps.values()) > last_line_of_earlier_run
    assert earlier.table["step_time_s"][0] == pytest.approx(0.13646)  # not this file's 0.0418
    assert events.table["step_time_s"][0] == pytest.approx(0.041831, abs=1e-6)


def test_monitor_times_cover_an_optimizer_step_not_a_micro_step(
    runs: tuple[Run, Run, Run],
) -> None:
    events, info, _ = runs
    monitored = events.metrics.filter(
        pl.col("name").cast(pl.String) == "Train/Samples/elapsed_time_ms_forward"
    ).select("iteration", monitor_s=pl.col("value") / 1000)
    per_step = _timer_sums(info, ("timer/fwd",)).join(monitored, on="iteration")
    micro = _timer_sums(info, ("timer/fwd_microstep",))
    assert micro["lines"].to_list() == [2] * 20  # two micro-steps per optimizer step
    assert per_step.height == 20
    both = per_step.join(micro, on="iteration", suffix="_micro")
    for step, global_s, monitor_s, micro_s in both.select(
        "iteration", "stdout_s", "monitor_s", "stdout_s_micro"
    ).iter_rows():
        assert monitor_s == pytest.approx(global_s, abs=0.5e-5), step  # printed to 0.01 ms
        # two roundings, and the global timer runs a few microseconds around the micro one
        assert monitor_s == pytest.approx(micro_s, abs=3e-5), step
    assert events.table["global_batch_size"].unique().to_list() == [16]  # 8 x 2 micro-steps


def test_step_times_from_stdout_and_event_files_agree_within_1_percent(
    runs: tuple[Run, Run, Run],
) -> None:
    """Both read fwd + bwd + step of each optimizer step: stdout from its per-step timer line
    (the DeepSpeed parser's long table), the event files from the monitor."""
    events, info, _ = runs
    stdout = _timer_sums(info, TIMERS)
    assert stdout["lines"].to_list() == [3] * 20
    both = events.table.select("iteration", "step_time_s").join(stdout, on="iteration")
    assert both.height == 20
    relative = ((both["step_time_s"] - both["stdout_s"]).abs() / both["stdout_s"]).max()
    assert isinstance(relative, float) and relative < 0.01
    assert "forward + backward + step" in str(events.get("step_time_source"))


def test_the_throughput_timer_measures_the_whole_step_so_it_cannot_agree(
    runs: tuple[Run, Run, Run],
) -> None:
    """The step times the DeepSpeed parser takes from this stdout come from the
    ThroughputTimer (16 / CurrSamplesPerSec, steps 5, 10, 15, 20): the wall time from each
    micro-step's forward to the end of its `step()`, engine work between the timed sections
    included. At ~4 ms steps that work is 2-7 %, so these are longer than fwd + bwd + step at
    every step, by more than 1 %: another quantity, not a disagreement."""
    events, info, _ = runs
    both = info.table.select("iteration", whole="step_time_s").join(
        events.table.select("iteration", "step_time_s"), on="iteration"
    )
    assert both["iteration"].to_list() == [5, 10, 15, 20]
    excess = (both["whole"] / both["step_time_s"] - 1).to_list()
    assert all(0.01 < e < 0.1 for e in excess), excess


def test_summary_of_the_monitor_folder_reads_every_step(shared_logs: Path) -> None:
    folder = shared_logs / "generated" / "ds_run" / "out" / "tb"
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(folder)])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["iterations"] == {
        "logged": 20,
        "covered": 20,
        "first": 1,
        "last": 20,
        "segments": 1,
    }


def test_the_run_folder_reads_the_event_file_as_a_view_of_the_run_that_wrote_it(
    shared_logs: Path,
) -> None:
    """DeepSpeed's stdout prints no loss, so the two are matched by their clocks: the events
    of steps 5, 10, 15 and 20 fall within 2 ms of that run's ThroughputTimer lines. The
    earlier run of `combined.log` stays a run of its own."""
    result = CliRunner().invoke(
        main, ["summary", "-q", str(shared_logs / "generated" / "ds_run"), "--split-runs", "--json"]
    )
    assert result.exit_code == 0, result.output
    documents = json.loads(result.stdout)
    sources = [sorted(Path(s["path"]).name for s in doc["sources"]) for doc in documents]
    assert sorted(sources) == [
        ["combined.log"],
        sorted(["combined_info.log", "events.out.tfevents.1795306742.vm.16409.0"]),
    ]
