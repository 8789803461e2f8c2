"""Which of the parts read belong to the same run.

A run is one model on one set of GPUs. A part is one file's launches up to the next start
from scratch or the next launch of another identity: a file that holds several benchmarks
(each counting from iteration 1, or each of another shape) is several parts. Parts are
different runs when their model shape, world size, parallelism or iteration total
(`train_iters`) differ (a fact only one of them states does not separate them; a total that
changes on a resume which carries the counter on without a gap is a run extended, not another
one), or when one
starts from the beginning (its first record covers iteration 1): nothing was resumed, so it is
a new run, not a restart. A part that continues the counter of an earlier run of the same
identity (a resume from a checkpoint) joins it as a restart, unless it began before that run's
last record (it ran beside it: another run of a sweep). A lone record whose log interval is
unknown may or may not cover iteration 1: it joins an earlier run only when it is past that
run's last iteration.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from loganalyzer.merge import order_key, shown
from loganalyzer.model import MODEL_FACTS, PARALLELISM_FACTS, ConfigValue, Endings, Run
from loganalyzer.render.numbers import iterations, plural

# The facts that make two parts the same run: the model's shape, the world size, the
# parallelism, and the iterations the run counts to (`iteration K/ N`: a 10-iteration
# benchmark before the full run counts to 10). The batch size may change inside a run
# (ramp-up), so it is not among them.
IDENTITY_FACTS = (
    *MODEL_FACTS,
    "num_gpus",
    "world_size",
    *PARALLELISM_FACTS.values(),
    "train_iters",
)


def split_parts(run: Run) -> list[Run]:
    """One source's Run cut where a segment starts again from iteration 1, or where a later
    launch states another model shape, world size or parallelism: the launches either side
    are different runs. Records and long-table rows go to a part by their line in the file;
    each part takes the facts its own first launch stated."""
    table = run.table
    if table.height == 0:
        return [run]
    # plain `first`s per group, arithmetic on the few rows after: an expression over
    # aggregates inside `agg` makes polars gather every group's rows (+330 MB on a 2 M-row
    # table, measured)
    segments = (
        table.group_by("segment", maintain_order=True)
        .agg(pl.col("line", "iteration", "interval").first())
        .select(
            "segment",
            "line",
            (pl.col("iteration") - pl.col("interval").fill_null(1) + 1).alias("first"),
        )
    )
    cuts: list[tuple[int | None, int]] = []  # (first line, first segment) of each part
    current: dict[str, object] = {}
    warnings: dict[int, list[str]] = {}  # by part: facts a joined launch stated otherwise
    for segment, line, first in segments.iter_rows():
        stated = run.segment_config.get(segment, {})
        facts = _identity(run.config | stated)
        if cuts and first > 1 and compatible(current, facts):
            current = facts | current
            part_config = run.config | run.segment_config.get(cuts[-1][1], {})
            warnings.setdefault(len(cuts) - 1, []).extend(_differing(stated, part_config))
            continue
        cuts.append((line if cuts else None, segment))
        current = facts
    if len(cuts) == 1 and not run.segment_config:
        return [run]
    ends = [line for line, _ in cuts[1:]] + [None]
    return [
        _lines(
            run,
            low,
            high,
            run.config | run.segment_config.get(segment, {}),
            warnings.get(number, []),
        )
        for number, ((low, segment), high) in enumerate(zip(cuts, ends, strict=True))
    ]


def _differing(stated: dict[str, ConfigValue], used: dict[str, ConfigValue]) -> list[str]:
    """Warnings for the facts a resumed launch stated otherwise than the run's first."""
    return [
        f"{value.provenance}: {key} = {shown(value.value)} differs from {shown(used[key].value)} "
        f"({used[key].provenance}); the first is used"
        for key, value in stated.items()
        if key in used and used[key].value != value.value
    ]


def _lines(
    run: Run,
    low: int | None,
    high: int | None,
    config: dict[str, ConfigValue],
    warnings: list[str],
) -> Run:
    line = pl.col("line")
    within = pl.lit(True)
    if low is not None:
        within = within & (line >= low)
    if high is not None:
        within = within & (line < high)
    if low is None:  # rows without a line number stay with the file's first part
        within = within | line.is_null()
    table = run.table.filter(within)
    table = table.with_columns(segment=(pl.col("segment").rank("dense") - 1).cast(pl.Int32))
    sources = [dataclasses.replace(s, records=table.height) for s in run.sources]
    held = tuple(
        fact
        for fact in run.endings.facts
        if (low is None or fact.line >= low) and (high is None or fact.line < high)
    )
    # the last part, where the file's ending is, keeps the file's counts (lines not held
    # cannot be placed); the others count what they hold
    counts = dict(run.endings.counts) if high is None else dict(Counter(f.kind for f in held))
    return Run(
        framework=run.framework,
        config=config,
        table=table,
        metrics=run.metrics.filter(within),
        sources=sources,
        warnings=[*run.warnings, *warnings],
        endings=Endings(held, counts),
    )


def identity(run: Run) -> dict[str, object]:
    """The facts a part states that decide which run it belongs to."""
    return _identity(run.config)


def _identity(config: dict[str, ConfigValue]) -> dict[str, object]:
    return {
        key: found.value
        for key in IDENTITY_FACTS
        if (found := config.get(key)) is not None and found.value is not None
    }


def compatible(a: dict[str, object], b: dict[str, object]) -> bool:
    """Two parts may be the same run: no fact both state differs."""
    return all(a[key] == b[key] for key in a.keys() & b.keys())


def _starts_from_scratch(run: Run) -> bool | None:
    """Whether the part's first record covers iteration 1 (nothing was resumed); None when
    that cannot be told: a lone record past iteration 1 whose log interval is unknown.

    A record's interval is evidence only when it was measured (the step to a second record)
    or the run states its log interval; parsers give a lone record its own iteration number
    as interval, which would make every lone record a start from scratch.
    """
    table = run.table
    if table.height == 0:
        return False
    first_segment = table.filter(pl.col("segment") == table["segment"][0])
    iteration = int(first_segment["iteration"][0])
    interval = first_segment["interval"][0] or 1
    if first_segment.height > 1 or _log_interval_stated(run.config) or iteration <= 1:
        return bool(iteration - interval + 1 <= 1)
    return None


def _log_interval_stated(config: dict[str, ConfigValue]) -> bool:
    stated = config.get("log_interval")
    return stated is not None and stated.value is not None


# Facts a resume may change and stay the same run: a finished run is extended by relaunching
# it with a larger --train-iters from its last checkpoint.
EXTENSIBLE_FACTS = frozenset({"train_iters"})


def _resumes(part: Run, run: _RunParts, facts: dict[str, object]) -> bool:
    """`part` may resume `run`: the same identity (but for a total it extends, where it
    carries the counter on without a gap), and it started after the run's last record, or it
    holds a record the run holds too (another node's copy of its lines)."""
    if not compatible(run.facts, facts):
        extended = {k: v for k, v in facts.items() if k not in EXTENSIBLE_FACTS}
        if not (compatible(run.facts, extended) and _continues(part, run)):
            return False
    return not _overlaps(part, run) or _shares_records(part, run)


def _continues(part: Run, run: _RunParts) -> bool:
    """`part`'s first record covers iterations from at most the one after the last `run`
    logged: it resumed from a checkpoint of that run, leaving no iteration out (a 10-iteration
    benchmark's `10/ 10` followed by `2400/ 8247` leaves 2,389 out)."""
    lasts = [p.table.select(pl.col("iteration").max()).item() for p in run.parts]
    known = [last for last in lasts if last is not None]
    first = part.table.select(pl.col("iteration").first() - pl.col("interval").first() + 1)
    return bool(known) and first.item() <= max(known) + 1


def _shares_records(part: Run, run: _RunParts) -> bool:
    """Whether any record of `part` is one the run already holds (same iteration, step time
    and loss)."""
    records = part.table.select(RECORD_COPY)
    return any(
        earlier.table.select(RECORD_COPY)
        .join(records, on=RECORD_COPY, how="semi", nulls_equal=True)
        .height
        for earlier in run.parts
    )


def _resumes_or_copies(part: Run, run: _RunParts, facts: dict[str, object]) -> bool:
    """For a part whose start cannot be told: it repeats the run's records and was printed
    no later than the run's last record (another node's copies, up to the same second), or
    it started after the run and carries the counter past its end."""
    if not compatible(run.facts, facts):
        return False
    if _shares_records(part, run) and not _after(part, run):
        return True
    return not _overlaps(part, run) and _past(part, run)


def _past(part: Run, run: _RunParts) -> bool:
    """`part` begins past the last iteration `run` logged (it carries the counter on)."""
    lasts = [p.table.select(pl.col("iteration").max()).item() for p in run.parts]
    known = [last for last in lasts if last is not None]
    return not known or int(part.table["iteration"][0]) > max(known)


def _after(part: Run, run: _RunParts) -> bool:
    """Whether `part` started after the last record of `run` (both timed)."""
    start, end = _start_and_end(part, run)
    return start is not None and end is not None and bool(start > end)


def _overlaps(part: Run, run: _RunParts) -> bool:
    """Whether `part` started before the last record of `run` (both timed): it ran beside
    the run rather than after it, so it is not a resume of it (two runs of one sweep)."""
    start, end = _start_and_end(part, run)
    return start is not None and end is not None and bool(start < end)


def _start_and_end(part: Run, run: _RunParts) -> tuple[datetime | None, datetime | None]:
    """When `part` logged its first record, and `run` its last (None where untimed)."""
    start = part.table.select(pl.col("timestamp").min()).item()
    ends = [p.table.select(pl.col("timestamp").max()).item() for p in run.parts]
    known = [end for end in ends if end is not None]
    return start, (max(known) if known else None)


# What makes a record a copy of another.
RECORD_COPY = ["iteration", "step_time_s", "loss"]


@dataclass
class _RunParts:
    """The parts of one run, in the order the run wrote them."""

    parts: list[Run] = field(default_factory=list)
    facts: dict[str, object] = field(default_factory=dict)


def group_runs(parts: Sequence[Run]) -> list[list[Run]]:
    """The parts grouped into runs, each run's parts in the order they were written; runs in
    the order they started."""
    runs: list[_RunParts] = []
    for part in sorted(parts, key=order_key):
        facts = identity(part)
        home = None
        scratch = _starts_from_scratch(part)
        if scratch is False:  # a resume, of a run that had ended by then
            home = next((r for r in reversed(runs) if _resumes(part, r, facts)), None)
        elif scratch is None:  # unknown: a resume past the run's end, or copies printed beside it
            home = next((r for r in reversed(runs) if _resumes_or_copies(part, r, facts)), None)
        else:  # from scratch, yet copies of a run already seen (each node prints its lines)
            home = next(
                (r for r in runs if compatible(r.facts, facts) and _shares_records(part, r)),
                None,
            )
        if home is None:
            home = _RunParts()
            runs.append(home)
        home.parts.append(part)
        home.facts = {**facts, **home.facts}
    return [r.parts for r in runs]


def describe_runs(runs: Sequence[Run]) -> list[str]:
    """One line per run a reader tells it by: its files (with the lines, where a file holds
    several runs), shape, GPUs, parallelism and iterations (of the total it counts to)."""
    paths = [path for run in runs for path in dict.fromkeys(s.path for s in run.sources)]
    shared = {path for path in paths if paths.count(path) > 1}
    return [_describe(run, shared) for run in runs]


def _describe(run: Run, shared: set[str]) -> str:
    table = run.table
    files = []
    for path in dict.fromkeys(s.path for s in run.sources):
        lines = table.filter(pl.col("source") == path)["line"].drop_nulls().to_list()
        if path in shared and lines:
            low, high = min(lines), max(lines)
            files.append(f"{path} line {low}" if low == high else f"{path} lines {low}–{high}")
        else:
            files.append(path)
    shape = ", ".join(
        f"{label} {value}"
        for label, key in (("layers", "num_layers"), ("hidden", "hidden_size"))
        if (value := run.get(key)) is not None
    )
    gpus = run.get_int("num_gpus")
    parallel = " ".join(
        f"{name[0].upper()}P={value}"
        for name, key in PARALLELISM_FACTS.items()
        if (value := run.get_int(key)) is not None
    )
    if table.height:
        span = iterations(int(table["iteration"].min()), int(table["iteration"].max()))  # type: ignore[arg-type]
        total = run.get_int("train_iters")
        counted = f" of {total}" if total is not None else ""
        records = f"{span}{counted} ({plural(table.height, 'record')})"
    else:
        records = "no iteration records"
    facts = [
        shape or "shape unknown",
        plural(gpus, "GPU") if gpus is not None else "GPU count unknown",
        *([parallel] if parallel else []),
        records,
    ]
    return f"{', '.join(files)}: {', '.join(facts)}"
