"""The benchmark harness's accounting: how many runs a command gets, runs shared by commands
that read different sections of one child's report, and the time breakdown it prints."""

from __future__ import annotations

import argparse
import types
from pathlib import Path

from bench.__main__ import run_stage
from bench.harness import (
    PYTHON,
    Case,
    Command,
    RunResult,
    _another_fits,
    measure,
    measure_side_by_side,
)
from bench.timing import StageTime, breakdown
from loganalyzer.cores import usable_cores

REPORTS = Command(
    "two sections",
    [PYTHON, "-c", 'print(\'{"seconds": 1.5, "drawn_seconds": 4.0}\')'],
)


def test_a_command_runs_again_only_while_its_runs_took_under_the_limit() -> None:
    assert measure(REPORTS, runs=3, repeat_within=1000.0).runs == 3
    assert measure(REPORTS, runs=3, repeat_within=0.0).runs == 1
    assert measure(REPORTS, runs=2, repeat_within=1000.0).runs == 2


def test_another_run_only_if_it_fits_at_the_mean_length_so_far() -> None:
    assert _another_fits([(6.0, 0.0, 0.0, ""), (6.5, 0.0, 0.0, "")], 20.0)  # 18.75 s
    assert not _another_fits([(6.5, 0.0, 0.0, ""), (7.0, 0.0, 0.0, "")], 20.0)  # 20.25 s
    assert _another_fits([(10.0, 0.0, 0.0, "")], 20.0)
    assert not _another_fits([(10.5, 0.0, 0.0, "")], 20.0)


def test_baselines_run_first_when_they_prepare_the_subjects_input(tmp_path: Path) -> None:
    """The subject reads the file its baseline writes: measured in the other order, it would
    fail and stop the harness. The table keeps the subject first."""
    made = tmp_path / "made"
    subject = Command("reads", [PYTHON, "-c", f"open({str(made)!r}).read()"])
    baseline = Command("writes", [PYTHON, "-c", f"open({str(made)!r}, 'w').write('x')"])
    case = Case("stage", "input", 0, "", subject, (baseline,), baselines_first=True)
    stage = types.SimpleNamespace(NAME="stage", cases=lambda folder, quick: [case])
    spent = StageTime("stage")
    options = argparse.Namespace(quick=True, repeat_within=0.0)
    found = run_stage(stage, tmp_path, options, 1, spent)  # type: ignore[arg-type]
    assert [row.command for row in found] == ["reads", "writes"]
    assert [m.command.label for m in spent.commands] == ["reads", "writes"]


def test_side_by_side_commands_run_at_the_same_time_each_with_its_own_figures() -> None:
    """Two commands that sleep 1.5 s: side by side the harness waits about 1.5 s, not 3,
    counted once; each keeps its own wall time."""
    sleeps = [Command(f"sleep {i}", [PYTHON, "-c", "import time; time.sleep(1.5)"]) for i in (1, 2)]
    first, second = measure_side_by_side(sleeps, runs=1, repeat_within=0.0)
    assert first.seconds >= 1.5 and second.seconds >= 1.5
    if usable_cores() >= 2:
        assert first.spent < 2.8 and second.spent == 0.0 and second.alongside
    assert (first.runs, second.runs) == (1, 1)


def test_commands_with_the_same_argv_share_their_runs() -> None:
    shared: dict[tuple[str, ...], list[RunResult]] = {}
    first = measure(REPORTS, runs=2, repeat_within=1000.0, shared=shared)
    drawn = Command("drawn", REPORTS.argv, seconds_key="drawn_seconds")
    second = measure(drawn, runs=3, repeat_within=1000.0, shared=shared)
    assert (first.seconds, second.seconds) == (1.5, 4.0)
    assert first.runs == second.runs == 2
    assert not first.reused and first.spent > 0
    assert second.reused and second.spent == 0.0  # counted once, where the runs ran


def test_the_breakdown_splits_each_stage_into_inputs_and_runs() -> None:
    stage = StageTime("stdout", inputs=12.0, inputs_cpu=11.0)
    stage.commands.append(measure(REPORTS, runs=1))
    text = breakdown([stage], total=20.0, total_cpu=15.0)
    assert text.startswith("harness: 20 s wall (15 s CPU): inputs 12 s, measured commands")
    assert "| stdout | " in text and "| 12 (11) |" in text


def test_a_commands_peak_rss_is_its_own_however_big_the_harness_grew() -> None:
    """Linux gives a child at least the peak RSS of the process that forked it; commands are
    started by the small spawner, so a bare interpreter stays near its own ~10 MB while the
    process measuring it holds 300 MB."""
    ballast = b"x" * (300 << 20)
    bare = measure(Command("bare", [PYTHON, "-S", "-c", "pass"]), runs=1)
    assert len(ballast) and bare.peak_rss_mb < 50
