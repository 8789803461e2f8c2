"""The lock on a dataset: one `index` writes into it at a time. A second one refuses, naming
the holder (its pid and host), or waits for it with `--wait`. A lock whose holder ended
without releasing it (killed) is taken over with a warning, and tells the index that the
previous one did not finish: its finished runs are recovered from their folders."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from typing import Any

from loganalyzer.errors import LogAnalyzerError
from loganalyzer.fleet.layout import LOCK
from loganalyzer.fleet.storage import Location, write_bytes_atomic

POLL_S = 1.0


class LockedError(LogAnalyzerError):
    """Another index holds the dataset's lock."""


def _holding() -> dict[str, Any]:
    return {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
    }


def _parsed(text: bytes) -> dict[str, Any] | None:
    """The holder a lock file names; None when it names none (empty: released)."""
    if not text.strip():
        return None
    try:
        holder = json.loads(text)
    except ValueError:
        return {"pid": "?", "host": "?", "since": "?"}
    return holder if isinstance(holder, dict) else {"pid": "?", "host": "?", "since": "?"}


def _described(holder: dict[str, Any]) -> str:
    return f"pid {holder.get('pid')} on {holder.get('host')}, since {holder.get('since')}"


def _refusal(dataset: Location, holder: dict[str, Any]) -> LockedError:
    return LockedError(
        f"{dataset.url()} is being written by another index ({_described(holder)}):"
        " wait for it to finish, or pass --wait"
    )


def _taken_over(holder: dict[str, Any]) -> str:
    return (
        f"the index that held the lock ({_described(holder)}) ended without releasing it:"
        " taking it over, and recovering the runs it finished"
    )


@contextlib.contextmanager
def hold_lock(dataset: Location, wait: bool, say: Callable[[str], None]) -> Iterator[bool]:
    """Hold the dataset's lock while the block runs; yields whether its last holder ended
    without releasing it. Local datasets use flock(2), released by the kernel however the
    holder ends; other stores a lock file, stale when its holder's pid is gone on this
    host (a holder on another host is waited for, or its file removed by hand)."""
    descriptor = _flocked(dataset, wait, say) if dataset.local else None
    if descriptor is None:
        yield from _by_file(dataset, wait, say)
        return
    try:
        yield _claim(descriptor, say)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(dataset.path, LOCK))
        os.close(descriptor)


def _flocked(dataset: Location, wait: bool, say: Callable[[str], None]) -> int | None:
    """The lock file's descriptor, flock(2)ed; None where flock is not to be had."""
    try:
        import fcntl
    except ImportError:  # not POSIX
        return None
    path = os.path.join(dataset.path, LOCK)
    while True:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _parsed(os.pread(descriptor, 4096, 0)) or {}
                if not wait:
                    raise _refusal(dataset, holder) from None
                say(f"waiting for the index that holds {dataset.url()} ({_described(holder)})")
                fcntl.flock(descriptor, fcntl.LOCK_EX)
            with contextlib.suppress(FileNotFoundError):
                if os.fstat(descriptor).st_ino == os.stat(path).st_ino:
                    return descriptor
            # the holder removed the file as it released it: lock the one there now
        except OSError as exc:
            os.close(descriptor)
            if exc.errno in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                return None  # a filesystem without flock: the lock file's contents serve
            raise
        except BaseException:
            os.close(descriptor)
            raise
        os.close(descriptor)


def _claim(descriptor: int, say: Callable[[str], None]) -> bool:
    left = _parsed(os.pread(descriptor, 4096, 0))
    if left is not None:
        say(_taken_over(left))
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, json.dumps(_holding()).encode(), 0)
    os.fsync(descriptor)
    return left is not None


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _by_file(dataset: Location, wait: bool, say: Callable[[str], None]) -> Iterator[bool]:
    lock = dataset.join(LOCK)
    told = False
    stale = False
    while lock.fs.exists(lock.path):
        with lock.fs.open(lock.path, "rb") as stream:
            holder = _parsed(stream.read())
        here = holder is None or holder.get("host") == socket.gethostname()
        if holder is None or (here and not _alive(holder.get("pid"))):
            if holder is not None:
                say(_taken_over(holder))
            stale = True
            break
        if not wait:
            raise _refusal(dataset, holder)
        if not told:
            say(f"waiting for the index that holds {dataset.url()} ({_described(holder)})")
            told = True
        time.sleep(POLL_S)
    write_bytes_atomic(lock, json.dumps(_holding()).encode())
    try:
        yield stale
    finally:
        with contextlib.suppress(OSError):
            lock.fs.rm(lock.path)
