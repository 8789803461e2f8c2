"""What the run says it did besides training: checkpoint saves and evaluations.

Evidence comes in kinds (`causes.EVIDENCE` ranks them): the lines the framework printed
(`saving checkpoint at iteration N`, `validation loss at iteration N`: rows
`event/checkpoint_save` and `validation/<key>` of the long metrics table that carry a line
number), a metric recorded at that step (Megatron's TensorBoard `lm loss validation`, HF
Trainer's `eval/loss`, a `trainer_state.json` evaluation entry), a `checkpoint-N` folder, and
the intervals the config states (`save_interval`, `eval_interval`; HF Trainer's `save_steps`,
`eval_steps`), each with its provenance so a reader can check it. Megatron's `save-checkpoint`
timer, printed at the iteration it saved after, times a save, HF Trainer's `eval_runtime` an
evaluation: where a save and an evaluation share an iteration, they split their time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import polars as pl

from loganalyzer.model import Metrics, Run
from loganalyzer.spill import collect

SAVE_EVENT = "event/checkpoint_save"
VALIDATION_PREFIX = "validation/"

# Evaluation metrics written by step: Megatron-LM's TensorBoard/W&B `<key> validation` (and
# `<key> validation ppl`; training.py `evaluate_and_print_results`), Megatron-DeepSpeed's
# `lm-loss-validation/lm loss validation`, HF Trainer's `eval/<k>` (`rewrite_logs`).
VALIDATION_METRIC = re.compile(r"^eval/| validation( ppl)?$|-validation/")
# Megatron-LM's timer around a save (`save_checkpoint_and_time`), in ms, max over ranks.
SAVE_TIMERS = ("timer/save-checkpoint", "timer/save-checkpoint/max")
# HF Trainer's evaluation time in seconds (`speed_metrics("eval", ...)`: `eval_runtime`; the
# parsers name it `validation/eval_runtime`, TensorBoard and W&B `eval/runtime`).
EVAL_TIMERS = ("validation/eval_runtime", "eval/runtime")
# A save whose only trace is the folder it wrote (HF Trainer's output_dir/checkpoint-N).
_FOLDER = re.compile(r"checkpoint-\d+/?$")

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
    """Iterations with a save or evaluation the logs record, the line numbers (None where a
    metric or folder records it), the kind of evidence of each (`line`, `metric`, `folder`)
    and the seconds Megatron's `save-checkpoint` timer gave a save."""

    saves: dict[int, int | None]
    evaluations: dict[int, int | None]
    save_kinds: dict[int, str] = field(default_factory=dict)
    evaluation_kinds: dict[int, str] = field(default_factory=dict)
    save_timer_s: dict[int, float] = field(default_factory=dict)
    evaluation_timer_s: dict[int, float] = field(default_factory=dict)


def events_of(metrics: Metrics, names: Sequence[str]) -> Events:
    """The save and validation lines of the long metrics table, whose metric names are
    `names` (`spill.metric_names`), by iteration."""
    # names matched once each, then rows by category: a text comparison of every row makes
    # polars' streaming engine hold the column (250 MB more over 22 M rows, measured)
    saves = _first_lines(metrics, [name for name in names if name == SAVE_EVENT])
    printed = [name for name in names if name.startswith(VALIDATION_PREFIX)]
    recorded = [name for name in names if name not in printed and VALIDATION_METRIC.search(name)]
    # a TensorBoard or W&B record's `line` is its place in the file, not a printed line
    evaluations = {
        i: (None, source) for i, (_, source) in _first_lines(metrics, recorded).items()
    } | _first_lines(metrics, printed)
    timers = _first_lines(metrics, [name for name in names if name in SAVE_TIMERS], "value")
    evaluated = _first_lines(metrics, [name for name in names if name in EVAL_TIMERS], "value")
    return Events(
        saves={i: _line(line) for i, (line, _) in saves.items()},
        evaluations={i: _line(line) for i, (line, _) in evaluations.items()},
        save_kinds={i: _kind(line, source) for i, (line, source) in saves.items()},
        evaluation_kinds={i: _kind(line, source) for i, (line, source) in evaluations.items()},
        save_timer_s={
            i: ms / 1000 for i, (ms, _) in timers.items() if isinstance(ms, (int, float))
        },
        evaluation_timer_s={i: s for i, (s, _) in evaluated.items() if isinstance(s, (int, float))},
    )


def _line(line: object) -> int | None:
    return line if isinstance(line, int) else None


def _kind(line: object, source: object) -> str:
    """`line` (printed), `folder` (a checkpoint-N folder) or `metric` (recorded by step)."""
    if line is not None:
        return "line"
    return "folder" if isinstance(source, str) and _FOLDER.search(source) else "metric"


def _first_lines(
    metrics: Metrics, names: list[str], column: str = "line"
) -> dict[int, tuple[object, object]]:
    """Per iteration, the first `column` value (the line, or a timer's value) of the rows
    named `names`, and their source."""
    rows = collect(
        metrics.lazy()
        .filter(pl.col("name").is_in(names) & pl.col("iteration").is_not_null())
        .group_by("iteration")
        .agg(
            pl.col(column).max() if column == "value" else pl.col(column).min(),
            pl.col("source").cast(pl.String).first(),
        )
        .sort("iteration")
    )
    return {
        int(row[0]): (row[1], row[2])
        for row in rows.select("iteration", column, "source").iter_rows()
    }
