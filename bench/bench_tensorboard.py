"""Read a 3,000,000-event TensorBoard file with loganalyzer, EventAccumulator and tbparse.

Not a test. Each reader runs in its own process (so that peak memory is its own), on the same
file, on the same machine, in the same run: the figures that matter are the ratios.

- loganalyzer: `TensorBoardParser().parse` (every event, into the per-iteration table);
- EventAccumulator with `size_guidance={'scalars': 0}` (keep every scalar) and `Reload()`;
- tbparse: `SummaryReader(path).scalars`.

The file is written with tensorboard's own RecordWriter (Megatron-style `simple_value`
events: 3 tags x 1,000,000 steps); its CRCs are computed in C (`crc32c`), as tensorboard's
pure-Python CRC would take minutes.

Run from the repository root: `python bench/bench_tensorboard.py [--events 3000000]`.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TAGS = ("lm loss", "learning-rate", "iteration-time")

# (imports, timed reading): imports are not timed, a command line pays them once.
READERS = {
    "loganalyzer": (
        """
from pathlib import Path
from loganalyzer.parsers.tensorboard import TensorBoardParser
import loganalyzer.parsers.tensorboard.events, tensorboard.compat.proto.event_pb2
""",
        """
run = TensorBoardParser().parse(Path(PATH))
count = run.table.height * 3 + run.metrics.height
""",
    ),
    "EventAccumulator": (
        """
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
""",
        """
acc = EventAccumulator(PATH, size_guidance={"scalars": 0})
acc.Reload()
count = sum(len(acc.Scalars(tag)) for tag in acc.Tags()["scalars"])
""",
    ),
    "tbparse": (
        """
from tbparse import SummaryReader
""",
        """
count = len(SummaryReader(PATH).scalars)
""",
    ),
}

MEASURE = """
import json, resource, time
PATH = {path!r}
{imports}
start = time.perf_counter()
{body}
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({{"events": count, "seconds": elapsed, "peak_bytes": peak}}))
"""


def write_events(path: Path, events: int) -> None:
    import crc32c
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.summary.writer import record_writer

    def masked(data: bytes) -> int:
        crc = crc32c.crc32c(data)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    record_writer.masked_crc32c = masked
    with path.open("wb") as stream:
        writer = record_writer.RecordWriter(stream)
        writer.write(Event(wall_time=1.795e9, file_version="brain.Event:2").SerializeToString())
        event = Event()
        value = event.summary.value.add()
        for step in range(1, events // len(TAGS) + 1):
            event.wall_time = 1.795e9 + step / 2
            event.step = step
            for index, tag in enumerate(TAGS):
                value.tag = tag
                value.simple_value = index + step / 1000
                writer.write(event.SerializeToString())


def measure(name: str, path: Path) -> dict[str, float]:
    imports, body = READERS[name]
    script = MEASURE.format(path=str(path), imports=imports, body=body)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=3_000_000)
    parser.add_argument("--skip", nargs="*", default=[], choices=list(READERS))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "events.out.tfevents.1795000000.bench.1.0"
        start = time.perf_counter()
        write_events(path, args.events)
        print(
            f"wrote {args.events:,} events ({path.stat().st_size >> 20} MB) in"
            f" {time.perf_counter() - start:.1f} s",
            file=sys.stderr,
        )
        results = {}
        for name in READERS:
            if name in args.skip:
                continue
            results[name] = measure(name, path)
            found = results[name]
            print(
                f"{name:<17} {found['events']:>10,.0f} events  {found['seconds']:7.2f} s"
                f"  {found['events'] / found['seconds']:>10,.0f} events/s"
                f"  peak {found['peak_bytes'] / 2**30:5.2f} GB",
                flush=True,
            )
    ours = results["loganalyzer"]
    for name, found in results.items():
        if name == "loganalyzer":
            continue
        speed = (ours["events"] / ours["seconds"]) / (found["events"] / found["seconds"])
        memory = found["peak_bytes"] / ours["peak_bytes"]
        print(
            f"loganalyzer vs {name}: {speed:.1f}x the events/s;"
            f" {name} peak memory {memory:.2f}x ours"
        )


if __name__ == "__main__":
    main()
