"""The analysis of 1,000,000 records (warm-up, slow steps, periodic stalls, restarts),
against one polars rolling median over the same step times."""

from __future__ import annotations

from pathlib import Path

from bench.harness import Case, Command, child_argv

NAME = "analysis"
FULL = 1_000_000
QUICK = 200_000


def cases(workdir: Path, quick: bool) -> list[Case]:
    records = QUICK if quick else FULL
    return [
        Case(
            NAME,
            f"{records:,} records",
            records,
            "records",
            Command("analyse()", child_argv("analyse", str(records))),
            (Command("one rolling median", child_argv("rolling-median", str(records))),),
        )
    ]
