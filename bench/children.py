"""Work the harness times in a child process of its own (so its peak RSS is its own).

    python -m bench.children analyse RUN_FOLDER
    python -m bench.children rolling-median RUN_FOLDER
    python -m bench.children index TREE JOBS
    python -m bench.children fingerprint TREE
    python -m bench.children wandb-reference RUN.wandb
    python -m bench.children wandb-pull FOLDER ROWS

Each prints its result and, last, `{"seconds": s, "cpu_seconds": c}`: the wall and CPU time
(all threads) of the measured section alone, without reading its input. RUN_FOLDER holds the
analysis stage's synthetic run (`bench.synthetic`).
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl

from bench import synthetic


def analyse(folder: str) -> None:
    from loganalyzer.analysis import analyse as run_analysis

    table, metrics = synthetic.load(Path(folder))
    start, cpu = time.perf_counter(), time.process_time()
    result = run_analysis(table, metrics)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    print(len(result.slow.steps))
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds}))


def rolling_median(folder: str) -> None:
    """The baseline: one centred rolling median over the step times, the single most
    expensive primitive the analysis needs, in polars alone."""
    from loganalyzer.analysis.baseline import WINDOW

    table, _ = synthetic.load(Path(folder))
    start, cpu = time.perf_counter(), time.process_time()
    table.select(pl.col("step_time_s").rolling_median(WINDOW, min_samples=1, center=True))
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds}))


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
    from loganalyzer.fleet.manifest import fingerprint as file_fingerprint

    start = time.perf_counter()
    for path in sorted(Path(tree).rglob("*")):
        if path.is_file():
            file_fingerprint(str(path))
    print(json.dumps({"seconds": time.perf_counter() - start}))


def wandb_reference(path: str) -> None:
    """The baseline of the W&B stage: every history value of a `.wandb` file read with
    wandb's own protobuf classes and json, the least any reader of it does. The framing is
    the LevelDB log format's, as wandb's former Python reader (`datastore.py`) walked it:
    32 KiB blocks of `crc32 | length | type | data` chunks, each CRC checked."""
    import struct
    import zlib

    from wandb.proto import wandb_internal_pb2

    data = Path(path).read_bytes()
    block, header = 32 * 1024, struct.Struct("<IHB")
    position, parts, rows, values = 7, [], 0, 0
    while position + header.size <= len(data):
        left = block - position % block
        if left < header.size:
            position += left
            continue
        crc, length, kind = header.unpack_from(data, position)
        if length == 0 and kind == 0:
            position += left
            continue
        chunk = data[position + header.size : position + header.size + length]
        position += header.size + length
        if zlib.crc32(chunk, zlib.crc32(bytes([kind]))) != crc:
            raise SystemExit(f"{path}: bad CRC at byte {position}")
        parts.append(chunk)
        if kind in (1, 4):  # FULL or LAST: a whole record
            record = wandb_internal_pb2.Record.FromString(b"".join(parts))  # type: ignore[attr-defined]
            parts = []
            if record.WhichOneof("record_type") == "history":
                rows += 1
                for item in record.history.item:
                    json.loads(item.value_json)
                    values += 1
    print(rows, values)


def wandb_pull(folder: str, rows: str) -> None:
    """The baseline of the cached re-read: the first pull of the run by ID (through the
    loopback replay server: no network)."""
    from bench.wandb_inputs import pull

    print(pull(Path(folder), int(rows)))


COMMANDS: dict[str, Callable[..., None]] = {
    "analyse": analyse,
    "rolling-median": rolling_median,
    "index": index,
    "fingerprint": fingerprint,
    "wandb-reference": wandb_reference,
    "wandb-pull": wandb_pull,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
