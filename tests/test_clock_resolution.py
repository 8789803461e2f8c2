"""Clocks with a resolution: step times read as differences of a coarse clock (tqdm's elapsed
time in whole seconds) show no slow step on a clean run, and their steady pace is the
cumulative clock's, through the summary the CLI prints."""

from __future__ import annotations

import json
import math
import random
import re
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.analysis import analyse
from loganalyzer.analysis.clocks import RESOLUTION, relative_excess, source_clocks
from loganalyzer.analysis.events import SAVE_EVENT
from loganalyzer.cli import main
from loganalyzer.load import Loaded
from loganalyzer.model import Run, SourceInfo, empty_metrics
from loganalyzer.summary import build_summary
from tests.analysis_factories import START, make_metrics, make_table

SOURCE = "train.log"


def clock_readings(
    true_steps: Sequence[float], interval: int, resolution: float
) -> tuple[list[float], list[float]]:
    """Step times as a parser derives them from a clock that truncates to `resolution`
    (tqdm's `format_interval(int(elapsed))`): each record's elapsed reading minus the one
    before, over its interval; the clock starts at zero with training. And the readings."""
    readings, clock, elapsed, previous = [], [], 0.0, 0
    for k in range(0, len(true_steps), interval):
        elapsed += math.fsum(true_steps[k : k + interval])
        ticks = math.floor(elapsed / resolution)
        readings.append((ticks - previous) * resolution / interval)
        clock.append(ticks * resolution)
        previous = ticks
    return readings, clock


def coarse_run(
    true_steps: Sequence[float],
    interval: int,
    resolution: float,
    *,
    stated: bool = True,
    stamped: bool = False,
) -> Run:
    """A run as a parser hands it over: one source whose records' step times were read from
    a clock of `resolution` seconds, which the source states (`stated`) or leaves unsaid;
    with `stamped`, each record carries that clock's reading as its timestamp."""
    readings, clock = clock_readings(true_steps, interval, resolution)
    stamps = [START + timedelta(seconds=s) for s in clock] if stamped else None
    table = make_table(readings, interval=interval, timestamps=stamps)
    table = table.with_columns(source=pl.lit(SOURCE))
    source = SourceInfo(SOURCE, "hf_trainer", table.height, resolution if stated else None)
    return Run(
        framework="hf_trainer", config={}, table=table, metrics=empty_metrics(), sources=[source]
    )


def summary(run: Run) -> dict[str, Any]:
    return build_summary(Loaded(run), {"shape": {}, "run": {}})


def slow_records(doc: dict[str, Any]) -> dict[str, int]:
    """What the summary calls slow: slow steps (spikes, stalls, periodic, sustained), stalls
    between timestamps and warm-up records."""
    return {
        "slow_steps": len(doc["slow_steps"]),
        "periodic": len(doc["periodic"]),
        "stalls": len(doc["stalls"]),
        "warmup": sum(w["records"] for w in doc["warmup"]),
    }


CLEAN = dict.fromkeys(("slow_steps", "periodic", "stalls", "warmup"), 0)


@settings(max_examples=60, deadline=None)
@given(
    resolution=st.sampled_from([1.0, 0.001]),
    interval=st.integers(1, 100),
    records=st.integers(20, 150),
    pace_ticks=st.floats(0.05, 30.0),
    jitter=st.floats(0.0, 0.03),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_clean_run_on_a_coarse_clock_shows_no_slow_step_and_its_true_pace(
    resolution: float, interval: int, records: int, pace_ticks: float, jitter: float, seed: int
) -> None:
    """For random step times (a pace of 0.05 to 30 ticks, each step within ±3 % of it) read
    from a clock of 1 s or 1 ms over logging intervals of 1 to 100 steps: nothing is slow
    and the steady pace is within resolution / (10 * interval) of the true one."""
    rng = random.Random(seed)
    pace = pace_ticks * resolution
    steps = [pace * (1 + rng.uniform(-jitter, jitter)) for _ in range(records * interval)]
    doc = summary(coarse_run(steps, interval, resolution))
    assert slow_records(doc) == CLEAN
    truth = math.fsum(steps) / len(steps)
    assert doc["step_time_s"]["median"] == pytest.approx(truth, abs=resolution / (10 * interval))
    assert doc["step_time_s"]["pace_method"] == "cumulative_clock"
    assert doc["step_time_s"]["steady_records"] == records
    assert doc["clocks"] == [{"source": SOURCE, "resolution_s": resolution, "inferred": False}]
    assert "STEP_TIME_DRIFT" not in {v["code"] for v in doc["verdicts"]}


def test_the_issues_run_infers_a_whole_second_clock_when_none_is_stated() -> None:
    """The issue's case: 1,500 steps at 0.84 s, a record every 10, elapsed in whole seconds
    (0.8 or 0.9 s a step). The median was 0.800 s and 60 records were slow (all periodic);
    the data shows its clock: every total a whole second, neighbours alternating."""
    run = coarse_run([0.84] * 1500, 10, 1.0, stated=False)
    doc = summary(run)
    assert slow_records(doc) == CLEAN
    assert doc["step_time_s"]["median"] == pytest.approx(0.84, abs=0.01)
    assert doc["clocks"] == [{"source": SOURCE, "resolution_s": 1.0, "inferred": True}]
    (note,) = [w for w in doc["warnings"] if "resolution" in w]
    assert note.startswith(f"assumption: {SOURCE} times its records with a clock of 1 s")


def test_a_real_stall_on_a_coarse_clock_is_still_found() -> None:
    """The interval rule holds for a stall the clock resolves: 30 s lost in one of 150
    records of 10 steps is a stall, and the pace is that of the other records."""
    steps = [0.84] * 1500
    steps[705] += 30.0
    doc = summary(coarse_run(steps, 10, 1.0))
    (step,) = doc["slow_steps"]
    assert (step["iteration"], step["kind"]) == (710, "stall")
    assert step["lost_s"] == pytest.approx(30.0, abs=2.0)
    assert doc["step_time_s"]["median"] == pytest.approx(0.84, abs=0.1 / 149)


def test_a_slowdown_within_one_tick_is_not_evidence_but_one_beyond_it_is() -> None:
    """At interval 1 on a 1 s clock a 0.3 s step reads 0 or 1 s: the readings of 1 s are not
    slow (the zeros are readings too, counted in the pace); a 4 s step is."""
    steps = [0.3] * 300
    steps[150] = 4.0
    doc = summary(coarse_run(steps, 1, 1.0, stamped=True))
    assert [(s["iteration"], s["kind"]) for s in doc["slow_steps"]] == [(151, "spike")]
    assert doc["step_time_s"]["median"] == pytest.approx(0.3, abs=0.1)
    assert not [w for w in doc["warnings"] if "no usable step time" in w]
    # the budget counts the zero readings' iterations as run, not as missing from the log
    lines = {line["name"]: line["seconds"] for line in doc["goodput"]["lines"]}
    assert lines["iterations not in the log"] == 0
    assert lines["untimed gaps"] == 0
    assert doc["goodput"]["wall_s"] == math.floor(sum(steps))


@pytest.mark.parametrize(
    ("steps", "interval"),
    [
        ([1.0] * 199 + [2.0], 1),  # one slow record of a run timed in whole seconds
        ([1.0] * 100 + [2.0] * 100, 1),  # a slowdown, as a block
        ([1.25] * 200, 1),  # a fine clock that never ticks between two values
        ([0.8, 0.9] * 4, 10),  # too few records to tell
    ],
)
def test_no_clock_is_inferred_without_its_evidence(steps: list[float], interval: int) -> None:
    assert source_clocks(make_table(steps, interval=interval), {}) == ()


def test_a_fine_clock_is_analysed_as_before() -> None:
    """No coarse clock: the pace is the median of the records, as it always was."""
    result = analyse(make_table([1.0, 1.1, 1.2, 0.9, 5.0] * 10), empty_metrics())
    assert result.clocks == ()
    assert result.step_time_s.pace_method == "median"
    assert result.step_time_s.median == 1.05


def test_a_save_is_not_charged_for_a_tick_of_a_coarse_clock() -> None:
    """A record after a printed save that reads one tick high (0.9 s against the pace of
    0.84 s) is within the clock's resolution: no time goes to the save."""
    run = coarse_run([0.84] * 1500, 10, 1.0)
    readings = run.table["step_time_s"].to_list()
    # saves just before records that read high (record k covers iterations 10k+1..10k+10)
    saves = [10 * k for k in range(50, 150) if readings[k] == 0.9][:3]
    run.metrics = make_metrics([(iteration, SAVE_EVENT, 1.0, None) for iteration in saves])
    doc = summary(run)
    assert len(saves) == 3
    assert doc["goodput"]["attributed"] == []
    assert {line["name"]: line["seconds"] for line in doc["goodput"]["lines"]}[
        "checkpoint saves"
    ] == 0


def trainer_stdout(true_steps: Sequence[float], logging_steps: int) -> str:
    """Trainer stdout as transformers 4.x prints it to a terminal, written from the format
    strings: the `***** Running training *****` banner (trainer.py `_inner_training_loop`),
    tqdm's default bar `{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining},
    {rate_fmt}]` redrawn after `\\r` each step with its elapsed time as
    `format_interval(int(t))`, and every `logging_steps` the logs dict (`ProgressCallback.
    on_log`), then the final metrics."""
    total = len(true_steps)
    lines = [
        "***** Running training *****",
        "  Num examples = 48,000",
        "  Num Epochs = 1",
        "  Instantaneous batch size per device = 32",
        f"  Total optimization steps = {total:,}",
    ]

    def clock(seconds: float) -> str:
        minutes, s = divmod(int(seconds), 60)
        hours, m = divmod(minutes, 60)
        return f"{hours:d}:{m:02d}:{s:02d}" if hours else f"{m:02d}:{s:02d}"

    bar, elapsed = [f"  0%|          | 0/{total} [00:00<?, ?it/s]"], 0.0
    for n, step in enumerate(true_steps, start=1):
        elapsed += step
        rate = n / elapsed
        left = (total - n) / rate
        times = f"[{clock(elapsed)}<{clock(left)}, {rate:5.2f}it/s]"
        bar.append(f"{100 * n // total:3d}%|#         | {n}/{total} {times}")
        if n % logging_steps == 0:
            loss = 2.0 - n / total
            logs = f"{{'loss': {loss:.4f}, 'learning_rate': 5e-05, 'epoch': {n / total:.2f}}}"
            lines.append("\r".join(bar) + f"\r{'':50s}\r{logs}")
            bar = [bar[-1]]
    lines.append(
        f"{{'train_runtime': {elapsed:.4f}, 'train_samples_per_second': "
        f"{32 * total / elapsed:.3f}, 'train_steps_per_second': {total / elapsed:.3f}, "
        "'train_loss': 1.5, 'epoch': 1.0}"
    )
    return "\n".join(lines) + "\n"


def test_summary_of_trainer_stdout_timed_by_tqdm(tmp_path: Path) -> None:
    """End to end: the issue's run as the Trainer prints it. The step times are read from
    tqdm's whole-second elapsed time; the summary shows no slow step and the pace of 0.84 s
    (it showed 0.800 s and 60 periodic slow steps)."""
    log = tmp_path / "train.log"
    log.write_text(trainer_stdout([0.84] * 1500, 10))
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(log)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["sources"][0]["format"] == "hf_trainer"
    assert doc["iterations"]["logged"] == 150
    assert slow_records(doc) == CLEAN
    assert doc["step_time_s"]["median"] == pytest.approx(0.84, abs=1 / 1500 + 1e-9)
    assert doc["step_time_s"]["pace_method"] == "cumulative_clock"
    assert [(c["source"], c["resolution_s"]) for c in doc["clocks"]] == [(str(log), 1.0)]


def test_the_terminal_says_how_the_pace_was_taken(tmp_path: Path) -> None:
    log = tmp_path / "train.log"
    log.write_text(trainer_stdout([0.84] * 1500, 10))
    result = CliRunner().invoke(main, ["summary", "-q", str(log)])
    assert result.exit_code == 0, result.output
    found = re.search(
        r"step time   steady pace \(total time over iterations of a cumulative clock\) "
        r"([0-9.]+) s over 150 records",
        result.stdout,
    )
    assert found is not None, result.stdout
    # within r / (10 * interval) of the truth: tqdm's own rate (0.84s/it) or the clock's total
    assert float(found.group(1)) == pytest.approx(0.84, abs=1.0 / 100)


def test_a_drift_on_a_coarse_clock_is_measured_on_its_cumulative_clock() -> None:
    """A run that slows from 0.84 to 1.1 s a step in its last tenth drifts by 31 % (the
    medians of its readings, 0.8 and 1.1 s, would say 37.5 %)."""
    steps = [0.84] * 1350 + [1.1] * 150
    result = analyse(coarse_run(steps, 10, 1.0).table, empty_metrics(), clocks={SOURCE: 1.0})
    assert result.drift is not None
    assert result.drift.pace_method == "cumulative_clock"
    assert result.drift.relative_change == pytest.approx(1.1 / 0.84 - 1, abs=0.01)


def test_a_real_trainer_log_timed_by_tqdm_per_step(shared_logs: Path) -> None:
    """excerpts/hf_trainer_5.txt (transformers 4.57.6, a bar update a step, elapsed in whole
    seconds: `25%|██▌       | 10/40 [00:12<00:45,  1.51s/it] 28%|██▊       | 11/40
    [00:15<00:53,  1.85s/it] 30%|███       | 12/40 [00:18<00:58,  2.08s/it]`), 40 steps in
    34 s. Read as a median of readings it ran at 1.0 s a step over 17 records, the 18 steps
    that read 0 s untimed; on its whole-second clock, at 24 s / 36 steps, with the steps
    that took 3 s (11) and 4 s (21, after the evaluation at 20) slow. Step 12 is timed by
    the bar's own (smoothed) rate, 2.08 s/it, which its clock (3 s) agrees with to a tick:
    its excess over the local baseline (1.3 s) is less than the tick the source states."""
    result = CliRunner().invoke(
        main, ["summary", "-q", "--json", str(shared_logs / "excerpts" / "hf_trainer_5.txt")]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [c["resolution_s"] for c in doc["clocks"]] == [1.0]
    assert doc["step_time_s"]["pace_method"] == "cumulative_clock"
    assert doc["step_time_s"]["median"] == pytest.approx(24 / 36, abs=1 / 36)
    assert {s["iteration"] for s in doc["slow_steps"]} == {11, 21}
    assert not [w for w in doc["warnings"] if "no usable step time" in w]


def test_an_excess_over_a_baseline_that_reads_zero_is_finite() -> None:
    """A 0.3 s step read on a whole-second clock every iteration mostly reads 0 s: the
    baseline reads zero, and a record is judged against what the clock resolves (1 s / 1)."""
    frame = pl.DataFrame(
        {
            "step": [0.0, 1.0, 0.0, 5.0, 0.0, 4.0],
            "level": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "interval": [1, 1, 1, 1, 1, 1],
            RESOLUTION: [1.0, 1.0, 1.0, 1.0, 1.0, 0.0],
        }
    )
    excess = frame.select(relative_excess(pl.col("step"), pl.col("level"), frame)).to_series()
    # one tick is nothing the clock resolves; 5 s is 4 s beyond it, 4 resolutions; a fine
    # clock's zero baseline gives nothing relative
    assert excess.to_list() == [0.0, 0.0, 0.0, 4.0, 0.0, 0.0]


def test_the_report_names_the_pace_line_as_it_was_taken(shared_logs: Path, tmp_path: Path) -> None:
    """hf_trainer_5's pace is its whole-second clock's total over its steps: the charts'
    dashed line is named so, not as a median."""
    out = tmp_path / "report.html"
    source = str(shared_logs / "excerpts" / "hf_trainer_5.txt")
    result = CliRunner().invoke(main, ["report", "-q", source, "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert page.count("steady pace (cumulative clock)") == 2
    assert "steady pace (median)" not in page
