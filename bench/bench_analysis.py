"""Time `analyse` on a 1,000,000-record synthetic run, against a baseline from the same run.

Not a test: absolute times depend on the machine, so the figure that matters is the ratio to
what polars alone takes on the same column on the same machine (one centred rolling median
over the step times, the single most expensive primitive the analysis needs).

Run from the repository root: `PYTHONPATH=. python bench/bench_analysis.py`.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

# The synthetic runs come from the test factories, one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loganalyzer.analysis import analyse
from loganalyzer.analysis.baseline import WINDOW
from tests.analysis_factories import synthetic_run, timer_metrics

RECORDS = 1_000_000
REPEATS = 5


def best_of(action: Callable[[], object]) -> tuple[float, float]:
    """Best and median wall time of `REPEATS` runs of `action`, in seconds."""
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> None:
    run = synthetic_run(
        RECORDS,
        seed=1,
        warmup=(5.0, 1.5),
        spikes=sorted(random.Random(2).sample(range(10, RECORDS), 100)),
        period=5000,
        sustained=(400_000, 420_000, 2.0),
        restart=(700_000, 300, 1200.0),
        stalls={300_000: 600.0},
    )
    table = run.table
    slow = list(range(1, RECORDS + 1, 1000))
    metrics = timer_metrics(
        slow, {"forward-compute": [300.0] * len(slow), "backward-compute": [600.0] * len(slow)}
    )

    def baseline() -> object:
        return table.select(
            pl.col("step_time_s").rolling_median(WINDOW, min_samples=1, center=True)
        )

    base_best, base_median = best_of(baseline)
    best, median = best_of(lambda: analyse(table, metrics))
    result = analyse(table, metrics)
    injected = len(run.spikes) + len(run.periodic)
    print(
        f"records: {table.height:,}; slow steps injected {injected}, found {len(result.slow.steps)}"
    )
    print(
        f"baseline (one rolling median, polars): best {base_best:.3f} s, median {base_median:.3f} s"
    )
    print(f"analyse:                               best {best:.3f} s, median {median:.3f} s")
    print(f"ratio analyse / baseline (best):       {best / base_best:.1f}x")


if __name__ == "__main__":
    main()
