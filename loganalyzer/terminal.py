"""The one way the commands write to the user, data on stdout and messages on stderr.

Every text goes through `terminal_safe` first: paths, folder names and log text can hold
sequences that act on a terminal (an OSC 52 writes the clipboard, a U+202E reorders the
line), and none of it must reach the terminal raw, whichever command prints it.

stdout carries the data asked for, so a write that fails (a full device, a closed stdout)
is an `OutputError`, one line on stderr and exit 1: exiting 0 would say the data was
delivered. A reader that closed the pipe (`| head`) had all it wanted: BrokenPipeError goes
up to the CLI, which exits 0 quietly. stderr carries only messages; one that cannot be
written is lost, as there is nowhere left to say so.
"""

from __future__ import annotations

import contextlib
import os
import sys

import click

from loganalyzer.errors import OutputError
from loganalyzer.render.clip import clip
from loganalyzer.render.escape import terminal_safe


def echo(text: str = "", err: bool = False) -> None:
    """Print `text` and a newline, made terminal-safe, on stdout (or stderr with `err`)."""
    safe = terminal_safe(text)
    if err:
        with contextlib.suppress(OSError):  # see the module's docstring
            click.echo(safe, err=True)
        return
    if sys.stdout is None:
        raise OutputError("stdout is closed: nothing can be printed (redirect it to a file)")
    try:
        click.echo(safe)
    except BrokenPipeError:
        raise
    except OSError as exc:
        discard_stdout()
        raise OutputError(f"cannot write to stdout ({exc.strerror or exc})") from exc


def discard_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what it still holds
    neither fails again nor prints a traceback on the way out."""
    # not a real file (a test runner's capture): nothing will flush it at exit
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def warn(text: str) -> None:
    """A warning on stderr, cut as every display cuts a value from a log (`clip`)."""
    echo(f"warning: {clip(text)}", err=True)
