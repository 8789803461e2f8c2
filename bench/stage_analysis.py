"""The analysis of 1,000,000 records (warm-up, slow steps, periodic stalls, restarts),
against one polars rolling median over the same step times. The synthetic run is built once,
as an input (`bench.synthetic`); each measured child reads it."""

from __future__ import annotations

import random
from pathlib import Path

import polars as pl

from bench import synthetic
from bench.harness import Case, Command, child_argv

NAME = "analysis"
FULL = 1_000_000
QUICK = 200_000


def cases(workdir: Path, quick: bool) -> list[Case]:
    records = QUICK if quick else FULL
    folder = str(synthetic.save(workdir / f"run-{records}", *synthetic_run(records)))
    return [
        Case(
            NAME,
            f"{records:,} records",
            records,
            "records",
            Command("analyse()", child_argv("analyse", folder)),
            (Command("one rolling median", child_argv("rolling-median", folder)),),
        )
    ]


def synthetic_run(records: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A run of `records` iterations with every kind of trouble the analysis looks for, and
    two per-rank timers every 1,000 iterations (the test factories' generator)."""
    from tests.analysis_factories import synthetic_run as make_run
    from tests.analysis_factories import timer_metrics

    run = make_run(
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
