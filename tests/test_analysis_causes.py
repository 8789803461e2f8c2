"""Causes on generated runs whose truth is known: saves, evaluations, a slow data loader, a
straggler rank, fp16 overflow, a restart; with and without the intervals in the config."""

from __future__ import annotations

import random
from collections.abc import Sequence

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.analysis import Analysis, analyse
from loganalyzer.analysis.causes import (
    Causes,
    EventSeen,
    IntervalMultiple,
    PhaseGrowth,
    RankSpread,
    RestartGap,
    attribute,
)
from loganalyzer.analysis.events import SAVE_EVENT, Interval, Schedule
from loganalyzer.analysis.goodput import budget
from loganalyzer.analysis.levers import lever_verdicts
from loganalyzer.analysis.phases import phase_growth
from loganalyzer.analysis.verdicts import MfuInputs, PeriodicSlowSteps, judge
from loganalyzer.flops.waterfall import Waterfall
from loganalyzer.model import empty_metrics
from loganalyzer.render.verdict_wording import finding_message
from loganalyzer.render.wording import lever_message
from tests.analysis_factories import (
    cumulative_timestamps,
    make_metrics,
    make_table,
    synthetic_run,
    timer_metrics,
    timers_of,
)

N = 400
RANKS = 4
SAVE_EVERY = 100
EVAL_EVERY = 70
# What each kind of injected slow step looks like, and the cause it must get.
KINDS = ("save_line", "save_config", "eval_line", "eval_config", "data", "straggler", "overflow")
EXPECTED = {
    "save_line": "checkpoint_save",
    "save_config": "checkpoint_save",
    "eval_line": "evaluation",
    "eval_config": "evaluation",
    "data": "data_loading",
    "straggler": "straggler",
    "overflow": "overflow",
}


def _run(
    injected: dict[int, str], seed: int, configured: bool
) -> tuple[Analysis, Causes, pl.DataFrame, pl.DataFrame]:
    """A run of `N` records of one iteration each; `injected` maps an iteration to the kind of
    slow step it gets (tripled step time plus the evidence its kind leaves in the log)."""
    rng = random.Random(seed)
    steps = [1.0 * (1 + rng.uniform(-0.02, 0.02)) for _ in range(N)]
    skipped = [0] * N
    rows: list[tuple[int, str, float, int | None]] = []
    forward_backward = [800.0] * N
    batch = [5.0] * N
    for iteration, kind in injected.items():
        k = iteration - 1
        steps[k] *= 3.0
        if kind == "save_line":
            rows.append((iteration - 1, SAVE_EVENT, 1.0, None))
        elif kind == "eval_line":
            rows.append((iteration - 1, "validation/lm loss value", 2.5, None))
        elif kind == "data":
            batch[k] = 2005.0
        elif kind == "overflow":
            skipped[k] = 1
        forward_backward[k] = 2800.0
    for k in range(N):
        straggling = injected.get(k + 1) == "straggler"
        for rank in range(RANKS):
            # A straggler: one rank far slower; any other slow step: every rank alike.
            base = 800.0 if straggling and rank != 2 else forward_backward[k]
            rows.append((k + 1, "timer/forward-backward", base + rank, rank))
    metrics = pl.concat(
        [make_metrics(rows), timer_metrics(list(range(1, N + 1)), {"batch-generator": batch})]
    )
    schedule = (
        Schedule(Interval(SAVE_EVERY, "save_interval 100"), Interval(EVAL_EVERY, "eval_interval"))
        if configured
        else Schedule()
    )
    table = make_table(steps, skipped=skipped)
    analysis = analyse(table, metrics, configured_periods=schedule.periods())
    causes = attribute(analysis, table, schedule)
    return analysis, causes, table, metrics


def _slots() -> list[int]:
    """Iterations where a slow step may be injected: spread out, clear of the warm-up, and
    neither on nor right after a multiple of the configured intervals."""

    def on_interval(i: int) -> bool:
        return any((i - 1) % p == 0 or i % p == 0 for p in (SAVE_EVERY, EVAL_EVERY))

    return [i for i in range(30, N - 10, 25) if not on_interval(i)]


@settings(max_examples=15, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=6),
    seed=st.integers(0, 10_000),
    configured=st.booleans(),
)
def test_each_slow_step_gets_its_cause(kinds: list[str], seed: int, configured: bool) -> None:
    slots = _slots()
    injected: dict[int, str] = {}
    for slot, kind in zip(slots, kinds, strict=False):
        if kind == "save_config":
            slot = SAVE_EVERY * (1 + len(injected) % 3) + 1  # lands after a multiple of it
        elif kind == "eval_config":
            slot = EVAL_EVERY * (1 + len(injected) % 4) + 1
        if slot not in injected:
            injected[slot] = kind
    analysis, causes, _, _ = _run(injected, seed, configured)
    flagged = {s.iteration for s in analysis.slow.steps}
    for iteration, kind in injected.items():
        assert iteration in flagged
        cause = causes.for_range(0, iteration, iteration)
        assert cause is not None
        if kind in ("save_config", "eval_config") and not configured:
            # Without the interval in the config, nothing in the log says save or evaluation.
            assert cause.kind not in ("checkpoint_save", "evaluation")
        else:
            assert cause.kind == EXPECTED[kind], (iteration, kind, cause)


def test_evidence_quotes_the_line_or_the_configured_interval() -> None:
    _, causes, _, _ = _run({126: "save_line", 201: "save_config"}, 0, configured=True)
    line = causes.for_range(0, 126, 126)
    configured = causes.for_range(0, 201, 201)
    assert line is not None and configured is not None
    assert isinstance(line.evidence, EventSeen) and line.evidence.line is not None
    assert (line.evidence.kind, line.evidence.iteration, line.evidence.evidence_kind) == (
        "checkpoint_save",
        125,
        "line",
    )
    assert configured.evidence == IntervalMultiple("checkpoint_save", 200, "save_interval 100")


def _two_slow_steps_on(period: int) -> pl.DataFrame:
    steps = [1.0] * 300
    for iteration in (period + 1, 2 * period + 1):
        steps[iteration - 1] = 3.0
    return make_table(steps)


def test_two_occurrences_on_a_configured_interval_are_periodic() -> None:
    table = _two_slow_steps_on(100)
    kinds = {s.kind for s in analyse(table, empty_metrics(), configured_periods=[100]).slow.steps}
    assert kinds == {"periodic"}
    (pattern,) = analyse(table, empty_metrics(), configured_periods=[100]).slow.periodic
    assert (pattern.period_iterations, pattern.occurrences) == (100, 2)


def test_two_occurrences_on_an_unconfigured_interval_are_not() -> None:
    table = _two_slow_steps_on(100)
    assert {s.kind for s in analyse(table, empty_metrics()).slow.steps} == {"spike"}
    assert analyse(table, empty_metrics(), configured_periods=[70]).slow.periodic == ()


def test_two_occurrences_after_save_lines_are_periodic() -> None:
    table = _two_slow_steps_on(100)
    saves = make_metrics([(100, SAVE_EVENT, 1.0, None), (200, SAVE_EVENT, 1.0, None)])
    (pattern,) = analyse(table, saves).slow.periodic
    assert (pattern.period_iterations, pattern.occurrences) == (100, 2)


# Megatron-LM's timers at its default level 1 and at level 2 (which adds the timers that
# forward-backward encloses).
LEVEL_1 = {"optimizer-copy-to-main-grad": 30.0, "optimizer-inner-step": 200.0, "optimizer": 250.0}
LEVEL_2 = {**LEVEL_1, "forward-compute": 2800.0, "backward-compute": 5500.0, "batch-generator": 5.0}


@settings(max_examples=20, deadline=None)
@given(
    level=st.sampled_from([1, 2]),
    growth_ms=st.floats(2000.0, 40000.0),
    optimizer_share=st.floats(0.0, 0.5),
    grown_child=st.sampled_from(["forward-compute", "backward-compute"]),
)
def test_forward_backward_growth_is_named_forward_backward_at_both_levels(
    level: int, growth_ms: float, optimizer_share: float, grown_child: str
) -> None:
    """The Mixtral case: forward-backward grew by many seconds, the optimizer by less."""
    timers = dict(LEVEL_1 if level == 1 else LEVEL_2)
    timers["forward-backward"] = 8400.0
    iterations = list(range(1, 201))
    series = {name: [value] * 200 for name, value in timers.items()}
    slow = 150
    series["forward-backward"][slow - 1] += growth_ms
    series["optimizer"][slow - 1] += optimizer_share * growth_ms
    series["optimizer-inner-step"][slow - 1] += optimizer_share * growth_ms
    if level == 2:
        series[grown_child][slow - 1] += growth_ms
    metrics = timer_metrics(iterations, series)
    row = phase_growth(metrics, pl.Series([slow]), timers_of(metrics)).row(0, named=True)
    assert row["phase"] == "forward-backward"
    assert row["phase_delta_ms"] == pytest.approx(growth_ms)
    assert row["phase_detail"] == (grown_child if level == 2 else None)


def test_restart_cause_names_the_checkpoint_it_resumed_from() -> None:
    run = synthetic_run(200, restart=(120, 20, 300.0), noise=0.01)
    saves = make_metrics([(100, SAVE_EVENT, 1.0, None)])
    analysis = analyse(run.table, saves)
    causes = attribute(analysis, run.table, Schedule())
    (restart,) = causes.restarts
    assert restart.cause.kind == "restart"
    gap = restart.cause.evidence
    assert isinstance(gap, RestartGap) and (gap.from_save, gap.resumed_at) == (True, 100)
    assert (restart.redone_iterations, round(restart.gap_s or 0.0, 6)) == (20, 300.0)


def test_stalls_on_the_configured_save_interval_are_checkpoint_saves() -> None:
    """The AMD Primus case: stalls at 500, 1000 and 1500 with `save_interval 500`."""
    steps = [1.0] * 1600
    stamps = cumulative_timestamps(steps, 1, {499: 60.0, 999: 60.0, 1499: 60.0})
    table = make_table(steps, timestamps=stamps)
    schedule = Schedule(save=Interval(500, "save_interval 500 (primus.log:12)"))
    analysis = analyse(table, empty_metrics(), configured_periods=schedule.periods())
    causes = attribute(analysis, table, schedule)
    stalls = [e for e in causes.entries if e.entry == "stall"]
    assert [(s.last_iteration, s.cause.kind) for s in stalls] == [
        (500, "checkpoint_save"),
        (1000, "checkpoint_save"),
        (1500, "checkpoint_save"),
    ]
    goodput = budget(analysis, causes, table)
    lines = {line.name: line.seconds for line in goodput.lines}
    assert round(lines["checkpoint saves"], 6) == 180.0


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    stalls=st.dictionaries(st.integers(20, 290), st.floats(15.0, 500.0), max_size=3),
    restart=st.booleans(),
    spikes=st.lists(st.integers(30, 280), max_size=4, unique=True),
)
def test_goodput_lines_sum_to_the_timestamped_wall_clock(
    seed: int, stalls: dict[int, float], restart: bool, spikes: Sequence[int]
) -> None:
    run = synthetic_run(
        300,
        seed=seed,
        stalls=stalls,
        spikes=spikes,
        restart=(200, 15, 120.0) if restart else None,
        warmup=(3.0, 1.5),
    )
    analysis = analyse(run.table, empty_metrics())
    causes = attribute(analysis, run.table, Schedule())
    goodput = budget(analysis, causes, run.table)
    stamps = run.table["timestamp"]
    first_work = float(run.table["step_time_s"][0])
    wall = (stamps[-1] - stamps[0]).total_seconds() + first_work
    assert abs(sum(line.seconds for line in goodput.lines) - wall) <= 1e-3 * wall
    assert abs(goodput.wall_s - wall) <= 1e-6 * wall
    assert all(line.seconds >= 0 for line in goodput.lines)


def test_every_kind_at_once() -> None:
    slots = _slots()
    injected = {slots[0]: "save_line", slots[2]: "eval_line", slots[4]: "data"}
    injected |= {
        slots[6]: "straggler",
        slots[8]: "overflow",
        201: "save_config",
        141: "eval_config",
    }
    _, causes, _, _ = _run(injected, 7, configured=True)
    found = {i: causes.for_range(0, i, i) for i in injected}
    assert {i: c.kind for i, c in found.items() if c} == {
        i: EXPECTED[k] for i, k in injected.items()
    }
    straggler = found[slots[6]]
    assert straggler is not None and isinstance(straggler.evidence, RankSpread)
    assert straggler.evidence.rank == 2


def test_periodic_verdict_names_the_cause_it_was_attributed_to() -> None:
    """Saves every 100 iterations, `save_interval 100` in the config: the periodic verdict says
    checkpoint saves instead of 'typically checkpoint saves or evaluation'."""
    table = _two_slow_steps_on(100)
    schedule = Schedule(save=Interval(100, "save_interval 100 (train.log:7)"))
    analysis = analyse(table, empty_metrics(), configured_periods=schedule.periods())
    causes = attribute(analysis, table, schedule)
    # the second save left unattributed: a verdict is left to say that slow step, the first
    # being the save's own (CHECKPOINT_SAVE_COST)
    first_only = Causes(causes.entries[:1], causes.events, causes.restarts)
    inputs = MfuInputs(None, None, None, None, None, None)
    verdicts = judge(analysis, table, inputs, causes=first_only)
    (found,) = [v for v in verdicts if v.code.startswith("PERIODIC")]
    assert isinstance(found.facts, PeriodicSlowSteps) and found.facts.shared is not None
    assert found.facts.shared.kind == "checkpoint_save"
    message = finding_message(found)
    assert "recur every 100 iterations" in message
    assert (
        "checkpoint saves (first: iteration 100 is a multiple of save_interval 100 (train.log:7))"
    ) in message
    assert "typically" not in message


def _startup_timers(line: int, timers: dict[str, float]) -> pl.DataFrame:
    """Start-up timers (ms, no iteration) printed at `line` of the synthetic log."""
    return pl.DataFrame(
        {
            "iteration": [None] * len(timers),
            "name": [f"timer/{name}" for name in timers],
            "value": list(timers.values()),
            "source": ["synthetic.log"] * len(timers),
            "rank": [None] * len(timers),
            "line": [line] * len(timers),
        },
        schema=dict(empty_metrics().schema),
    )


def test_restart_gap_is_split_by_the_new_launch_start_up_timers() -> None:
    """Segment 1 starts at record 121 (line 121) after 300 s; its launch printed 50 s of
    model-and-optimizer-setup (20 s of it load-checkpoint) and 10 s of data iterators."""
    run = synthetic_run(200, restart=(120, 20, 300.0), noise=0.01)
    first_launch = _startup_timers(0, {"model-and-optimizer-setup": 4000.0})
    second_launch = _startup_timers(
        120,
        {
            "load-checkpoint": 20000.0,
            "model-and-optimizer-setup": 50000.0,
            "train/valid/test-data-iterators-setup": 10000.0,
        },
    )
    metrics = pl.concat([first_launch, second_launch])
    analysis = analyse(run.table, metrics)
    causes = attribute(analysis, run.table, Schedule())
    (restart,) = causes.restarts
    split = (restart.startup_s, restart.checkpoint_load_s, restart.other_gap_s)
    assert split == pytest.approx((60.0, 20.0, 240.0))
    goodput = budget(analysis, causes, run.table)
    lines = {line.name: line.seconds for line in goodput.lines}
    # The first launch's 4 s precede the first record; the second's 60 s are inside the gap.
    assert (lines["start-up"], lines["restart gaps"]) == pytest.approx((64.0, 240.0))
    stamps = run.table["timestamp"]
    clock = (stamps[-1] - stamps[0]).total_seconds() + float(run.table["step_time_s"][0])
    assert sum(lines.values()) == pytest.approx(clock + 4.0)
    assert goodput.wall_s == pytest.approx(clock + 4.0)


def test_sustained_slowdown_is_traced_to_the_data_loader() -> None:
    """Iterations 201-260 run at 2x while batch-generator takes 1 s instead of 5 ms."""
    steps = [1.0] * 400
    batch = [5.0] * 400
    for k in range(200, 260):
        steps[k], batch[k] = 2.0, 1005.0
    table = make_table(steps)
    metrics = timer_metrics(
        list(range(1, 401)), {"batch-generator": batch, "optimizer": [50.0] * 400}
    )
    analysis = analyse(table, metrics)
    causes = attribute(analysis, table, Schedule())
    (event,) = analysis.slow.sustained
    cause = causes.for_range(event.segment, event.start_iteration, event.end_iteration)
    assert cause is not None and cause.kind == "data_loading"
    grown = cause.evidence
    assert isinstance(grown, PhaseGrowth) and grown.phase == "batch-generator"
    assert round(grown.delta_ms) == 1000
    goodput = budget(analysis, causes, table)
    lines = {line.name: line.seconds for line in goodput.lines}
    assert lines["data loading"] == pytest.approx(event.lost_s)


def test_the_verdicts_quote_a_cause_s_evidence_in_the_document_s_words() -> None:
    """SLOW_STEPS names the cause of its worst record, STRAGGLER_COST its worst straggler: each
    in the words `render.evidence` gives the cause in the document."""
    slots = _slots()
    analysis, causes, table, _ = _run({slots[5]: "straggler", slots[6]: "overflow"}, 7, False)
    inputs = MfuInputs(None, None, None, None, None, None)
    verdicts = judge(analysis, table, inputs, causes=causes)
    (slow,) = [v for v in verdicts if v.code == "SLOW_STEPS"]
    assert finding_message(slow).endswith(
        f"lost, overflow: 1 skipped iteration (fp16 overflow) logged in iteration {slots[6]}"
    )
    goodput = budget(analysis, causes, table)
    (lever,) = list(lever_verdicts(causes, goodput, Waterfall("", (), None, "", ()), Schedule()))
    assert lever.code == "STRAGGLER_COST"
    assert (
        f"the worst: timer/forward-backward at iteration {slots[5]}: rank 2 at 3.49× the median "
        "rank, against 1.00× typically. Check that rank's node"
    ) in lever_message(lever)
