"""The script teams write today to get numbers out of a Megatron log: the baseline.

A literal prefilter per kind of line, then one precompiled regular expression per field,
every value appended to a list. It keeps the same fields loganalyzer does (every field of
the iteration lines, memory lines and timers), and prints how many iteration lines it read.

    python bench/field_script.py LOG
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict

ITERATION_FIELDS = {
    name: re.compile(pattern)
    for name, pattern in {
        "iteration": r"iteration\s+(\d+)/",
        "timestamp": r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?)\]",
        "consumed_samples": r"consumed samples:\s*(\d+)",
        "step_time_ms": r"elapsed time per iteration \(ms\):\s*([\d.]+)",
        "tflops": r"throughput per GPU \(TFLOP/s/GPU\):\s*([\d.]+)",
        "lr": r"learning rate:\s*([\d.E+-]+)",
        "global_batch_size": r"global batch size:\s*(\d+)",
        "loss": r"lm loss:\s*([\d.E+-]+)",
        "loss_scale": r"loss scale:\s*([\d.]+)",
        "grad_norm": r"grad norm:\s*([\d.]+)",
        "skipped": r"number of skipped iterations:\s*(\d+)",
        "nan": r"number of nan iterations:\s*(\d+)",
    }.items()
}
MEMORY_FIELDS = {
    name: re.compile(pattern)
    for name, pattern in {
        "rank": r"\[Rank (\d+)\]",
        "after": r"after (\d+) iterations",
        "allocated": r"\| allocated: ([\d.]+)",
        "max_allocated": r"max allocated: ([\d.]+)",
        "reserved": r"\| reserved: ([\d.]+)",
        "max_reserved": r"max reserved: ([\d.]+)",
    }.items()
}
ONE_LINE_TIMER = re.compile(r"\|\s*([^|:]+?):\s*([\d.]+)")
TIMER_MINMAX = re.compile(r"^(?:\d+: )?\s+(\S.*?)\s*\.*:\s*\(([\d.]+),\s*([\d.]+)\)")


def main(path: str) -> None:
    columns: dict[str, list[str | None]] = defaultdict(list)
    memory: dict[str, list[str | None]] = defaultdict(list)
    timers: list[tuple[str, float, float | None]] = []
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            if "iteration" in line and "|" in line and "elapsed time" in line:
                for name, pattern in ITERATION_FIELDS.items():
                    found = pattern.search(line)
                    columns[name].append(found.group(1) if found else None)
            elif "memory (MB)" in line:
                for name, pattern in MEMORY_FIELDS.items():
                    found = pattern.search(line)
                    memory[name].append(found.group(1) if found else None)
            elif "time (ms) |" in line:
                timers.extend((k, float(v), None) for k, v in ONE_LINE_TIMER.findall(line))
            elif "...:" in line and (found := TIMER_MINMAX.search(line)):
                timers.append((found.group(1), float(found.group(2)), float(found.group(3))))
    print(len(columns["iteration"]))


if __name__ == "__main__":
    main(sys.argv[1])
