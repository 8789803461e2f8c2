"""Run health on tables whose truth is known: skipped and NaN iterations, loss-scale drops,
memory headroom, tokens per second per GPU, the timer breakdown."""

from __future__ import annotations

import polars as pl

from loganalyzer.analysis.health import assess
from loganalyzer.flops.waterfall import timer_shares
from tests.analysis_factories import make_metrics, make_table, timer_metrics, timers_of


def test_counts_drops_memory_and_throughput() -> None:
    table = make_table([1.0] * 6, skipped=[0, 2, 0, 1, 0, 0], nan=[0, 0, 0, 0, 0, 1]).with_columns(
        loss_scale=pl.Series([65536.0, 32768.0, 32768.0, 16384.0, 16384.0, 32768.0])
    )
    memory = make_metrics(
        [(1, "memory/max_allocated_mb", 20480.0, 0), (1, "memory/max_allocated_mb", 24576.0, 3)]
    )
    health = assess(table, memory, timer_shares(timers_of(memory).medians, 1000.0), 32.0, 8192.0, 8)
    assert (health.skipped.total, health.skipped.iterations) == (3, (2, 4))
    assert (health.nan.total, health.nan.iterations) == (1, (6,))
    # 65536 -> 32768 at 2 and 32768 -> 16384 at 4; the rise at 6 is not a drop
    assert (health.loss_scale_drops.total, health.loss_scale_drops.iterations) == (2, (2, 4))
    assert (health.memory.max_allocated_gb, health.memory.rank) == (24.0, 3)
    assert health.memory.headroom == 0.25
    assert health.tokens_per_s_per_gpu == 1024.0


def test_timer_breakdown_lists_leaves_with_their_share_of_the_step() -> None:
    """forward-backward encloses the compute timers: only the leaves are listed."""
    metrics = timer_metrics(
        [1, 2, 3],
        {
            "forward-backward": [900.0] * 3,
            "forward-compute": [300.0] * 3,
            "backward-compute": [600.0] * 3,
            "optimizer": [100.0] * 3,
        },
    )
    shares = timer_shares(timers_of(metrics).medians, 1000.0)
    assert shares.rows() == [
        ("backward-compute", 600.0, 0.6),
        ("forward-compute", 300.0, 0.3),
        ("optimizer", 100.0, 0.1),
    ]


def test_timers_run_outside_an_iteration_take_no_share_of_the_step() -> None:
    """Megatron-core prints `save-checkpoint ...: (30421.34, 30421.36)` among the timers of
    the iteration after a save (modelscope/ms-swift tests/custom/test_megatron.py, in
    fixtures/corpus/megatron/core_2024_swift_qwen2_0_5b_dp2.log): a 30 s save is no 4,226 %
    of a 0.7 s step."""
    metrics = timer_metrics(
        [10, 20],
        {"forward-backward": [600.0] * 2, "save-checkpoint": [30421.34] * 2},
    )
    shares = timer_shares(timers_of(metrics).medians, 720.0)
    assert shares["phase"].to_list() == ["forward-backward"]
