"""Where inputs and the dataset live: local paths or fsspec URLs (s3://, gs://, file://,
memory://), so that the same index runs on a laptop and against object storage."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fsspec import AbstractFileSystem
from fsspec.core import url_to_fs
from fsspec.implementations.local import LocalFileSystem


@dataclass(frozen=True)
class Location:
    """A filesystem and a path inside it."""

    fs: AbstractFileSystem
    path: str

    @property
    def local(self) -> bool:
        return isinstance(self.fs, LocalFileSystem)

    def join(self, *parts: str) -> Location:
        return Location(self.fs, "/".join([self.path.rstrip("/"), *parts]))

    def url(self, path: str | None = None) -> str:
        """How a path is shown and stored: a plain path for local files, else its URL."""
        path = self.path if path is None else path
        return path if self.local else str(self.fs.unstrip_protocol(path))


def locate(url: str) -> Location:
    """The filesystem of a path or URL (a plain path is local)."""
    fs, path = url_to_fs(url)
    return Location(fs, str(path))


def modified(info: dict[str, Any]) -> float | None:
    """A file's modification time in seconds since the epoch, whatever the store calls it."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value.timestamp()
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return None


def write_bytes_atomic(target: Location, data: bytes) -> None:
    """Write to a temporary name, then rename: a reader never sees half a file, and a write
    that fails (a full disk) leaves neither half a file nor the temporary one."""
    temporary = target.path + ".tmp"
    try:
        with target.fs.open(temporary, "wb") as stream:
            stream.write(data)
        target.fs.mv(temporary, target.path)
    except BaseException:
        with contextlib.suppress(OSError):
            if target.fs.exists(temporary):
                target.fs.rm(temporary)
        raise
