"""Where inputs and the dataset live: local paths or fsspec URLs (s3://, gs://, file://,
memory://), so that the same index runs on a laptop and against object storage.

Only text with a `scheme://` is a URL. Anything else is a local path, never parsed by fsspec
as a URL: `::` (fsspec's URL chaining), `#`, `?`, `*` and `[` are characters of a folder's
name (a `~` that starts it is the home folder, as before). In a URL, `::` chains stores only
where fsspec's chaining is meant (a protocol before it, or a URL after it): an object named
`a::b` is one object."""

from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fsspec import AbstractFileSystem, filesystem, get_filesystem_class
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


# A URL: a scheme, then `://` (chained URLs included: `simplecache::s3://...`).
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*(?:::[A-Za-z][A-Za-z0-9+.-]*)*://")
# fsspec's chaining: a bare protocol first (`simplecache::s3://...`), or a URL after `::`
# (`zip://member::s3://bucket/a.zip`). Any other `::` is part of a name.
_CHAINED = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*::|::[A-Za-z][A-Za-z0-9+.-]*://")


def locate(url: str) -> Location:
    """The filesystem of a path or URL. A plain path is local, made absolute and normal
    (`a/../a/b`, `./a/./b`, `a//b/` are `a/b`) but with its symbolic links kept."""
    if _URL.match(url) is None:
        return Location(LocalFileSystem(), os.path.abspath(os.path.expanduser(url)))
    if "::" in url and _CHAINED.search(url) is None:  # one store, a `::` in a name
        protocol = url.split("://", 1)[0]
        kind = get_filesystem_class(protocol)
        fs = filesystem(protocol, **kind._get_kwargs_from_urls(url))
        # stores strip a path with `::` in it unnormalised: the `::` is held aside meanwhile
        path = str(kind._strip_protocol(url.replace("::", "\0"))).replace("\0", "::")
        return Location(fs, path)
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
