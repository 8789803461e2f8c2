"""Runs side by side: the comparison's view model and its overlaid charts.

Each run is summarised alone (the same document `summary --json` gives); the first run is
the baseline every difference is taken against. Figures are the documents' numbers, read
through `render.view`; only the differences between them are computed here.
"""

from __future__ import annotations

import dataclasses
import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from loganalyzer.analysis.comparison import (
    FOLDED,
    Difference,
    Parallelism,
    RunIdentity,
    config_kind,
    config_order,
    differing,
    identity_of,
    largest_difference,
)
from loganalyzer.model import Run
from loganalyzer.render.charts import base_layout
from loganalyzer.render.clip import clip
from loganalyzer.render.downsample import keep_shape
from loganalyzer.render.numbers import TIMES, UNKNOWN, duration, number, percent, plural
from loganalyzer.render.view import build_view, chart_facts
from loganalyzer.render.viewmodel import BudgetPart, Chart, Ending, Figure
from loganalyzer.secrets import mask_value, run_secrets

XAxis = Literal["iteration", "tokens", "time"]
# One colour per run: the accent first, then quieter inks.
RUN_COLOURS = ("#1f5f99", "#b0651a", "#475467", "#7fa7cc", "#98a2b3")
# Figures compared, by key, in the order they are listed: the iterations logged and the
# per-iteration rates are built here, the others are the single-run view's headline figures.
COMPARED = (
    "iterations",
    "time_per_iteration",
    "time_per_1k_iterations",
    "mfu",
    "tflops",
    "tokens_per_s",
    "step_time",
    "wall_clock",
    "lost",
)
# Durations, shown in one unit per row.
DURATIONS = ("time_per_iteration", "time_per_1k_iterations", "wall_clock", "lost")
# Totals that grow with the length of the log: compared only between logs of as many
# iterations (else the per-iteration rows compare the runs).
TOTALS = ("wall_clock", "lost")
# Identity facts as a reader names them.
FACT_LABELS = {
    "model": "model",
    "seq_length": "sequence length",
    "global_batch_size": "global batch",
    "micro_batch_size": "micro batch",
    "parallelism": "parallelism",
    "precision": "precision",
    "recompute": "recomputation",
    "num_gpus": "GPUs",
    "gpu": "GPU",
    "framework": "framework",
    "deepspeed": "DeepSpeed engine",
}
# The identity line's parts, each with the facts it also shows.
LINE_FACTS: dict[str, tuple[str, ...]] = {
    "framework": ("deepspeed",),
    "hardware": ("num_gpus", "gpu"),
    "model": (),
    "seq_length": (),
    "parallelism": (),
    "global_batch_size": ("micro_batch_size",),
    "precision": (),
    "recompute": (),
}
# A rate within this share of the baseline's reads as the same.
ALIKE = 0.01


@dataclass(frozen=True)
class RunInput:
    """One run to compare: its label, summary document and tables."""

    label: str
    document: Mapping[str, Any]
    run: Run | None


@dataclass(frozen=True)
class Cell:
    text: str
    value: float | None
    change: str
    # False for a total (wall clock, time lost) of a log of other iterations than the
    # baseline's: its change is kept for scripts, not shown as a difference
    comparable: bool = True

    @property
    def shown_change(self) -> str:
        """The change as the page and the terminal show it."""
        if not self.change or self.comparable:
            return self.change
        return "other iterations logged: compare per iteration"


@dataclass(frozen=True)
class FigureRow:
    key: str
    label: str
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class ConfigDifference:
    name: str
    values: tuple[str, ...]
    # what the value changes (`analysis.comparison.KINDS`); "other" ones are folded
    kind: str = FOLDED

    @property
    def label(self) -> str:
        """The name as shown (cut, `clip`)."""
        return clip(self.name)

    @property
    def shown(self) -> tuple[str, ...]:
        """The values as the page and the terminal show them (cut, `clip`)."""
        return tuple(clip(value) for value in self.values)


@dataclass(frozen=True)
class IdentityPart:
    """One fact of a run's identity line, and whether it differs between the runs."""

    fact: str
    text: str
    differs: bool


@dataclass(frozen=True)
class IdentityLine:
    """A run's identity, fact by fact, and why its steady figures are low-confidence."""

    label: str
    parts: tuple[IdentityPart, ...]
    low_confidence: str | None

    @property
    def text(self) -> str:
        return " · ".join(part.text for part in self.parts)


@dataclass(frozen=True)
class FactDifference:
    """An identity fact that is not the same in every run, with each run's value."""

    fact: str
    label: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class RunBudget:
    label: str
    parts: tuple[BudgetPart, ...]
    summary: str


@dataclass(frozen=True)
class CompareView:
    title: str
    tool_version: str
    generated_at: str | None
    labels: tuple[str, ...]
    identities: tuple[str, ...]
    figures: tuple[FigureRow, ...]
    faster: str
    lost_most: str
    config: tuple[ConfigDifference, ...]
    budgets: tuple[RunBudget, ...]
    charts: tuple[Chart, ...]
    x_axis: str
    # each run's ending (None for a document without `outcome`)
    endings: tuple[Ending | None, ...] = ()
    # the largest difference and its likely reason, in a sentence: first on every output
    headline: str = ""
    # each run's identity fact by fact, and the facts that differ
    identity_lines: tuple[IdentityLine, ...] = ()
    differs: tuple[FactDifference, ...] = ()
    # the facts the rows and sentences rest on, for `compare --json`
    run_facts: tuple[RunIdentity, ...] = ()
    difference: Difference | None = None

    @property
    def ranked(self) -> tuple[ConfigDifference, ...]:
        """The config differences that change the model, sequence, batch, parallelism,
        precision, recomputation, hardware or framework, most consequential first."""
        return tuple(d for d in self.config if d.kind != FOLDED)

    @property
    def folded(self) -> tuple[ConfigDifference, ...]:
        """The other config differences (paths, logging, tuning knobs)."""
        return tuple(d for d in self.config if d.kind == FOLDED)


def build_compare(
    runs: Sequence[RunInput], *, x_axis: XAxis = "iteration", generated_at: str | None = None
) -> CompareView:
    """The comparison of two or more runs, against the first."""
    views = [build_view(r.document, r.run, charts=False, quotes=False) for r in runs]
    labels = tuple(r.label for r in runs)
    facts = tuple(identity_of(r.document, r.run.config if r.run is not None else {}) for r in runs)
    difference = largest_difference(
        facts, [_rates(r.document, f) for r, f in zip(runs, facts, strict=True)]
    )
    lines, differs = _identities(labels, facts)
    return CompareView(
        title=" vs ".join(labels),
        tool_version=str(runs[0].document.get("tool_version", "")),
        generated_at=generated_at,
        labels=labels,
        identities=tuple(line.text for line in lines),
        figures=_figures(views, facts),
        faster=faster_sentence(labels, [v.headline for v in views]),
        lost_most=_lost_most(labels, views),
        config=_config_differences(runs),
        budgets=tuple(
            RunBudget(label, v.budget, v.budget_summary)
            for label, v in zip(labels, views, strict=True)
        ),
        charts=_charts(runs, x_axis),
        x_axis=x_axis,
        endings=tuple(v.ending for v in views),
        headline=headline_sentence(labels, facts, difference),
        identity_lines=lines,
        differs=differs,
        run_facts=facts,
        difference=difference,
    )


def _rates(document: Mapping[str, Any], facts: RunIdentity) -> dict[str, float | None]:
    """The run's rates a headline may name (`analysis.comparison.RATES`)."""
    return {
        "tokens_per_s": (document.get("throughput") or {}).get("tokens_per_s"),
        "mfu": (document.get("flops") or {}).get("mfu"),
        "step_time": (document.get("step_time_s") or {}).get("median"),
        "time_per_iteration": facts.time_per_iteration,
    }


def _figures(views: Sequence[Any], facts: Sequence[RunIdentity]) -> tuple[FigureRow, ...]:
    """The rows of figures: the views' headline figures with the iterations logged and the
    per-iteration rates beside them; the durations of a row in one unit."""
    spans = {f.covered if f.covered is not None else f.records for f in facts}
    rows = []
    for key in COMPARED:
        if key == "iterations":
            row = [_iterations_figure(f) for f in facts]
        elif key == "time_per_iteration":
            row = [Figure(key, "time per iteration", "", f.time_per_iteration) for f in facts]
        elif key == "time_per_1k_iterations":
            row = [
                Figure(key, "per 1,000 iterations", "", _times(f.time_per_iteration, 1000))
                for f in facts
            ]
        else:
            row = [next(f for f in v.headline if f.key == key) for v in views]
        if key in DURATIONS:
            row = _one_unit(row)
        comparable = key not in TOTALS or len(spans) == 1
        rows.append(FigureRow(key, row[0].label, tuple(_cell(f, row[0], comparable) for f in row)))
    return tuple(rows)


def _times(value: float | None, factor: float) -> float | None:
    return value * factor if value is not None else None


def _iterations_figure(facts: RunIdentity) -> Figure:
    """The iterations a run logged and their range: "62 (1–62)", or "1,000 (10–1,000), 100
    records" where a record stands for several iterations."""
    count = facts.covered if facts.covered is not None else facts.records
    text = number(count, ",d")
    if facts.first is not None and facts.last is not None:
        span = f"{facts.first:,}" + (f"–{facts.last:,}" if facts.last != facts.first else "")
        text += f" ({span})"
    if facts.covered is not None and facts.covered != facts.records:
        text += f", {plural(facts.records, 'record')}"
    return Figure("iterations", "iterations logged", text, float(count))


def _one_unit(row: Sequence[Figure]) -> list[Figure]:
    """The row's durations in the unit its largest reads best in: "2.2 h vs 1.9 h", not
    "2.2 h vs 111.9 min"."""
    known = [f.value for f in row if f.value is not None and math.isfinite(f.value)]
    if not known:
        return [dataclasses.replace(f, text=f.text or UNKNOWN) for f in row]
    unit = _unit(max(abs(v) for v in known), _seconds_below(row[0].key))
    return [
        dataclasses.replace(
            f,
            text=_in_unit(f.value, unit)
            if f.value is not None and math.isfinite(f.value)
            else f.text or UNKNOWN,
        )
        for f in row
    ]


def _unit(largest: float, seconds_below: float = 120) -> tuple[float, str, str]:
    """(seconds per unit, format, unit name) for durations up to `largest` seconds, at the
    thresholds `numbers.duration` changes unit at (a step time, in seconds to an hour:
    `seconds_below`)."""
    if largest < seconds_below:
        return (1.0, "", " s")
    if largest < 7200:
        return (60.0, ".1f", " min")
    return (3600.0, ".1f", " h")


def _seconds_below(key: str) -> float:
    """Up to how many seconds a row's durations read in seconds: a time per iteration, like
    the step time, to an hour."""
    return 3600 if key == "time_per_iteration" else 120


def _in_unit(seconds: float, unit: tuple[float, str, str]) -> str:
    """A duration in a row's unit; in seconds, four figures below 100 s and one decimal
    above ("0.004067 s", "19.27 s", "137.0 s"); in minutes or hours one decimal, two
    figures below 0.1 ("0.0086 min")."""
    size, fmt, name = unit
    value = seconds / size
    if not fmt:
        fmt = ".1f" if abs(value) >= 100 else ".4g"
    elif 0 < abs(value) < 0.1:  # a short one in a row of long ones: not "0.0 min"
        fmt = ".2g"
    return f"{value:{fmt}}{name}"


def _cell(figure: Figure, base: Figure, comparable: bool = True) -> Cell:
    if figure is base or figure.value is None or base.value is None:
        return Cell(figure.text, figure.value, "")
    difference = figure.value - base.value
    if figure.key in ("mfu",):
        change = f"{difference * 100:+.1f} pt"
    elif figure.key in ("step_time",):
        change = f"{difference:+.4g} s"
    elif figure.key in DURATIONS:
        largest = max(abs(figure.value), abs(base.value))
        unit = _unit(largest, _seconds_below(figure.key))
        change = ("+" if difference >= 0 else "-") + _in_unit(abs(difference), unit)
    elif figure.key == "iterations":
        change = f"{difference:+,.0f}"
    else:
        change = f"{difference:+,.4g}"
    if base.value:
        change += f" ({number(figure.value / base.value, '.3f')}{TIMES})"
    return Cell(figure.text, figure.value, change, comparable)


def _identities(
    labels: Sequence[str], facts: Sequence[RunIdentity]
) -> tuple[tuple[IdentityLine, ...], tuple[FactDifference, ...]]:
    """Each run's identity line with the differing facts marked, and those facts."""
    differs = differing(facts)
    lines = []
    for label, run in zip(labels, facts, strict=True):
        parts = tuple(
            IdentityPart(fact, text, bool({fact, *LINE_FACTS[fact]} & set(differs)))
            for fact in LINE_FACTS
            if (text := _identity_text(run, fact, short=False))
        )
        lines.append(IdentityLine(label, parts, run.low_confidence))
    shown = tuple(
        FactDifference(
            fact, FACT_LABELS[fact], tuple(_identity_text(r, fact) or UNKNOWN for r in facts)
        )
        for fact in differs
    )
    return tuple(lines), shown


def _identity_text(run: RunIdentity, fact: str, short: bool = True) -> str:
    """One identity fact as shown: alone (`short`, in a list of what differs) or as a part
    of the identity line (with what it is: "seq 1,024"); "" for an unknown part."""
    if fact == "framework":
        engine = {True: " (DeepSpeed on)", False: " (DeepSpeed off)", None: ""}[run.deepspeed]
        return (run.framework or UNKNOWN) + ("" if short else engine)
    if fact == "deepspeed":
        return {True: "on", False: "off", None: ""}[run.deepspeed]
    if fact == "hardware":
        return f"{number(run.num_gpus, 'd')} {TIMES} {run.gpu or 'unknown GPU'}"
    if fact == "num_gpus":
        return number(run.num_gpus, ",d")
    if fact == "gpu":
        return run.gpu or UNKNOWN
    if fact == "model":
        return _model_text(run)
    if fact == "parallelism":
        return _parallelism_text(run.parallelism)
    if fact == "seq_length":
        if short or run.seq_length is None:
            return number(run.seq_length, ",d") if short else ""
        return f"seq {run.seq_length:,}"
    if fact == "global_batch_size":
        if short:
            return number(run.global_batch_size, ",d")
        if run.global_batch_size is None:
            return "batch unknown"
        micro = f" (micro {run.micro_batch_size:,})" if run.micro_batch_size else ""
        return f"batch {run.global_batch_size:,}{micro}"
    if fact == "micro_batch_size":
        return number(run.micro_batch_size, ",d")
    if fact == "precision":
        return run.precision or ("" if not short else UNKNOWN)
    if fact == "recompute":
        if run.recompute is None:
            return UNKNOWN if short else ""
        if short:
            return run.recompute
        return "no recomputation" if run.recompute == "none" else f"recompute {run.recompute}"
    raise ValueError(fact)


def _model_text(run: RunIdentity) -> str:
    shape = " ".join(
        f"{label}={value}"
        for name, label in (
            ("num_layers", "L"),
            ("hidden_size", "h"),
            ("num_attention_heads", "a"),
        )
        for key, value in run.shape
        if key == name
    )
    if run.params is None:
        text = "parameters unknown"
    elif run.params >= 1e9:
        text = f"{number(run.params / 1e9, '.3g')}B params"
    else:
        text = f"{number(run.params / 1e6, '.3g')}M params"
    return text + (f", {shape}" if shape else "")


def _parallelism_text(split: Parallelism) -> str:
    """ "TP4-PP16", "ZeRO-3 TP4-DP16": the sizes above 1, ZeRO's stage first."""
    if split.tensor is None and split.data is None:
        return "parallelism unknown"
    sizes = (
        ("TP", split.tensor),
        ("PP", split.pipeline),
        ("DP", split.data),
        ("CP", split.context),
        ("EP", split.expert),
    )
    text = "-".join(f"{name}{size}" for name, size in sizes if size is not None and size > 1)
    if split.data is None:
        text += ("-" if text else "") + "DP unknown"
    zero = f"ZeRO-{split.zero_stage}" if split.zero_stage else ""
    return " ".join(part for part in (zero, text or "1 GPU") if part)


def headline_sentence(
    labels: Sequence[str], facts: Sequence[RunIdentity], found: Difference | None
) -> str:
    """The largest difference between a run and the baseline, and the identity facts that
    differ between the two (its likely reason), or that none does."""
    if found is None:
        return "No rate is known in two runs: nothing to compare."
    run, base = labels[found.run], labels[0]
    gap = found.ratio - 1
    if abs(gap) < ALIKE:
        lead = (
            f"{run} and {base} run alike: the largest difference, in "
            f"{_RATE_WORDS[found.figure]}, is {percent(abs(gap))}."
        )
    elif found.ratio >= 2 or found.ratio <= 0.5:
        value, against = _rate_values(found)
        lead = (
            f"{run}'s {_RATE_WORDS[found.figure]} is {number(found.ratio, '.3g')}{TIMES} "
            f"{base}'s ({value} against {against})."
        )
    else:
        lead = _rate_sentence(run, base, found)
    pair = (facts[0], facts[found.run])
    if found.reasons:
        reasons = ", ".join(
            f"{FACT_LABELS[fact]} ({_identity_text(pair[1], fact)} against "
            f"{_identity_text(pair[0], fact)})"
            for fact in found.reasons
        )
        lead += f" The runs differ in {reasons}."
    else:
        lead += (
            " Their model, batch, parallelism, precision, recomputation, hardware and "
            "framework are the same as far as the logs say."
        )
    low = [labels[i] for i in (0, found.run) if facts[i].low_confidence]
    if low:
        lead += (
            f" Low confidence: {' and '.join(low)} {'rests' if len(low) == 1 else 'rest'} on "
            "fewer than 10 steady records."
        )
    return lead


_RATE_WORDS = {
    "tokens_per_s": "tokens per second",
    "mfu": "MFU",
    "step_time": "median step time",
    "time_per_iteration": "wall clock per iteration",
}


def _rate_sentence(run: str, base: str, found: Difference) -> str:
    """ "b trains 7.6 % fewer tokens per second than a (7,648 against 8,280)." and alike."""
    gap = found.ratio - 1
    if found.figure == "tokens_per_s":
        what = f"trains {percent(abs(gap))} {'more' if gap > 0 else 'fewer'} tokens per second"
    elif found.figure == "mfu":
        what = f"reaches a {percent(abs(gap))} {'higher' if gap > 0 else 'lower'} MFU"
    elif found.figure == "step_time":
        what = f"takes {percent(abs(gap))} {'longer' if gap > 0 else 'less time'} per iteration"
    else:
        what = (
            f"takes {percent(abs(gap))} {'more' if gap > 0 else 'less'} wall clock per "
            "iteration (start-up and lost time included)"
        )
    value, against = _rate_values(found)
    return f"{run} {what} than {base} ({value} against {against})."


def _rate_values(found: Difference) -> tuple[str, str]:
    """The run's and the baseline's rate as shown."""
    if found.figure == "tokens_per_s":
        return number(found.value, ",.0f"), number(found.baseline_value, ",.0f")
    if found.figure == "mfu":
        return percent(found.value), percent(found.baseline_value)
    if found.figure == "step_time":
        return number(found.value, ".4g", " s"), number(found.baseline_value, ".4g", " s")
    unit = _unit(max(found.value, found.baseline_value), _seconds_below(found.figure))
    return _in_unit(found.value, unit), _in_unit(found.baseline_value, unit)


def faster_sentence(labels: Sequence[str], headlines: Sequence[Sequence[Figure]]) -> str:
    """Which run trained faster, by tokens/s where every run's is known, else by the median
    step time, and by how much."""
    by_key = [{f.key: f for f in h} for h in headlines]
    tokens = [h["tokens_per_s"].value for h in by_key]
    steps = [h["step_time"].value for h in by_key]
    if all(t is not None for t in tokens):
        known = [float(t) for t in tokens if t is not None]
        best = max(range(len(known)), key=lambda i: known[i])
        rest = [known[i] for i in range(len(known)) if i != best]
        ratio = known[best] / max(rest)
        return (
            f"{labels[best]} is the fastest: {number(known[best], ',.0f')} tokens/s, "
            f"{number(ratio, '.3f')}{TIMES} the next run's ({number(max(rest), ',.0f')} tokens/s)"
            f", {percent(ratio - 1)} more tokens per second."
        )
    if all(s is not None for s in steps):
        known = [float(s) for s in steps if s is not None]
        best = min(range(len(known)), key=lambda i: known[i])
        rest = [known[i] for i in range(len(known)) if i != best]
        ratio = min(rest) / known[best]
        return (
            f"{labels[best]} is the fastest per iteration: median step time "
            f"{number(known[best], '.4g', ' s')} against {number(min(rest), '.4g', ' s')}, "
            f"{number(ratio, '.3f')}{TIMES} (tokens per iteration unknown, so per step)."
        )
    return "Which run is faster is unknown: a run has no timed records."


def _lost_most(labels: Sequence[str], views: Sequence[Any]) -> str:
    """Which run lost the largest share of its wall clock (a share: logs of different
    lengths lose different totals), and to what most."""
    heads = [{f.key: f.value for f in v.headline} for v in views]
    lost = [h.get("lost") or 0.0 for h in heads]
    shares = [
        (h.get("lost") or 0.0) / h["wall_clock"] if h.get("wall_clock") else 0.0 for h in heads
    ]
    worst = max(range(len(lost)), key=lambda i: (shares[i], lost[i]))
    if lost[worst] <= 0:
        return "No run lost time to warm-up, slow steps, restarts or stalls."
    causes = [p for p in views[worst].budget if p.key not in ("productive", "unlogged")]
    cause = max(causes, key=lambda p: p.seconds) if causes else None
    where = f", most of it to {cause.label} ({cause.text})" if cause else ""
    share = f" ({percent(shares[worst])} of its wall clock)" if shares[worst] else ""
    return f"{labels[worst]} lost the most time: {duration(lost[worst])}{share}{where}."


def _config_differences(runs: Sequence[RunInput]) -> tuple[ConfigDifference, ...]:
    """Config values that are not the same in every run (absent counts as different; a
    value of None, an argument printed unset, is the same as absent), those that change
    FLOPs or parallelism first (`analysis.comparison.config_order`)."""
    configs = [r.run.config if r.run is not None else {} for r in runs]

    def stated(name: str) -> list[bool]:
        return [name in c and c[name].value is not None for c in configs]

    names = sorted(
        (n for n in set().union(*configs) if any(stated(n))),
        key=lambda n: config_order(n, all(stated(n))),
    )
    found = {secret for r in runs if r.run is not None for secret in run_secrets(r.run)}
    planted = sorted(found, key=len, reverse=True)
    rows = []
    for name in names:
        values = [
            str(mask_value(name, c[name].value, planted)) if name in c else "—" for c in configs
        ]
        if len(set(values)) > 1:
            rows.append(ConfigDifference(name, tuple(values), config_kind(name)))
    return tuple(rows)


def _charts(runs: Sequence[RunInput], x_axis: XAxis) -> tuple[Chart, ...]:
    """Step time and MFU (TFLOPS/GPU where a peak is unknown) of every run on one axis."""
    step_traces: list[dict[str, Any]] = []
    rate_traces: list[dict[str, Any]] = []
    use_mfu = all(chart_facts(r.document).peak_tflops for r in runs)
    x_label = {"iteration": "iteration", "tokens": "tokens", "time": "hours"}[x_axis]
    for n, item in enumerate(runs):
        if item.run is None:
            continue
        facts = chart_facts(item.document)
        frame = _series(item.run.table, item.document, x_axis)
        if frame.is_empty():
            continue
        colour = RUN_COLOURS[n % len(RUN_COLOURS)]
        flagged = pl.col("iteration").is_in(list(facts.flagged))
        shown = keep_shape(frame, "step_time_s", flagged)
        step_traces.append(_trace(item.label, shown, "step_time_s", colour, ".4g", " s"))
        if facts.flops_per_iteration and facts.num_gpus:
            tflops = facts.flops_per_iteration / pl.col("step_time_s") / facts.num_gpus / 1e12
            rate = tflops / facts.peak_tflops if use_mfu and facts.peak_tflops else tflops
            rated = frame.with_columns(rate.alias("rate"))
            shown = keep_shape(rated, "rate", flagged)
            fmt, unit = (".1%", "") if use_mfu else (".1f", " TFLOPS/GPU")
            rate_traces.append(_trace(item.label, shown, "rate", colour, fmt, unit))
    charts = []
    if step_traces:
        layout = base_layout("seconds per iteration")
        layout["xaxis"]["title"]["text"] = x_label
        charts.append(
            Chart(
                "chart-compare-step-time",
                "Step time",
                _x_caption(x_axis),
                {"data": step_traces, "layout": layout},
            )
        )
    if rate_traces:
        layout = base_layout("MFU" if use_mfu else "TFLOPS/GPU")
        layout["xaxis"]["title"]["text"] = x_label
        if use_mfu:
            layout["yaxis"]["tickformat"] = ".0%"
        charts.append(
            Chart(
                "chart-compare-rate",
                "MFU" if use_mfu else "TFLOPS per GPU (a run's peak is unknown: no MFU)",
                "Each run's FLOPs per iteration over each record's step time.",
                {"data": rate_traces, "layout": layout},
            )
        )
    return tuple(charts)


def _x_caption(x_axis: XAxis) -> str:
    return {
        "iteration": "Each run against its iteration number.",
        "tokens": "Each run against the tokens trained (iterations × tokens per iteration).",
        "time": "Each run against its training time: hours since its first record where the "
        "log has timestamps, else the sum of its logged step times.",
    }[x_axis]


def _series(table: pl.DataFrame, document: Mapping[str, Any], x_axis: XAxis) -> pl.DataFrame:
    frame = table.filter(pl.col("step_time_s").is_not_null() & pl.col("step_time_s").is_finite())
    if x_axis == "iteration":
        x = pl.col("iteration").cast(pl.Float64)
    elif x_axis == "tokens":
        tokens = (document.get("run") or {}).get("tokens_per_iteration")
        if not tokens:
            return frame.clear().with_columns(pl.lit(0.0).alias("x"))
        x = pl.col("iteration").cast(pl.Float64) * tokens
    elif frame["timestamp"].null_count() == 0 and frame.height:
        x = (pl.col("timestamp") - pl.col("timestamp").min()).dt.total_seconds() / 3600
    else:
        x = (pl.col("step_time_s") * pl.col("interval")).cum_sum() / 3600
    return frame.select("iteration", "step_time_s", x.cast(pl.Float64).alias("x"))


def _trace(
    label: str, frame: pl.DataFrame, column: str, colour: str, fmt: str, unit: str
) -> dict[str, Any]:
    name = html.escape(label)
    return {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": frame["x"].to_list(),
        "y": frame[column].to_list(),
        "customdata": frame["iteration"].to_list(),
        "hovertemplate": f"{name}<br>iteration %{{customdata}}<br>%{{y:{fmt}}}{unit}"
        "<extra></extra>",
        "line": {"width": 1.3, "color": colour},
    }


def compare_json(view: CompareView) -> dict[str, Any]:
    """The comparison for scripts: figures with their differences, each run's identity and
    iterations, the config differences (by name, and ranked with their kind) and the
    sentences; charts left out."""
    return {
        "schema": "loganalyzer.compare/1.1",
        "runs": list(view.labels),
        "headline": view.headline,
        "largest_difference": _difference_json(view),
        "identities": [
            {
                "run": line.label,
                "text": line.text,
                **_identity_json(facts),
            }
            for line, facts in zip(view.identity_lines, view.run_facts, strict=True)
        ],
        "identity_differences": {d.fact: list(d.values) for d in view.differs},
        "figures": {
            row.key: [
                {
                    "value": cell.value,
                    "text": cell.text,
                    "change": cell.change or None,
                    "comparable": cell.comparable,
                }
                for cell in row.cells
            ]
            for row in view.figures
        },
        "endings": [
            {"status": e.status, "severity": e.severity, "sentence": e.sentence} if e else None
            for e in view.endings
        ],
        "faster": view.faster,
        "lost_most": view.lost_most,
        "config_differences": {d.name: list(d.values) for d in view.config},
        "config_ranked": [
            {"rank": n, "name": d.name, "kind": d.kind, "folded": d.kind == FOLDED}
            | {"values": list(d.values)}
            for n, d in enumerate(view.config, 1)
        ],
    }


def _identity_json(facts: RunIdentity) -> dict[str, Any]:
    split = facts.parallelism
    return {
        "framework": facts.framework,
        "deepspeed": facts.deepspeed,
        "num_gpus": facts.num_gpus,
        "gpu": facts.gpu,
        "params": facts.params,
        "seq_length": facts.seq_length,
        "global_batch_size": facts.global_batch_size,
        "micro_batch_size": facts.micro_batch_size,
        "parallelism": {
            "tensor": split.tensor,
            "pipeline": split.pipeline,
            "data": split.data,
            "context": split.context,
            "expert": split.expert,
            "zero_stage": split.zero_stage,
        },
        "precision": facts.precision,
        "recompute": facts.recompute,
        "iterations": {
            "records": facts.records,
            "covered": facts.covered,
            "first": facts.first,
            "last": facts.last,
        },
        "wall_s": facts.wall_s,
        "time_per_iteration_s": facts.time_per_iteration,
        "confidence": "low" if facts.low_confidence else "normal",
        "confidence_reason": facts.low_confidence,
    }


def _difference_json(view: CompareView) -> dict[str, Any] | None:
    found = view.difference
    if found is None:
        return None
    return {
        "figure": found.figure,
        "run": view.labels[found.run],
        "baseline": view.labels[0],
        "value": found.value,
        "baseline_value": found.baseline_value,
        "ratio": found.ratio,
        "better": found.better,
        "reasons": list(found.reasons),
    }


def render_compare_text(view: CompareView, *, every_config: bool = False) -> str:
    """The comparison for the terminal: the headline, each run's identity and ending, the
    figures, and the config differences that change FLOPs or parallelism (`every_config`:
    every one)."""
    lines = [view.headline, ""]
    for n, line in enumerate(view.identity_lines):
        lines.append(f"{line.label}: {line.text}")
        ending = view.endings[n] if n < len(view.endings) else None
        if ending is not None:
            lines.append(f"  {ending.sentence}")
        if line.low_confidence:
            lines.append(f"  low confidence: {line.low_confidence}")
    if view.differs:
        lines.append(
            "differs: " + "; ".join(f"{d.label} {' | '.join(d.values)}" for d in view.differs)
        )
    else:
        lines.append("same: model, batch, parallelism, precision, hardware, framework")
    width = max(22, *(len(label) for label in view.labels))
    lines += ["", f"{'':<26}" + "  ".join(f"{label:>{width}}" for label in view.labels)]
    for row in view.figures:
        cells = [f"{c.text}{f' ({c.shown_change})' if c.change else ''}" for c in row.cells]
        lines.append(f"{row.label:<26}" + "  ".join(f"{c:>{width}}" for c in cells))
    lines += ["", view.faster, view.lost_most]
    shown = view.config if every_config else view.ranked
    if view.config:
        lines += ["", f"config differences ({len(view.config)}):"]
        for diff in shown:
            lines.append(f"  {diff.label} [{diff.kind}]: " + " | ".join(diff.shown))
        if not every_config and view.folded:
            lines.append(
                f"  and {plural(len(view.folded), 'other difference')} (paths, logging, "
                "tuning): --all lists them"
            )
    return "\n".join(lines)
