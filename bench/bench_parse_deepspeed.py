"""Benchmark: parse a large DeepSpeed log; time and peak memory as ratios against a baseline.

Writes a log of --size-mb in the shape DeepSpeed prints at `"log_level": "info"` with
`wall_clock_breakdown` (per step: two micro-step timer lines and the step's timer line; every
5 steps the `step=` and ThroughputTimer lines), then runs, each in a fresh subprocess so peak
RSS is its own:
  baseline  read the file in the same chunks and split it into lines (the I/O floor);
  parse     DeepSpeedParser().parse(file).

    python bench/bench_parse_deepspeed.py --size-mb 512
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
path = Path(sys.argv[2])
start = time.perf_counter()
if sys.argv[1] == "baseline":
    from loganalyzer.sources import iter_line_chunks
    records = sum(len(lines) for _, lines in iter_line_chunks(path))
else:
    from loganalyzer.parsers.deepspeed import DeepSpeedParser
    records = DeepSpeedParser().parse(path).table.height
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": time.perf_counter() - start, "peak_rss_mb": peak_mb,
                  "records": records}))
"""

STAMP = "[2026-11-22 00:19:05,827] [INFO]"
MICRO = (
    "[Rank 0] time (ms) | fwd_microstep: 0.41 | bwd_microstep: 0.66 | bwd_inner_microstep: 0.64"
    " | bwd_allreduce_microstep: 0.01 | step_microstep: 0.01\n"
)
STEP = (
    "[Rank 0] time (ms) | fwd: 0.65 | bwd: 2.14 | bwd_inner: 1.22 | bwd_allreduce: 0.90"
    " | step: 1.27\n"
)


def write_log(path: Path, size_mb: int) -> int:
    """The log; returns the step lines written (the records the parser must find)."""
    target, written, step, records = size_mb * 1024 * 1024, 0, 0, 0
    with path.open("w") as out:
        out.write(f"{STAMP} [config.py:678:print] DeepSpeedEngine configuration:\n")
        out.write(f"{STAMP} [config.py:678:print]   train_batch_size ............. 16\n")
        while written < target:
            block = []
            for _ in range(1000):
                step += 1
                block += [MICRO, MICRO]
                if step % 5 == 0:
                    records += 1
                    block.append(
                        f"{STAMP} [logging.py:123:log_dist] [Rank 0] step={step}, skipped=0,"
                        " lr=[0.001], mom=[[0.9, 0.95]]\n"
                        f"{STAMP} [timer.py:264:stop] epoch=0/micro_step={2 * step}/global_step="
                        f"{step}, RunningAvgSamplesPerSec=3797.0,"
                        f" CurrSamplesPerSec={3000 + step % 997}, MemAllocated=0.7GB,"
                        " MaxMemAllocated=0.7GB\n"
                    )
                block.append(STEP)
            text = "".join(block)
            out.write(text)
            written += len(text)
    return records


def run_child(mode: str, path: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=512)
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp()) / "deepspeed.log"
    start = time.perf_counter()
    records = write_log(path, args.size_mb)
    size_mb = path.stat().st_size / 1e6
    print(f"wrote {size_mb:.0f} MB, {records} step lines in {time.perf_counter() - start:.1f} s")
    base, parse = run_child("baseline", path), run_child("parse", path)
    assert parse["records"] == records, (parse["records"], records)
    for name, result in (("baseline (read+split)", base), ("parse", parse)):
        print(
            f"{name:>22}: {result['seconds']:7.2f} s  {size_mb / result['seconds']:7.1f} MB/s"
            f"  peak RSS {result['peak_rss_mb']:7.0f} MB"
        )
    print(
        f"ratios parse/baseline: time {parse['seconds'] / base['seconds']:.2f}, "
        f"peak memory {parse['peak_rss_mb'] / base['peak_rss_mb']:.2f}"
    )
    path.unlink()


if __name__ == "__main__":
    main()
