"""What a damaged binary log costs, said the same way for every framed format.

TensorBoard's TFRecord files and W&B's `.wandb` transaction logs are both sequences of
CRC-checked records; both readers skip a damaged stretch and carry on, and keep what
precedes a record cut short by the end of the file. This module holds the damage record
they share and the warnings a reader shows for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Damage:
    """Bytes skipped because no intact record starts within them, and the intact records
    read after them (up to the next damage or the end)."""

    start: int
    end: int
    records_after: int = 0


def framing_warnings(
    source: str,
    damage: Sequence[Damage],
    cut_at: int | None,
    records: int,
    checked: str,
    unsearched_from: int | None = None,
) -> list[str]:
    """One warning per damaged stretch (`checked` says what failed its check, e.g. "bad CRC
    or length"), one for a file that ends inside a record, with the `records` read, and one
    for a search for intact records given up at `unsearched_from`."""
    warnings = [
        f"{source}: bytes {hurt.start}-{hurt.end} are damaged ({checked}) and were skipped;"
        f" {hurt.records_after} intact records after them were kept"
        for hurt in damage
    ]
    if cut_at is not None:
        warnings.append(
            f"{source}: the file ends inside a record at byte {cut_at} (written while the job"
            f" was killed?); the {records} records before it were read"
        )
    if unsearched_from is not None:
        warnings.append(
            f"{source}: from byte {unsearched_from} on, too many record headers check but lead"
            " to no intact record (a forged or badly damaged file): the rest of the file was"
            " not searched for intact records"
        )
    return warnings
