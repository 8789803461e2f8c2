"""What the run says it did besides training: checkpoint saves and evaluations.

Two kinds of evidence, the stronger first: the lines the framework printed (`saving
checkpoint at iteration N`, `validation loss at iteration N`: rows `event/checkpoint_save` and
`validation/<key>` of the long metrics table), and the intervals its config states
(`save_interval`, `eval_interval`; HF Trainer's `save_steps`, `eval_steps`), each with its
provenance so a reader can check it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from loganalyzer.model import Metrics, Run
from loganalyzer.spill import collect

SAVE_EVENT = "event/checkpoint_save"
VALIDATION_PREFIX = "validation/"

_SAVE_KEYS = ("save_interval", "save_steps")
_EVAL_KEYS = ("eval_interval", "eval_steps")


@dataclass(frozen=True)
class Interval:
    """A configured interval in iterations, and where the config states it."""

    iterations: int
    source: str


@dataclass(frozen=True)
class Schedule:
    """The run's stated save and evaluation intervals (None where the config is silent)."""

    save: Interval | None = None
    evaluation: Interval | None = None

    def periods(self) -> list[int]:
        """The stated intervals, for the periodic detector."""
        return [i.iterations for i in (self.save, self.evaluation) if i is not None]


def schedule_of(run: Run) -> Schedule:
    """The save and evaluation intervals of `run`'s config."""
    return Schedule(save=_interval(run, _SAVE_KEYS), evaluation=_interval(run, _EVAL_KEYS))


def _interval(run: Run, keys: tuple[str, ...]) -> Interval | None:
    for key in keys:
        value = run.get_int(key)
        if value is not None and value > 0:
            return Interval(value, f"{key} {value} ({run.config[key].provenance})")
    return None


@dataclass(frozen=True)
class Events:
    """Iterations with a printed save or validation line, and the line numbers."""

    saves: dict[int, int | None]
    evaluations: dict[int, int | None]


def events_of(metrics: Metrics, names: Sequence[str]) -> Events:
    """The save and validation lines of the long metrics table, whose metric names are
    `names` (`spill.metric_names`), by iteration."""
    # names matched once each, then rows by category: a text comparison of every row makes
    # polars' streaming engine hold the column (250 MB more over 22 M rows, measured)
    return Events(
        saves=_first_lines(metrics, [name for name in names if name == SAVE_EVENT]),
        evaluations=_first_lines(
            metrics, [name for name in names if name.startswith(VALIDATION_PREFIX)]
        ),
    )


def _first_lines(metrics: Metrics, names: list[str]) -> dict[int, int | None]:
    rows = collect(
        metrics.lazy()
        .filter(pl.col("name").is_in(names) & pl.col("iteration").is_not_null())
        .group_by("iteration")
        .agg(pl.col("line").min())
        .sort("iteration")
    )
    return dict(zip(rows["iteration"].to_list(), rows["line"].to_list(), strict=True))
