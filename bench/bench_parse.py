"""Benchmark: parse a large Megatron log; time and peak memory as ratios against baselines.

Writes a log of --size-mb: by default a dense synthetic one in the format Megatron-LM prints
today (every line is data: iteration lines with timestamps and throughput, timer blocks,
per-rank memory lines, a little NCCL noise), or, with --from-log, a real log repeated (each
copy a new launch, as a run restarted many times). Then runs, each in a fresh subprocess so
peak RSS is its own:
  baseline  read the file in the same chunks and split it into lines (the I/O floor);
  parse     MegatronParser().parse(file).
Prints seconds, MB/s and peak RSS for both, and parse/baseline ratios.

    python bench/bench_parse.py --size-mb 1024
    python bench/bench_parse.py --from-log fixtures/megatron/bigscience_gpt2_tp4_pp8.out
"""

from __future__ import annotations

import argparse
import json
import os
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
    from loganalyzer.parsers.megatron import MegatronParser
    run = MegatronParser().parse(path)
    records = run.table.height
elapsed = time.perf_counter() - start
peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": elapsed, "peak_rss_mb": peak_mb, "records": records}))
"""


def write_log(path: Path, size_mb: int) -> int:
    """A realistic Megatron-LM log of about size_mb MB; returns the iteration lines written."""
    target = size_mb * 1024 * 1024
    iteration = 0
    with path.open("w") as out:
        written = 0
        while written < target:
            block = []
            for _ in range(1000):
                iteration += 1
                block.append(
                    f" [2025-06-01 12:{iteration // 60 % 60:02d}:{iteration % 60:02d}]"
                    f" iteration {iteration:8d}/ 5000000 |"
                    f" consumed samples: {iteration * 512:12d} |"
                    f" elapsed time per iteration (ms): {2000 + iteration % 97:.1f} |"
                    f" throughput per GPU (TFLOP/s/GPU): {400 + iteration % 13:.1f} |"
                    " learning rate: 1.000000E-04 | global batch size:   512 |"
                    f" lm loss: {2 + (iteration % 100) / 1000:.6E} | loss scale: 1.0 |"
                    " grad norm: 0.812 | number of skipped iterations:   0 |"
                    " number of nan iterations:   0 |\n"
                )
                block.append("(min, max) time across ranks (ms):\n")
                block.append(
                    "    forward-backward ...............................: (1900.12, 1950.55)\n"
                )
                if iteration % 50 == 0:
                    block.append(
                        f"[Rank 3] (after {iteration} iterations) memory (MB) | allocated: 1000.5"
                        " | max allocated: 2000.2 | reserved: 3000.0 | max reserved: 3000.0\n"
                    )
                block.append(
                    "r7i3n0:38600:38856 [2] NCCL INFO comm 0x1450d4001060 rank 3 nranks 16\n"
                )
            text = "".join(block)
            out.write(text)
            written += len(text)
    return iteration


def repeat_log(path: Path, source: Path, size_mb: int) -> int:
    """`source` repeated to about size_mb MB; returns the iteration lines written."""
    text = source.read_text()
    copies = max(1, size_mb * 1024 * 1024 // len(text))
    with path.open("w") as out:
        for _ in range(copies):
            out.write(text)
    return copies * sum(1 for line in text.splitlines() if "elapsed time per iteration" in line)


def run_child(mode: str, path: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--keep", type=Path, help="write the log here and keep it")
    parser.add_argument("--from-log", type=Path, help="repeat this real log instead")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    path = args.keep or folder / "megatron.log"
    start = time.perf_counter()
    if args.from_log:
        iterations = repeat_log(path, args.from_log, args.size_mb)
    else:
        iterations = write_log(path, args.size_mb)
    size_mb = path.stat().st_size / 1e6
    took = time.perf_counter() - start
    print(f"wrote {size_mb:.0f} MB, {iterations} iteration lines in {took:.1f} s")
    base = run_child("baseline", path)
    parse = run_child("parse", path)
    assert parse["records"] == iterations, (parse["records"], iterations)
    for name, result in (("baseline (read+split)", base), ("parse", parse)):
        print(
            f"{name:>22}: {result['seconds']:7.2f} s  {size_mb / result['seconds']:7.1f} MB/s"
            f"  peak RSS {result['peak_rss_mb']:7.0f} MB"
            f" ({result['peak_rss_mb'] / size_mb:.2f} × file)"
        )
    print(
        f"ratios parse/baseline: time {parse['seconds'] / base['seconds']:.2f}, "
        f"peak memory {parse['peak_rss_mb'] / base['peak_rss_mb']:.2f}"
    )
    if args.keep is None:
        os.unlink(path)


if __name__ == "__main__":
    main()
