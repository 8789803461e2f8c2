"""Progress on stderr while commands read their sources: one display for every command."""

from __future__ import annotations

from pathlib import Path

from loganalyzer.terminal import echo


def show_progress(message: str) -> None:
    """A progress message (which file is being read, by which parser) on stderr."""
    echo(message, err=True)


class ReadProgress:
    """Reports reading a large file on stderr, every tenth of it or every 256 MB, whichever is
    more (every 256 MB of a .gz, whose size decompressed is unknown)."""

    STEP_BYTES = 256 * 1024 * 1024

    def __init__(self) -> None:
        self.shown: dict[Path, int] = {}

    def __call__(self, path: Path, done: int, total: int | None) -> None:
        step = max(total // 10, self.STEP_BYTES) if total else self.STEP_BYTES
        if done // step <= self.shown.get(path, 0):
            return
        self.shown[path] = done // step
        share = f" ({done * 100 // total} %)" if total else ""
        echo(f"  {path}: {done >> 20} MB read{share}", err=True)
