"""Work the harness times in a child process of its own (so its peak RSS is its own).

    python -m bench.children analyse RECORDS
    python -m bench.children rolling-median RECORDS

Each prints its result and, last, `{"seconds": s, "cpu_seconds": c}`: the wall and CPU time
(all threads) of the measured section alone, without building the synthetic input.
"""

from __future__ import annotations

import json
import random
import sys
import time

import polars as pl


def _synthetic(records: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A run of `records` iterations with every kind of trouble the analysis looks for, and
    two per-rank timers every 1,000 iterations (the test factories' generator)."""
    from tests.analysis_factories import synthetic_run, timer_metrics

    run = synthetic_run(
        records,
        seed=1,
        warmup=(5.0, 1.5),
        spikes=sorted(random.Random(2).sample(range(10, records), 100)),
        period=5000,
        sustained=(records * 2 // 5, records * 2 // 5 + 20_000, 2.0),
        restart=(records * 7 // 10, 300, 1200.0),
        stalls={records * 3 // 10: 600.0},
    )
    slow = list(range(1, records + 1, 1000))
    metrics = timer_metrics(
        slow, {"forward-compute": [300.0] * len(slow), "backward-compute": [600.0] * len(slow)}
    )
    return run.table, metrics


def analyse(records: int) -> None:
    from loganalyzer.analysis import analyse as run_analysis

    table, metrics = _synthetic(records)
    start, cpu = time.perf_counter(), time.process_time()
    result = run_analysis(table, metrics)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    print(len(result.slow.steps))
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds}))


def rolling_median(records: int) -> None:
    """The baseline: one centred rolling median over the step times, the single most
    expensive primitive the analysis needs, in polars alone."""
    from loganalyzer.analysis.baseline import WINDOW

    table, _ = _synthetic(records)
    start, cpu = time.perf_counter(), time.process_time()
    table.select(pl.col("step_time_s").rolling_median(WINDOW, min_samples=1, center=True))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds}))


if __name__ == "__main__":
    {"analyse": analyse, "rolling-median": rolling_median}[sys.argv[1]](int(sys.argv[2]))
