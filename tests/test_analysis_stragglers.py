"""Per-rank spread of the metrics logged by several ranks."""

from __future__ import annotations

import pytest

from loganalyzer.analysis.stragglers import RankValue, find_stragglers
from tests.analysis_factories import make_metrics


def test_slowest_ranks_and_spread_per_metric() -> None:
    rows: list[tuple[int, str, float, int | None]] = []
    for iteration in (10, 20, 30):
        for rank in range(8):
            value = 150.0 if rank == 5 else 100.0 + rank
            rows.append((iteration, "timer/forward-compute", value, rank))
            rows.append((iteration, "memory/max_allocated_mb", 1000.0 + 10 * rank, rank))
    rows.append((20, "timer/forward-compute", 900.0, 2))  # one bad iteration is not a straggler
    rows.append((10, "lm loss", 2.0, None))
    memory, forward = find_stragglers(make_metrics(rows))
    assert forward.metric == "timer/forward-compute"
    assert forward.ranks == 8
    assert forward.median == pytest.approx(103.5)
    assert forward.max == 150.0
    assert forward.spread == pytest.approx(150.0 / 103.5)
    assert forward.top == (RankValue(5, 150.0), RankValue(7, 107.0), RankValue(6, 106.0))
    assert memory.metric == "memory/max_allocated_mb"
    assert memory.top[0] == RankValue(7, 1070.0)


def test_metric_from_one_rank_has_no_spread() -> None:
    assert find_stragglers(make_metrics([(1, "timer/optimizer", 5.0, 0)])) == ()
