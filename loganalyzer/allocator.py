"""How soon polars' allocator gives freed memory back to the system, set before polars loads.

polars allocates with jemalloc and sets it (`polars/__init__.py`) to keep freed pages for
half a second, then to mark them lazily freeable for a second more: such pages still count
as the process's resident memory until the kernel needs them. A log is read as a stream of
chunks whose working memory is freed and taken again many times a second on several
threads, so those kept pages made up 60-100 MB of the peak on a 1 GB log (`bench`). Given
back after 100 ms, without the lazy stage, they cost no measurable time; at once, 27 % more.
And one arena per usable core rather than jemalloc's four: memory one thread frees is then
taken again by the others instead of kept for its own (15-20 MB less at the peak, and less
time spent returning pages).

polars reads `_RJEM_MALLOC_CONF` when it is imported and adds it after its own defaults,
which it overrides; a user's own setting is left as it is (polars' defaults, inherited from
a parent process that imported polars, are not the user's).
"""

from __future__ import annotations

import os
import sys

from loganalyzer.cores import usable_cores

ALLOCATOR_ENV = "_RJEM_MALLOC_CONF"
# What polars writes in the environment when it is imported without a setting of the
# user's: a command started by a Python process that imported polars inherits it.
POLARS_DEFAULT = "dirty_decay_ms:500,muzzy_decay_ms:1000"


def return_freed_memory_promptly() -> bool:
    """Set jemalloc's decay for this process and its children; whether it was set (not when
    polars is already loaded or the user configured jemalloc)."""
    if "polars" in sys.modules or os.environ.get(ALLOCATOR_ENV, POLARS_DEFAULT) != POLARS_DEFAULT:
        return False
    os.environ[ALLOCATOR_ENV] = prompt_return()
    return True


def prompt_return() -> str:
    """The setting: freed pages given back after 100 ms, without the lazily-freed stage in
    between; one arena per usable core."""
    return f"dirty_decay_ms:100,muzzy_decay_ms:0,narenas:{usable_cores()}"
