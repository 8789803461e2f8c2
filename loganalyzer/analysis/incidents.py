"""Training instabilities: loss spikes, divergence, grad-norm spikes, NaN/Inf values and the
collapse of fp16's dynamic loss scale, each with the iterations it covers and its log line.

Spikes are judged against a local baseline, as slow steps are (`baseline`): a centred rolling
median, here over `WINDOW` records, because a loss spike takes up to a few hundred
iterations to recover and a median ignores whatever fills less than half of its window. On a
monotonic trend (the loss's slow fall) a centred median is the trend itself, so the trend
raises no spike; near a segment's ends the window is kept symmetric (`symmetric_edges`) for
that reason, and a spike longer than the records before it is measured against those
records. A record is a spike's when it sits above that baseline by more than `LOSS_SPIKE`
(`GRAD_NORM_SPIKE` for the gradient norm) and than the run's own noise (5 robust standard
deviations of the relative residuals, as `baseline.noise_floor`), and as far above the mean
of the `PRIOR` records before it: a loss still falling fast is above a short window's
median, not above its past. A spike runs over the consecutive records above
`RECOVERED_SIGMAS` of the noise (at least `RECOVERED_MIN`) and recovers at the next record.
A rise still on at a segment's end, or a baseline that climbs as far above its lowest and
stays there to the end (a rise long enough for the median to follow it), is a divergence.

Values that are not numbers are incidents of their own: a NaN or infinite loss or gradient
norm, Megatron's count of NaN iterations, and, in Megatron's text lines (which print a loss
only when it is above 0, which a NaN is not), a loss left out of a line that was read past it.
The loss scale collapses when it falls to `SCALE_FLOOR` after having been above it (bf16 runs
print 1.0 throughout: no collapse), or when most of a record's iterations are skipped for
`MIN_SKIPPED` iterations in a row, once the scaler's calibration at the start of a segment
(every iteration skipped until the first one is not) is over. A negative scale is the
DeepSpeed pipeline engine's placeholder, not a scale.

Everything is computed over whole columns; only the incidents found are built one by one.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Literal

import polars as pl

from loganalyzer.analysis._records import by_segment
from loganalyzer.analysis.baseline import MAD_TO_SIGMA, NOISE_SIGMAS

IncidentKind = Literal[
    "loss_spike", "divergence", "grad_norm_spike", "nan", "inf", "loss_scale_collapse"
]

# Records in the centred window of the spike baseline: more than twice the records a spike
# stays high (up to about 200 at a log interval of 1).
WINDOW = 401
# Records per block of the baseline's medians (`block_medians`).
BLOCK = 8
# Records before a spike's first record whose mean it must rise above.
PRIOR = 5
# Relative excess over the baseline that makes a record a spike (1.3x for the loss, 3x for
# the gradient norm, whose ordinary swings are wider), unless the run's noise is wider still.
LOSS_SPIKE = 0.3
GRAD_NORM_SPIKE = 2.0
# A spike has recovered once its record is within this many robust standard deviations of
# the baseline, and at least within `RECOVERED_MIN` of it.
RECOVERED_SIGMAS = 3.0
RECOVERED_MIN = 0.05
# A rise still on at a segment's end is a divergence when it spans at least this many records.
MIN_DIVERGENCE_RECORDS = 3
# The dynamic loss scale's floor (Megatron's --min-loss-scale and DeepSpeed's min_loss_scale
# default to 1), and the skipped iterations in a row that make a collapse without it.
SCALE_FLOOR = 1.0
MIN_SKIPPED = 5


@dataclass(frozen=True)
class Evidence:
    """The record that shows an incident: its file and line (for binary sources, the
    record's position, as the per-iteration table's `line` gives it)."""

    file: str | None
    line: int | None
    iteration: int


@dataclass(frozen=True)
class Incident:
    """One instability over the iterations `first_iteration`..`last_iteration` of `segment`.

    `peak` is the worst value (the highest loss or gradient norm, the lowest loss scale) at
    `peak_iteration`, `baseline` what it is measured against (the local baseline; for a loss
    scale, the scale before it fell), `ratio` peak over baseline. `recovery_iterations` are
    the iterations from the peak to the first record back at the baseline (null when the
    segment ended first). `iterations` are those affected: NaN iterations where the log counts
    them, skipped ones for a loss scale, else the iterations the records cover."""

    kind: IncidentKind
    metric: str
    segment: int
    first_iteration: int
    last_iteration: int
    peak_iteration: int
    peak: float | None
    baseline: float | None
    ratio: float | None
    recovery_iterations: int | None
    records: int
    iterations: int
    evidence: Evidence


def find_incidents(
    table: pl.DataFrame, nan_loss_left_out: Collection[str] = ()
) -> tuple[Incident, ...]:
    """Every incident of the per-iteration table, in log order within each kind.
    `nan_loss_left_out` are the sources (the table's `source`) whose lines leave a NaN loss
    out: Megatron-LM's iteration lines print a loss only `if avg > 0.0`, which a NaN fails
    (Megatron-DeepSpeed's alike); its TensorBoard scalars and W&B values keep the NaN."""
    if table.is_empty():
        return ()
    frame = table.select(
        pl.col("segment").fill_null(0),
        "iteration",
        pl.col("interval").fill_null(1),
        "loss",
        "grad_norm",
        "loss_scale",
        "skipped_iterations",
        "nan_iterations",
        "line",
        "source",
    )
    found = [
        *_spikes(frame, "loss", LOSS_SPIKE),
        *_spikes(frame, "grad_norm", GRAD_NORM_SPIKE),
        *_not_numbers(frame, list(nan_loss_left_out)),
        *_scale_collapses(frame),
    ]
    order = {"divergence": 0, "nan": 1, "inf": 2, "loss_scale_collapse": 3}
    return tuple(sorted(found, key=lambda i: (order.get(i.kind, 4), i.segment, i.first_iteration)))


def _spikes(frame: pl.DataFrame, metric: str, spike: float) -> list[Incident]:
    """Loss (or gradient-norm) spikes, and for the loss, divergence."""
    value = pl.col(metric)
    rows = frame.filter(value.is_finite() & (value > 0)).select(
        "segment", "iteration", "interval", metric, "line", "source"
    )
    if rows.height < PRIOR + 2:
        return []
    prior = value.shift(1).rolling_mean(PRIOR, min_samples=1).over(by_segment(rows))
    centred, before = block_medians(rows, metric)
    # a spike longer than the records before it in its segment fills half its centred window:
    # the records before it say the level then (on a falling loss they stand above the trend)
    rows = rows.with_columns(
        symmetric_edges(rows, metric, centred).alias("level"), prior.alias("prior")
    ).with_columns(pl.min_horizontal("level", before).alias("level"))
    excess = value / pl.col("level") - 1
    sigma = _sigma(rows, excess)
    threshold = max(spike, NOISE_SIGMAS * sigma)
    recovered = max(RECOVERED_MIN, RECOVERED_SIGMAS * sigma)
    high = (excess > threshold) & (value > pl.col("prior") * (1 + threshold))
    elevated = excess > recovered
    rows = rows.with_columns(
        high.fill_null(False).alias("high"),
        elevated.alias("elevated"),
        pl.struct("segment", elevated).rle_id().alias("run"),
        (pl.col("iteration") - pl.col("interval") + 1).alias("first"),
        pl.col("iteration").shift(-1).over("segment").alias("next_iteration"),
    )
    groups = (
        rows.filter("elevated")
        .group_by("run", maintain_order=True)
        .agg(
            pl.col("high").any(),
            pl.col("segment").first(),
            pl.col("first").first(),
            pl.col("iteration").last().alias("last"),
            pl.col("iteration").get(pl.col(metric).arg_max()).alias("peak_iteration"),
            pl.col(metric).max().alias("peak"),
            pl.col("level").get(pl.col(metric).arg_max()).alias("baseline"),
            pl.col("line").get(pl.col(metric).arg_max()).alias("peak_line"),
            pl.col("source").get(pl.col(metric).arg_max()).alias("peak_source"),
            pl.col("next_iteration").last(),
            pl.len().alias("records"),
            pl.col("interval").sum().alias("iterations"),
        )
        .filter("high")
    )
    kind: IncidentKind = "loss_spike" if metric == "loss" else "grad_norm_spike"
    found = []
    for g in groups.iter_rows(named=True):
        unfinished = g["next_iteration"] is None
        diverged = metric == "loss" and unfinished and g["records"] >= MIN_DIVERGENCE_RECORDS
        found.append(
            Incident(
                kind="divergence" if diverged else kind,
                metric=metric,
                segment=g["segment"],
                first_iteration=g["first"],
                last_iteration=g["last"],
                peak_iteration=g["peak_iteration"],
                peak=g["peak"],
                baseline=g["baseline"],
                ratio=g["peak"] / g["baseline"],
                recovery_iterations=None
                if unfinished
                else g["next_iteration"] - g["peak_iteration"],
                records=g["records"],
                iterations=g["iterations"],
                evidence=Evidence(g["peak_source"], g["peak_line"], g["peak_iteration"]),
            )
        )
    if metric == "loss":
        found = _with_divergence(rows, metric, threshold, found)
    return found


def block_medians(frame: pl.DataFrame, column: str) -> tuple[pl.Series, pl.Series]:
    """Each record's centred baseline (the median over about `WINDOW` records around it) and
    the median of about the `WINDOW // 2` records before it, within its segment, both over
    the medians of `BLOCK` records at a time: a rolling median over a million records and a
    window of 401 costs seconds, over their block medians a tenth of that. The trend moves
    little within a block, and a spike fills whole blocks of the window as it fills records.
    Windows cut short at a segment's ends are set right by `symmetric_edges`."""
    position = pl.int_range(pl.len()).over(by_segment(frame))
    ids = frame.select(pl.struct("segment", position // BLOCK).rle_id()).to_series()
    blocks = (
        frame.select(ids.alias("block"), "segment", column)
        .group_by(pl.col("block").set_sorted(), maintain_order=True)
        .agg(pl.col("segment").first(), pl.col(column).median())
    )
    key = by_segment(blocks)
    span = WINDOW // BLOCK | 1
    levels = blocks.select(
        pl.col(column).rolling_median(span, center=True, min_samples=1).over(key).alias("centred"),
        pl.col(column).shift(1).rolling_median(span // 2, min_samples=1).over(key).alias("before"),
    )
    return levels["centred"].gather(ids), levels["before"].gather(ids)


def symmetric_edges(frame: pl.DataFrame, column: str, centred: pl.Series) -> pl.Series:
    """`centred` with each record within half a window of its segment's end given the median
    over the records as far on the other side as there are on the short one (the record
    itself at the very end). A window cut short on one side only holds more of the trend on
    its long side: on a falling loss, the first records of a segment would all stand above
    it. Only those edge records (at most half a window squared per end) are gathered."""
    half = WINDOW // 2
    position = pl.int_range(pl.len()).over("segment")
    reach = pl.min_horizontal(position, pl.len().over("segment") - 1 - position)
    edges = (
        frame.select(pl.int_range(pl.len()).alias("at"), reach.alias("reach"))
        .filter(pl.col("reach") < half)
        .select(
            "at",
            pl.int_ranges(pl.col("at") - pl.col("reach"), pl.col("at") + pl.col("reach") + 1).alias(
                "row"
            ),
        )
        .explode("row")
    )
    if edges.is_empty():
        return centred
    medians = (
        edges.with_columns(frame[column].gather(edges["row"]).alias("value"))
        .group_by(pl.col("at").set_sorted(), maintain_order=True)
        .agg(pl.col("value").median())
    )
    return centred.scatter(medians["at"], medians["value"])


def _sigma(rows: pl.DataFrame, excess: pl.Expr) -> float:
    """The robust standard deviation of the relative residuals (1.4826 * their MAD)."""
    residuals = rows.select(excess).to_series()
    median = residuals.median()
    if median is None:
        return 0.0
    mad = (residuals - median).abs().median()
    return MAD_TO_SIGMA * float(mad) if mad is not None else 0.0


def _with_divergence(
    rows: pl.DataFrame, metric: str, threshold: float, found: list[Incident]
) -> list[Incident]:
    """`found` with a divergence per segment whose baseline climbed `threshold` above its
    lowest and stayed there to the segment's end: a rise long enough for the median to follow
    it, which no residual shows. It absorbs the spikes and divergence found in its span, and
    a spike whose recovery lands in it (a spike it followed at once)."""
    lowest = pl.col("level").cum_min().over("segment")
    risen = rows.with_columns(lowest.alias("lowest")).with_columns(
        (pl.col("level") > pl.col("lowest") * (1 + threshold)).alias("risen")
    )
    tail = (
        risen.with_columns(pl.struct("segment", "risen").rle_id().alias("part"))
        .filter(pl.col("part") == pl.col("part").max().over("segment"))
        .filter("risen")
        .group_by("segment", maintain_order=True)
        .agg(
            pl.col("first").first(),
            pl.col("iteration").last().alias("last"),
            pl.col("iteration").get(pl.col(metric).arg_max()).alias("peak_iteration"),
            pl.col(metric).max().alias("peak"),
            pl.col("lowest").first().alias("baseline"),
            pl.col("line").get(pl.col(metric).arg_max()).alias("peak_line"),
            pl.col("source").get(pl.col(metric).arg_max()).alias("peak_source"),
            pl.len().alias("records"),
            pl.col("interval").sum().alias("iterations"),
        )
        .filter(pl.col("records") >= MIN_DIVERGENCE_RECORDS)
    )
    for g in tail.iter_rows(named=True):
        inside = [
            i
            for i in found
            if i.segment == g["segment"]
            and i.kind in ("loss_spike", "divergence")
            and i.last_iteration + (i.recovery_iterations or 0) >= g["first"]
        ]
        first = min([g["first"], *(i.first_iteration for i in inside)])
        before = [i for i in inside if i.first_iteration < g["first"]]
        records = g["records"] + sum(i.records for i in before)
        peak = max(
            [(g["peak"], g["peak_iteration"], g["peak_source"], g["peak_line"])]
            + [(i.peak, i.peak_iteration, i.evidence.file, i.evidence.line) for i in inside],
            key=lambda p: p[0],
        )
        found = [i for i in found if i not in inside]
        found.append(
            Incident(
                kind="divergence",
                metric=metric,
                segment=g["segment"],
                first_iteration=first,
                last_iteration=g["last"],
                peak_iteration=peak[1],
                peak=peak[0],
                baseline=g["baseline"],
                ratio=peak[0] / g["baseline"],
                recovery_iterations=None,
                records=records,
                iterations=g["iterations"] + sum(i.iterations for i in before),
                evidence=Evidence(peak[2], peak[3], peak[1]),
            )
        )
    return found


def _not_numbers(frame: pl.DataFrame, nan_loss_left_out: list[str]) -> list[Incident]:
    """Runs of records with a NaN or infinite loss or gradient norm, or NaN iterations; where
    the source leaves a NaN loss out of its line (`nan_loss_left_out`), a record without a
    loss in a segment whose other records have one, read past where the loss is printed,
    unless every iteration it covers was skipped (whose loss is left out as well: Megatron
    averages over the iterations applied)."""
    # the fields Megatron prints after the losses: one of them read says the record's line
    # was read past where its loss would be (a line cut or wrapped before them says nothing)
    after_loss = pl.any_horizontal(
        pl.col(c).is_not_null()
        for c in ("loss_scale", "grad_norm", "skipped_iterations", "nan_iterations")
    )
    dropped = (
        pl.col("source").is_in(pl.Series(nan_loss_left_out, dtype=pl.String).implode())
        & pl.col("loss").is_null()
        & after_loss
        & pl.col("loss").is_not_null().any().over("segment")
        & (pl.col("skipped_iterations").fill_null(0) < pl.col("interval"))
    ).fill_null(False)
    nan = (
        pl.col("loss").is_nan().fill_null(False)
        | pl.col("grad_norm").is_nan().fill_null(False)
        | (pl.col("nan_iterations").fill_null(0) > 0)
        | dropped
    )
    inf = pl.col("loss").is_infinite().fill_null(False) | pl.col(
        "grad_norm"
    ).is_infinite().fill_null(False)
    kind = pl.when(nan).then(pl.lit("nan")).when(inf).then(pl.lit("inf"))
    flagged = frame.with_columns(kind.alias("kind"), dropped.alias("dropped")).with_columns(
        pl.struct("segment", "kind").rle_id().alias("run")
    )
    counted = pl.when(pl.col("nan_iterations") > 0).then("nan_iterations").otherwise("interval")
    groups = (
        flagged.filter(pl.col("kind").is_not_null())
        .group_by("run", maintain_order=True)
        .agg(
            pl.col("kind").first(),
            pl.col("segment").first(),
            (pl.col("iteration") - pl.col("interval") + 1).first().alias("first"),
            pl.col("iteration").first().alias("at"),
            pl.col("iteration").last().alias("last"),
            pl.col("line").first(),
            pl.col("source").first(),
            pl.len().alias("records"),
            counted.sum().alias("iterations"),
            pl.col("loss").is_nan().any().alias("loss_nan"),
            pl.col("loss").is_infinite().any().alias("loss_inf"),
            pl.col("grad_norm").is_nan().any().alias("grad_nan"),
            pl.col("grad_norm").is_infinite().any().alias("grad_inf"),
            (pl.col("nan_iterations") > 0).any().alias("counted"),
            pl.col("dropped").any(),
        )
    )
    found = []
    for g in groups.iter_rows(named=True):
        metrics = [
            name
            for name, seen in (
                ("loss", g["loss_nan"] or g["loss_inf"]),
                ("grad_norm", g["grad_nan"] or g["grad_inf"]),
                ("nan_iterations", g["counted"]),
                ("loss not printed", g["dropped"]),
            )
            if seen
        ]
        found.append(
            Incident(
                kind=g["kind"],
                metric=", ".join(metrics),
                segment=g["segment"],
                first_iteration=g["first"],
                last_iteration=g["last"],
                peak_iteration=g["at"],
                peak=None,
                baseline=None,
                ratio=None,
                recovery_iterations=None,
                records=g["records"],
                iterations=g["iterations"],
                evidence=Evidence(g["source"], g["line"], g["at"]),
            )
        )
    return found


def _scale_collapses(frame: pl.DataFrame) -> list[Incident]:
    """Runs of records at the loss scale's floor (after it was above), or skipping most of
    their iterations, past the scaler's calibration."""
    scale = pl.when(pl.col("loss_scale") > 0).then("loss_scale")
    skipped = pl.col("skipped_iterations").fill_null(0)
    calibrated = (skipped == 0).cum_max().over("segment")
    above = (scale > SCALE_FLOOR).fill_null(False).cum_max().over("segment")
    at_floor = (scale <= SCALE_FLOOR).fill_null(False) & above
    skipping = calibrated & (2 * skipped >= pl.col("interval")) & (skipped > 0)
    flagged = frame.with_columns(
        (at_floor | skipping).alias("flag"),
        at_floor.alias("at_floor"),
        scale.forward_fill().shift(1).over("segment").alias("before"),
    ).with_columns(pl.struct("segment", "flag").rle_id().alias("run"))
    groups = (
        flagged.filter("flag")
        .group_by("run", maintain_order=True)
        .agg(
            pl.col("segment").first(),
            (pl.col("iteration") - pl.col("interval") + 1).first().alias("first"),
            pl.col("iteration").first().alias("at"),
            pl.col("iteration").last().alias("last"),
            pl.col("at_floor").any(),
            pl.col("loss_scale").filter(pl.col("loss_scale") > 0).min().alias("lowest"),
            pl.col("before").first(),
            pl.col("line").first(),
            pl.col("source").first(),
            pl.len().alias("records"),
            skipped.sum().alias("skipped"),
        )
        .filter(pl.col("at_floor") | (pl.col("skipped") >= MIN_SKIPPED))
    )
    found = []
    for g in groups.iter_rows(named=True):
        lowest, before = g["lowest"], g["before"]
        found.append(
            Incident(
                kind="loss_scale_collapse",
                metric="loss_scale",
                segment=g["segment"],
                first_iteration=g["first"],
                last_iteration=g["last"],
                peak_iteration=g["at"],
                peak=lowest,
                baseline=before,
                ratio=lowest / before if lowest is not None and before else None,
                recovery_iterations=None,
                records=g["records"],
                iterations=g["skipped"],
                evidence=Evidence(g["source"], g["line"], g["at"]),
            )
        )
    return found
