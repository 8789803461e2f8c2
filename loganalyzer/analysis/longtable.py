"""A run's long metrics table, and what several analysis steps read from it, each read once.

Slow steps, causes, the goodput budget and the waterfall all need the table's metric names,
its printed saves and evaluations, its timers' medians and its start-up timers. Each is a
pass (the medians several) over a table that may be on disk (`loganalyzer.spill`): on a 1 GB
log, reading them again for every step that needs them cost seconds. `analyse` makes one
`LongTable` per run and keeps it on its `Analysis`; every later step reads from it, and each
reading is made the first time it is asked for (a run without slow steps never needs the
timers at given iterations, a test of one step never pays for the others).
"""

from __future__ import annotations

from functools import cached_property

import polars as pl

from loganalyzer.analysis.events import Events, events_of
from loganalyzer.analysis.phases import Timers, read_timers
from loganalyzer.analysis.startup import StartUp, startup_by_segment
from loganalyzer.model import Metrics
from loganalyzer.spill import metric_names


class LongTable:
    """`metrics`, the long table of the run whose per-iteration table is `table`, with its
    readings."""

    def __init__(self, metrics: Metrics, table: pl.DataFrame) -> None:
        self.metrics = metrics
        self._table = table

    @cached_property
    def names(self) -> list[str]:
        """The distinct metric names, as text."""
        return metric_names(self.metrics)

    @cached_property
    def events(self) -> Events:
        """The printed saves and evaluations."""
        return events_of(self.metrics, self.names)

    @cached_property
    def timers(self) -> Timers:
        """The timers' phases and their medians over the run."""
        return read_timers(self.metrics, self.names)

    @cached_property
    def startup(self) -> dict[int | None, StartUp]:
        """Start-up seconds per segment."""
        return startup_by_segment(self.metrics, self._table, self.names)
