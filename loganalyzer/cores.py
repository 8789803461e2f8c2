"""How many cores this process may use: the worker counts and the allocator's arenas follow it.
Kept free of polars, so that it can be asked before polars loads."""

from __future__ import annotations

import os


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the system has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
