"""Work the harness times in a child process of its own (so its peak RSS is its own).

    python -m bench.children analyse RECORDS
    python -m bench.children rolling-median RECORDS
    python -m bench.children index TREE JOBS
    python -m bench.children fingerprint TREE

Each prints its result and, last, `{"seconds": s}`: the time of the measured section alone,
without building the synthetic input.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Callable

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
    start = time.perf_counter()
    result = run_analysis(table, metrics)
    seconds = time.perf_counter() - start
    print(len(result.slow.steps))
    print(json.dumps({"seconds": seconds}))


def rolling_median(records: int) -> None:
    """The baseline: one centred rolling median over the step times, the single most
    expensive primitive the analysis needs, in polars alone."""
    from loganalyzer.analysis.baseline import WINDOW

    table, _ = _synthetic(records)
    start = time.perf_counter()
    table.select(pl.col("step_time_s").rolling_median(WINDOW, min_samples=1, center=True))
    print(json.dumps({"seconds": time.perf_counter() - start}))


def index(tree: str, jobs: str) -> None:
    """A first index of `tree` into an empty dataset with `jobs` worker processes."""
    import tempfile

    from loganalyzer.fleet.engines import PoolEngine
    from loganalyzer.fleet.indexer import build_index
    from loganalyzer.fleet.worker import Settings

    with tempfile.TemporaryDirectory(prefix="bench-index-") as folder:
        settings = Settings({"shape": {}, "run": {"gpu": "h100-sxm"}})
        start = time.perf_counter()
        result = build_index([tree], f"{folder}/index", settings, PoolEngine(int(jobs)))
        seconds = time.perf_counter() - start
    print(result.analysed)
    print(json.dumps({"seconds": seconds}))


def fingerprint(tree: str) -> None:
    """The baseline of `index`: read and fingerprint every file of the tree once."""
    from pathlib import Path

    from loganalyzer.fleet.manifest import fingerprint as file_fingerprint

    start = time.perf_counter()
    for path in sorted(Path(tree).rglob("*")):
        if path.is_file():
            file_fingerprint(str(path))
    print(json.dumps({"seconds": time.perf_counter() - start}))


COMMANDS: dict[str, Callable[..., None]] = {
    "analyse": lambda records: analyse(int(records)),
    "rolling-median": lambda records: rolling_median(int(records)),
    "index": index,
    "fingerprint": fingerprint,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
