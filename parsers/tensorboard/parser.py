"""The TensorBoard plugin: detection, and one event file into a Run.

A folder of event files is read file by file (the loader expands folders) and merged as one
run, each file a segment, as restarts write a new file. The sub-folders a SummaryWriter
writes beside its own file (tensorboardX's and torch's `add_scalars` series, `add_hparams`)
are read with that file (`writer_folders`), not as runs of their own.

This module is what the registry loads for every command, so it imports neither numpy nor
the reading modules: `parse` imports `reader`, and detection imports numpy only for a file
whose head looks like an event record.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # polars (under Run) loads with the reading, not with the registry
    from loganalyzer.model import Run

FILE_MARKER = "tfevents"
# The first byte of an Event's data: field 1 (wall_time), a 64-bit value.
EVENT_START = 0x09


class TensorBoardParser:
    """TensorBoard event files (the plugin API is in loganalyzer.plugin)."""

    name = "tensorboard"
    description = (
        "TensorBoard event files: every scalar (simple and TF2 tensor), text and hparams "
        "(Megatron-LM, DeepSpeed monitor, HF Trainer, torchtitan, Lightning; tensorboardX's "
        "add_scalars and add_hparams sub-folders)"
    )
    # the writers whose real event files the tests read (written at test time or by a real
    # run in the shared generated logs)
    tested_on = (
        "tensorboard 2.21 (EventFileWriter, TF2 summary writer)",
        "tensorboardX 2.6.5 (add_scalars, add_hparams)",
        "DeepSpeed 0.19.8 monitor",
    )

    def detect(self, path: Path) -> float:
        if not path.is_file():
            return 0.0
        try:
            with path.open("rb") as stream:
                head = stream.read(64)
        except OSError:
            return 0.0
        if len(head) < 16 or not _first_record_is_event(head):
            return 0.0
        return 0.95 if FILE_MARKER in path.name else 0.8

    def parse(self, path: Path) -> Run:
        from loganalyzer.parsers.tensorboard.reader import read_event_file

        run: Run = read_event_file(path, self.name)
        return run


def _first_record_is_event(head: bytes) -> bool:
    """The first record's data starts like an Event and its length CRC checks (the CRC, and
    numpy with it, only for a head that passes the first test: text logs never load numpy)."""
    if head[12] != EVENT_START:
        return False
    import numpy as np

    from loganalyzer.parsers.crc import CRC32C_POLY, crc_many, masked_crc32c

    data = np.frombuffer(head, dtype=np.uint8)
    crc = masked_crc32c(
        crc_many(data, np.array([0], dtype=np.int64), np.array([8], dtype=np.int64), CRC32C_POLY)
    )
    return bool(struct.unpack_from("<I", head, 8)[0] == int(crc[0]))
