"""Benchmark every stage and print one table: `python -m bench [--quick] [--stage NAME]`.

Inputs are generated deterministically under a temporary folder (removed afterwards);
each command runs `--runs` times in a process of its own. See bench/README.md.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import REPEAT_WITHIN_SECONDS, Row, measure, rows, table

# One module per stage, each with NAME and cases(workdir, quick) (bench/harness.py).
STAGES = (
    "stage_startup",
    "stage_analysis",
    "stage_stdout",
    "stage_multifile",
    "stage_tensorboard",
    "stage_wandb",
    "stage_index",
    "stage_report",
)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, one run each")
    parser.add_argument("--runs", type=int, help="runs per command (default 3, 1 with --quick)")
    parser.add_argument("--stage", action="append", help="only this stage (repeatable)")
    parser.add_argument("--workdir", type=Path, help="generate inputs here (kept)")
    args = parser.parse_args()
    runs = args.runs or (1 if args.quick else 3)
    started = time.perf_counter()
    all_rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="loganalyzer-bench-") as scratch:
        workdir = args.workdir or Path(scratch)
        for module_name in STAGES:
            stage = importlib.import_module(f"bench.{module_name}")
            if args.stage and stage.NAME not in args.stage:
                continue
            folder = workdir / stage.NAME
            folder.mkdir(parents=True, exist_ok=True)
            for case in stage.cases(folder, args.quick):
                print(f"{case.stage}: {case.what} ...", file=sys.stderr, flush=True)
                subject = measure(case.subject, runs)
                baselines = [measure(b, runs) for b in case.baselines]
                all_rows.extend(rows(case, subject, baselines))
    print(table(all_rows))
    print(
        f"\nup to {runs} run(s) per command (one more only while its runs took under"
        f" {REPEAT_WITHIN_SECONDS:.0f} s), median wall time, largest peak RSS;"
        f" {time.perf_counter() - started:.0f} s in all",
    )


if __name__ == "__main__":
    main()
