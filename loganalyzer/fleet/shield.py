"""Writes that a stop must not cut: the dataset's tables.

SIGTERM and Ctrl-C stop an index by raising in the main thread wherever it is (the `index`
command's handlers). Raised inside the write of the manifest, the stop would lose the table
that records the runs done, whose message says they are kept; so while the tables are
written a stop waits, and is raised as soon as the write is done.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

_writing = 0
_waiting: list[BaseException] = []


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Hold a stop (`stop_now`) until the block is done, then raise it."""
    global _writing
    _writing += 1
    try:
        yield
    finally:
        _writing -= 1
    if not _writing and _waiting:
        raise _waiting.pop()


def stop_now(stop: BaseException) -> None:
    """Raise `stop` (a signal handler's), or keep it for the end of the write under way."""
    if _writing:
        _waiting[:] = [stop]
        return
    raise stop
