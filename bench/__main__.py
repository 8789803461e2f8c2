"""Benchmark every stage and print one table: `python -m bench [--quick] [--stage NAME]`.

Inputs are generated deterministically under a temporary folder (each stage's removed once it
is measured), or under `--workdir` (kept); each command runs up to `--runs` times in a
process of its own. See bench/README.md.
"""

from __future__ import annotations

import argparse
import compileall
import importlib
import shutil
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

from bench.harness import (
    REPEAT_WITHIN_SECONDS,
    Measurement,
    Row,
    RunResult,
    measure,
    measure_side_by_side,
    rows,
    save,
    start_spawner,
    table,
)
from bench.timing import StageTime, breakdown, cpu_seconds, progress

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
    "stage_hostile",
)


def compile_sources() -> None:
    """Byte-compile the package as `pip install` does, so that start-up is measured as a user
    sees it: with PYTHONDONTWRITEBYTECODE set (as on some machines) a checkout would otherwise
    compile every module again in every measured run."""
    root = Path(__file__).resolve().parent.parent
    for package in ("loganalyzer", "parsers"):
        compileall.compile_dir(root / package, quiet=1)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small inputs, one run each")
    parser.add_argument("--runs", type=int, help="runs per command (default 3, 1 with --quick)")
    parser.add_argument(
        "--repeat-within",
        type=float,
        default=REPEAT_WITHIN_SECONDS,
        metavar="SECONDS",
        help="run a command again only while its runs took under this (default %(default)s)",
    )
    parser.add_argument("--stage", action="append", help="only this stage (repeatable)")
    parser.add_argument("--workdir", type=Path, help="generate inputs here (kept)")
    parser.add_argument(
        "--save",
        type=Path,
        metavar="JSON",
        help="also write the rows here (bench/results.json is what docs/performance.md shows)",
    )
    args = parser.parse_args()
    compile_sources()
    start_spawner()
    runs = args.runs or (1 if args.quick else 3)
    started, started_cpu = time.perf_counter(), cpu_seconds()
    all_rows: list[Row] = []
    stage_times: list[StageTime] = []
    with tempfile.TemporaryDirectory(prefix="loganalyzer-bench-") as scratch:
        workdir = args.workdir or Path(scratch)
        for module_name in STAGES:
            stage = importlib.import_module(f"bench.{module_name}")
            if args.stage and stage.NAME not in args.stage:
                continue
            folder = workdir / stage.NAME
            folder.mkdir(parents=True, exist_ok=True)
            stage_times.append(StageTime(stage.NAME))
            measured = run_stage(stage, folder, args, runs, stage_times[-1])
            all_rows.extend(measured)
            if args.workdir is None:
                shutil.rmtree(folder)  # the next stage's inputs need the room
    # The commands' CPU as the spawner reported it: it is not a child this process waited for.
    commands_cpu = sum(stage.running_cpu for stage in stage_times)
    total, total_cpu = time.perf_counter() - started, cpu_seconds() - started_cpu + commands_cpu
    print(table(all_rows))
    if args.save:
        save(args.save, all_rows, total)
    print(
        f"\nup to {runs} run(s) per command (one more only while it and the runs so far,"
        f" at their mean length, fit in {args.repeat_within:.0f} s), median wall time,"
        " largest peak RSS.",
    )
    print()
    print(breakdown(stage_times, total, total_cpu))


def run_stage(
    stage: ModuleType, folder: Path, args: argparse.Namespace, runs: int, spent: StageTime
) -> list[Row]:
    """Write one stage's inputs, measure its cases; the rows, and its time in `spent`."""
    say(f"{stage.NAME}: writing inputs ...")
    inputs_started, inputs_cpu = time.perf_counter(), cpu_seconds()
    stage_cases = stage.cases(folder, args.quick)
    spent.inputs = time.perf_counter() - inputs_started
    spent.inputs_cpu = cpu_seconds() - inputs_cpu
    say(f"{stage.NAME}: inputs in {spent.inputs:.1f} s ({spent.inputs_cpu:.1f} s CPU)")
    found: list[Row] = []
    shared: dict[tuple[str, ...], list[RunResult]] = {}
    for case in stage_cases:
        say(f"{case.stage}: {case.what} ...")
        subject: list[Measurement] = []
        baselines: list[Measurement] = []
        steps = [(subject, [case.subject], False), (baselines, case.baselines, case.side_by_side)]
        for into, commands, together in reversed(steps) if case.baselines_first else steps:
            if together:
                into.extend(measure_side_by_side(commands, runs, args.repeat_within))
                for measurement in into:
                    say(progress(measurement))
                continue
            for command in commands:
                into.append(measure(command, runs, args.repeat_within, shared))
                say(progress(into[-1]))
        measured = [*subject, *baselines]
        spent.commands.extend(measured)
        found.extend(rows(case, measured[0], measured[1:]))
    say(f"{stage.NAME}: {spent.total:.1f} s")
    return found


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
