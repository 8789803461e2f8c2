"""CPU time per step of the Megatron stdout parser: `python -m bench.profile_stdout LOG`.

py-spy attributes polars' time to the Python line that started it, but polars runs on its
own threads, two chunks at a time: the shares it shows are of samples, not of work. Here the
chunks are scanned one after another on one polars thread, and each step is timed in process
CPU time (inclusive: a step's time contains the steps it calls). The sum is the parser's CPU
cost on one core; on two threads the wall time is lower and the CPU time a little higher.
"""

from __future__ import annotations

import functools
import os
import resource
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

os.environ["POLARS_MAX_THREADS"] = "1"  # before polars is imported

import polars as pl

from loganalyzer.parsers.megatron import parser, scan, templated

SPENT: Counter[str] = Counter()

# The steps timed, by the module they are looked up in when called.
STEPS: dict[ModuleType, tuple[str, ...]] = {
    scan: (
        "candidate_lines",
        "take_reports",
        "unlabelled",
        "split_glued",
        "having",
        "startup_facts",
        "iteration_records",
        "read_fields",
        "timers",
        "memory_lines",
        "checkpoint_saves",
        "validation_lines",
    ),
    templated: (
        "_iteration_lines",
        "key_value_rows",
        "plain_values",
        "arranged",
        "_records",
        "timestamps",
    ),
    parser: (
        "scan_chunk",
        "_placed",
        "_continued",
        "anchored",
        "long_part",
        "iteration_table",
        "run_config",
        "segment_config",
    ),
}


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def timed(name: str, step: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(step)
    def run(*args: Any, **kwargs: Any) -> Any:
        started = cpu_seconds()
        result = step(*args, **kwargs)
        SPENT[name] += cpu_seconds() - started
        return result

    return run


def serial_chunks(path: Path) -> Iterator[tuple[scan.Chunk, pl.DataFrame]]:
    """The parser's chunks scanned one after another, reading timed apart."""
    frames = scan.stateful_frames(path)
    while True:
        started = cpu_seconds()
        frame: pl.DataFrame | None = next(frames, None)
        SPENT["reading lines, launch state"] += cpu_seconds() - started
        if frame is None:
            return
        yield parser._placed(frame)


def main(path: Path) -> None:
    for module, names in STEPS.items():
        for name in names:
            setattr(module, name, timed(name, getattr(module, name)))
    parser._scanned = serial_chunks  # type: ignore[assignment]
    started, wall = cpu_seconds(), time.perf_counter()
    parser.MegatronParser().parse(path)
    total = cpu_seconds() - started
    megabytes = path.stat().st_size / 1e6
    print(
        f"{path}: {megabytes:,.0f} MB, {total:.2f} s CPU ({megabytes / total:.1f} MB/s on one"
        f" core), {time.perf_counter() - wall:.2f} s wall"
    )
    for name, seconds in SPENT.most_common():
        print(f"  {seconds:7.2f} s  {100 * seconds / total:5.1f} %  {name}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
