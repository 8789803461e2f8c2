"""The benchmark harness's accounting: how many runs a command gets, runs shared by commands
that read different sections of one child's report, and the time breakdown it prints."""

from __future__ import annotations

from bench.harness import PYTHON, Command, RunResult, measure
from bench.timing import StageTime, breakdown

REPORTS = Command(
    "two sections",
    [PYTHON, "-c", 'print(\'{"seconds": 1.5, "drawn_seconds": 4.0}\')'],
)


def test_a_command_runs_again_only_while_its_runs_took_under_the_limit() -> None:
    assert measure(REPORTS, runs=3, repeat_within=1000.0).runs == 3
    assert measure(REPORTS, runs=3, repeat_within=0.0).runs == 1
    assert measure(REPORTS, runs=2, repeat_within=1000.0).runs == 2


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
