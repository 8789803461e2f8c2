"""Throughput of `index` (runs/s and MB/s) with one and two worker processes on the same
generated tree of Megatron-LM runs, against a baseline from the same run.

Not a test: absolute speeds depend on the machine, so the figures that matter are the ratios:
two processes over one (how the pool scales), and index over the baseline (reading and
fingerprinting the same bytes, the least any index must do).

Run from the repository root: `PYTHONPATH=. python bench/bench_index.py` (options: --help).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

# The generated tree comes from the tests, one folder up.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loganalyzer.fleet.engines import PoolEngine
from loganalyzer.fleet.indexer import build_index
from loganalyzer.fleet.manifest import fingerprint
from loganalyzer.fleet.worker import Settings
from tests.fleet_tree import write_tree


def baseline(root: Path) -> float:
    """Seconds to read and fingerprint every file of the tree once."""
    began = time.perf_counter()
    for path in sorted(root.rglob("*")):
        if path.is_file():
            fingerprint(str(path))
    return time.perf_counter() - began


def cpu_seconds() -> float:
    """CPU time (user + system) of this process and of its finished children."""
    mine, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def index_seconds(root: Path, dataset: Path, jobs: int) -> tuple[float, float, int]:
    """Wall and CPU seconds for a first index of the tree with `jobs` processes, and the
    runs analysed. CPU seconds say what the work costs whatever else the machine runs."""
    shutil.rmtree(dataset, ignore_errors=True)
    settings = Settings({"shape": {}, "run": {"gpu": "h100-sxm"}})
    began, cpu = time.perf_counter(), cpu_seconds()
    result = build_index([str(root)], str(dataset), settings, PoolEngine(jobs))
    return time.perf_counter() - began, cpu_seconds() - cpu, result.analysed


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs-per-config", type=int, default=20, help="runs of each of 3")
    parser.add_argument("--records", type=int, default=2000, help="iteration lines per run")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-index-") as folder:
        tree = write_tree(Path(folder) / "fleet", args.runs_per_config, args.records)
        runs = 3 * args.runs_per_config
        megabytes = tree.bytes / 1e6
        print(f"tree: {runs} runs, {megabytes:.1f} MB ({args.records} records per run)")
        base = baseline(tree.root)
        print(f"baseline (read + fingerprint): {base:.2f} s, {megabytes / base:.0f} MB/s")
        speeds = {}
        for jobs in (1, 2):
            seconds, cpu, analysed = index_seconds(tree.root, Path(folder) / "index", jobs)
            speeds[jobs] = seconds
            print(
                f"index, {jobs} process(es): {seconds:.2f} s, {analysed / seconds:.1f} runs/s, "
                f"{megabytes / seconds:.1f} MB/s, {seconds / base:.1f}x the baseline; "
                f"{cpu:.2f} CPU s ({megabytes / cpu:.1f} MB per CPU second)"
            )
        print(f"ratio two processes / one (throughput): {speeds[1] / speeds[2]:.2f}x")
        load = os.getloadavg()[0]
        print(f"load average during the run: {load:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
