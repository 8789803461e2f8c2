"""TensorBoard: one event file of scalar events written by tensorboard's own writer, read by
loganalyzer's parser against `EventAccumulator(size_guidance={'scalars': 0})` (every scalar
kept) and `tbparse.SummaryReader(...).scalars`, each in a process of its own.

The file holds Megatron-LM's `lm loss`, `learning-rate` and `iteration-time` at every step
(3 tags x events / 3 steps), framed by tensorboard's RecordWriter; its CRCs are computed in C
(`crc32c`): tensorboard's pure-Python CRC would take minutes for 3,000,000 events. A second
file holds the same scalars as TF1 merged summaries (`tf.summary.merge_all()`, a writer's
`add_summary` of a Summary of several values): one event per step carrying all three. Each
reader prints how many scalar values it read, which must be every one written.

    python -m bench.stage_tensorboard READER PATH    # one reader, as the harness runs it
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from bench.harness import PYTHON, Case, Command

NAME = "tensorboard"
FULL_EVENTS = 3_000_000
QUICK_EVENTS = 300_000
TAGS = ("lm loss", "learning-rate", "iteration-time")
START = 1_795_000_000.0


def cases(workdir: Path, quick: bool) -> list[Case]:
    events = QUICK_EVENTS if quick else FULL_EVENTS
    return [_case(workdir, events, merged=False), _case(workdir, events, merged=True)]


def _case(workdir: Path, events: int, merged: bool) -> Case:
    # The name carries the count: a `--workdir` that holds the file of a run with the same
    # count reuses it (written whole, then renamed: never a file cut short).
    kind = "merged" if merged else "bench"
    path = workdir / f"events.out.tfevents.1795000000.{kind}.{events}.0"
    if not path.exists():
        partial = path.with_suffix(".partial")
        write_events(partial, events, merged)
        partial.rename(path)

    def command(label: str, reader: str) -> Command:
        argv = [PYTHON, "-m", "bench.stage_tensorboard", reader, str(path)]
        return Command(label, argv, check=lambda out: _every_event(out, events))

    megabytes = path.stat().st_size / 1e6
    what = (
        f"{events:,} scalars in {events // len(TAGS):,} merged-summary events"
        if merged
        else f"{events:,} scalar events"
    )
    return Case(
        NAME,
        f"{what} ({megabytes:,.0f} MB)",
        events,
        "scalars" if merged else "events",
        command("loganalyzer TensorBoardParser", "loganalyzer"),
        (
            command("EventAccumulator(scalars: 0)", "event-accumulator"),
            command("tbparse SummaryReader", "tbparse"),
        ),
        # Both read in pure Python on one thread (their CRC too): one per core.
        side_by_side=True,
    )


def write_events(path: Path, events: int, merged: bool = False) -> None:
    """`events` simple-value scalars (a multiple of 3: 3 tags per step), one an event or,
    `merged`, the three of a step in one event; and the file-version header, through
    tensorboard's RecordWriter."""
    import crc32c
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.summary.writer import record_writer

    def masked(data: bytes) -> int:
        crc = crc32c.crc32c(data)
        return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    own = record_writer.masked_crc32c
    record_writer.masked_crc32c = masked
    try:
        with path.open("wb") as stream:
            writer = record_writer.RecordWriter(stream)
            header = Event(wall_time=START, file_version="brain.Event:2")
            writer.write(header.SerializeToString())
            event = Event()
            slots = [event.summary.value.add() for _ in (TAGS if merged else TAGS[:1])]
            for step in range(1, events // len(TAGS) + 1):
                event.wall_time = START + step / 2
                event.step = step
                for index, tag in enumerate(TAGS):
                    value = slots[index if merged else 0]
                    value.tag = tag
                    value.simple_value = index + step / 1000
                    if not merged:
                        writer.write(event.SerializeToString())
                if merged:
                    writer.write(event.SerializeToString())
    finally:
        record_writer.masked_crc32c = own


def _every_event(output: str, events: int) -> str | None:
    lines = output.strip().splitlines()
    read = int(lines[0]) if lines and lines[0].isdigit() else None
    return None if read == events else f"read {read} scalar values of {events}"


def _loganalyzer(path: str) -> int:
    from loganalyzer.parsers.tensorboard import TensorBoardParser

    run = TensorBoardParser().parse(Path(path))
    mapped = run.table.select("loss", "lr", "step_time_s")
    return int(sum(mapped.count().row(0))) + run.metrics.height


def _event_accumulator(path: str) -> int:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    accumulator = EventAccumulator(path, size_guidance={"scalars": 0})
    accumulator.Reload()
    return sum(len(accumulator.Scalars(tag)) for tag in accumulator.Tags()["scalars"])


def _tbparse(path: str) -> int:
    from tbparse import SummaryReader

    return len(SummaryReader(path).scalars)


READERS = {
    "loganalyzer": ("loganalyzer.parsers.tensorboard.reader", _loganalyzer),
    "event-accumulator": (
        "tensorboard.backend.event_processing.event_accumulator",
        _event_accumulator,
    ),
    "tbparse": ("tbparse", _tbparse),
}


def main() -> None:
    """Read the file with one reader and print its wall and CPU time (all threads); imports
    are not timed (a command pays them once)."""
    import importlib

    module, read = READERS[sys.argv[1]]
    importlib.import_module(module)
    importlib.import_module("tensorboard.compat.proto.event_pb2")
    start, cpu = time.perf_counter(), time.process_time()
    count = read(sys.argv[2])
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    print(count)
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds}))


if __name__ == "__main__":
    main()
