"""Verdicts: what a reader should take away, each with a stable code and the numbers behind it.

Codes are part of the JSON contract: scripts match on them, so they never change meaning.
Messages carry the figures a reader needs to check the verdict by hand. Verdicts come ordered
by severity (critical first), then in the fixed order of the checks below.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Literal

import polars as pl

from loganalyzer.analysis import Analysis
from loganalyzer.analysis.baseline import centred_median, noise_floor
from loganalyzer.analysis.slow_steps import Sustained
from loganalyzer.render.numbers import (
    duration,
    iterations,
    percent,
    plural,
    ratio,
    seconds,
)

Severity = Literal["info", "warning", "critical"]
_SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}

# Above this, an MFU on a GPU almost always means a wrong GPU count, peak or FLOP formula.
IMPLAUSIBLE_MFU = 0.75
# Recomputed and reported TFLOPS may differ by the expected ratio, and this much beyond it.
TFLOPS_TOLERANCE = 0.10
# A rise of the steady step time beyond this, first decile to last, is a drift.
DRIFT_THRESHOLD = 0.10
# A loss this far (relative) above its local median, and above the run's loss noise, is a spike.
LOSS_SPIKE_MIN = 0.10
# Lost time above this share of the logged time turns an info into a warning.
LOST_SHARE_WARNING = 0.05
# A per-rank timer whose slowest rank sits this far above the median rank.
RANK_SPREAD_WARNING = 1.25
# Published runs within this factor of the run's parameter count count as similar in size.
SIZE_FACTOR = 5.0
# Beyond this factor from every published run, a shortfall is information, not a warning.
UNLIKE_SIZE_FACTOR = 10.0
# A shortfall below the band's bottom smaller than this (relative) is information: published
# figures are rounded, and measured on other models and clusters.
REFERENCE_TOLERANCE = 0.10
# MFU below this share of the reference band's bottom is critical, not just a warning.
CRITICAL_SHARE_OF_REFERENCE = 0.5
_LISTED = 3
_USUAL_PERIODIC = "typically checkpoint saves or evaluation"
_NOT_GPUS = ("tpu", "trn", "gaudi")


@dataclass(frozen=True)
class Verdict:
    """One finding; `message` carries the numbers behind it."""

    severity: Severity
    code: str
    message: str


@dataclass(frozen=True)
class MfuInputs:
    """What the FLOPs engine knows about the run, for the MFU verdicts. `params` is the
    parameter count a token meets (the active parameters of an MoE model, which is what its
    FLOPs and so its MFU scale with); `expected_ratio` is the recomputed/reported TFLOPS
    ratio that the formula differences explain (1.0 when both use the same formula)."""

    mfu: float | None
    hardware_key: str | None
    dtype: str | None
    params: float | None
    num_gpus: int | None
    recomputed_over_reported: float | None
    expected_ratio: float | None = None
    low_confidence: str | None = None
    mfu_vs_bf16: float | None = None  # an FP8 run's MFU against the bf16 peak


@dataclass(frozen=True)
class ReferenceRun:
    """A published training run's utilisation, with where it was published."""

    run: str
    params_b: float | None
    hardware: str
    num_devices: int | None
    dtype: str
    mfu: float
    source: str


@cache
def reference_runs() -> tuple[ReferenceRun, ...]:
    """The published runs with an MFU figure, from the bundled `data/reference_runs.csv`."""
    data = files("loganalyzer").joinpath("data/reference_runs.csv").read_bytes()
    rows = pl.read_csv(data).filter(pl.col("mfu").is_not_null())
    return tuple(
        ReferenceRun(
            run=row["run"],
            params_b=row["model_params_b"],
            hardware=row["hardware"],
            num_devices=row["num_devices"],
            dtype=row["dtype"],
            mfu=row["mfu"],
            source=row["source"],
        )
        for row in rows.iter_rows(named=True)
    )


def judge(
    analysis: Analysis,
    table: pl.DataFrame,
    mfu: MfuInputs,
    period_causes: Mapping[int, str] | None = None,
) -> list[Verdict]:
    """Every verdict on the run, most severe first. `period_causes` names, per period in
    iterations, the cause its slow steps were attributed to (see `causes`)."""
    verdicts = [
        *_tentative(mfu.low_confidence, [*_mfu_verdicts(mfu), *_tflops_mismatch(mfu)]),
        *_slow_step_verdicts(analysis, period_causes or {}),
        *_at_slow_steps(analysis, table),
        *_drift(analysis),
        *_restarts(analysis),
        *_stalls(analysis),
        *_rank_spread(analysis),
    ]
    return sorted(verdicts, key=lambda v: _SEVERITY_ORDER[v.severity])


def _tentative(reason: str | None, verdicts: list[Verdict]) -> list[Verdict]:
    """Verdicts on figures that rest on too few records are information, saying so."""
    if reason is None:
        return verdicts
    return [Verdict("info", v.code, f"{v.message} (low confidence: {reason})") for v in verdicts]


def hardware_family(name: str) -> str | None:
    """The chip family a table key or a free-text hardware name belongs to ("h100-sxm" and
    "H100-80GB" are both "h100"; "TPU v4" and "tpu-v4" are "tpuv4")."""
    normalised = re.sub(r"tpu[\s-]*v", "tpuv", name.lower())
    found = re.match(r"[a-z]+\d+[a-z]?", normalised)
    return found.group(0) if found else None


def _precision_class(dtype: str) -> str:
    """16-bit mixed precision goes by several names in published runs."""
    return "16-bit" if dtype.lower() in ("bf16", "fp16", "mixed") else dtype.lower()


def _mfu_verdicts(inputs: MfuInputs) -> list[Verdict]:
    if inputs.mfu is None:
        return []
    verdicts = []
    key = inputs.hardware_key or ""
    if inputs.mfu > IMPLAUSIBLE_MFU and not key.startswith(_NOT_GPUS):
        verdicts.append(
            Verdict(
                "critical",
                "MFU_IMPLAUSIBLY_HIGH",
                f"MFU {percent(inputs.mfu)} is above {percent(IMPLAUSIBLE_MFU)}, which no "
                "published GPU "
                "training run reaches: check the GPU count, the dtype's peak and the FLOP "
                "formula's inputs",
            )
        )
    verdicts.extend(_against_references(inputs.mfu, inputs))
    return verdicts


def _against_references(mfu: float, inputs: MfuInputs) -> list[Verdict]:
    family = hardware_family(inputs.hardware_key) if inputs.hardware_key else None
    if family is None or inputs.dtype is None:
        return []
    dtype, name = inputs.dtype, "MFU"
    peers = _peers(family, dtype)
    if not peers and dtype == "fp8" and inputs.mfu_vs_bf16 is not None:
        # Most published figures are against the bf16 peak: so is this comparison.
        dtype, name, mfu = "bf16", "MFU against the bf16 peak", inputs.mfu_vs_bf16
        peers = _peers(family, dtype)
    label = f"{dtype} on {family.upper()}"
    if not peers:
        message = f"no published run of {label} to compare {name} {percent(mfu)} against"
        return [Verdict("info", "MFU_NO_REFERENCE", message)]
    sized = [ref for ref in peers if _similar_size(ref, inputs.params)]
    # Published runs of a very different size say little about this one: below them is
    # then worth knowing, not a warning.
    size_unlike = inputs.params is not None and not any(
        _similar_size(ref, inputs.params, UNLIKE_SIZE_FACTOR) for ref in peers
    )
    if sized:
        peers, label = sized, f"{label} of similar size"
    elif size_unlike:
        label = f"{label} (none within {ratio(UNLIKE_SIZE_FACTOR, 0)} of this model's size)"
    peers.sort(key=lambda ref: (-ref.mfu, ref.run))
    low, high = peers[-1].mfu, peers[0].mfu
    listed = "; ".join(_describe(ref) for ref in peers[:_LISTED])
    band = f"{percent(low)} to {percent(high)}" if low != high else percent(low)
    where = f"published runs of {label} reached {band} ({listed})"
    if mfu >= low:
        above = mfu > high
        code = "MFU_ABOVE_REFERENCE" if above else "MFU_WITHIN_REFERENCE"
        relation = "above what" if above else "within what"
        return [Verdict("info", code, f"{name} {percent(mfu)} is {relation} {where}")]
    severity: Severity = "critical" if mfu < CRITICAL_SHARE_OF_REFERENCE * low else "warning"
    if size_unlike or mfu >= (1 - REFERENCE_TOLERANCE) * low:
        severity = "info"
    message = f"{name} {percent(mfu)} is below what {where}"
    return [Verdict(severity, "MFU_BELOW_REFERENCE", message)]


def _peers(family: str, dtype: str) -> list[ReferenceRun]:
    precision = _precision_class(dtype)
    return [
        ref
        for ref in reference_runs()
        if hardware_family(ref.hardware) == family and _precision_class(ref.dtype) == precision
    ]


def _similar_size(ref: ReferenceRun, params: float | None, factor: float = SIZE_FACTOR) -> bool:
    if params is None or ref.params_b is None:
        return False
    ratio = params / (ref.params_b * 1e9)
    return 1 / factor <= ratio <= factor


def _describe(ref: ReferenceRun) -> str:
    devices = f" on {ref.num_devices} devices" if ref.num_devices else ""
    return f"{ref.run} {percent(ref.mfu)}{devices}, {ref.source}"


def _tflops_mismatch(inputs: MfuInputs) -> list[Verdict]:
    found = inputs.recomputed_over_reported
    if found is None:
        return []
    expected = inputs.expected_ratio if inputs.expected_ratio is not None else 1.0
    off = found / expected - 1
    if abs(off) <= TFLOPS_TOLERANCE:
        return []
    message = (
        f"recomputed TFLOPS are {ratio(found)} the framework's own figure where the formula "
        f"differences explain {ratio(expected)}: {'+' if off > 0 else ''}{percent(off)} "
        f"unexplained (tolerance {percent(TFLOPS_TOLERANCE)}); check the GPU count, the model "
        "shape and the batch size"
    )
    return [Verdict("warning", "REPORTED_TFLOPS_MISMATCH", message)]


def _lost_severity(lost_s: float, analysis: Analysis) -> Severity:
    logged = analysis.time.logged_s
    return "warning" if logged > 0 and lost_s > LOST_SHARE_WARNING * logged else "info"


def _share(lost_s: float, analysis: Analysis) -> str:
    logged = analysis.time.logged_s
    return f"{percent(lost_s / logged)} of the logged {duration(logged)}" if logged > 0 else ""


def _slow_step_verdicts(analysis: Analysis, period_causes: Mapping[int, str]) -> list[Verdict]:
    slow = analysis.slow
    verdicts = []
    spikes = [s for s in slow.steps if s.kind in ("spike", "stall")]
    if spikes:
        lost = sum(s.lost_s for s in spikes)
        worst = max(spikes, key=lambda s: (s.lost_s, -s.iteration))
        span = iterations(worst.first_iteration, worst.last_iteration)
        took = "averaged" if worst.interval > 1 else "took"
        message = (
            f"{plural(len(spikes), 'isolated slow record')} above the baseline cost "
            f"{duration(lost)} ({_share(lost, analysis)}); the worst, {span}, {took} "
            f"{seconds(worst.step_time_s)} against {seconds(worst.baseline_s)} "
            f"({ratio(worst.ratio)}): {duration(worst.lost_s)} lost"
        )
        if worst.kind == "stall":
            message += (
                f", most likely one iteration that stalled for {duration(worst.lost_s)} rather "
                f"than {worst.interval} slow ones"
            )
        verdicts.append(Verdict(_lost_severity(lost, analysis), "SLOW_STEPS", message))
    for pattern in slow.periodic:
        message = (
            f"{pattern.occurrences} slow steps recur every {pattern.period_iterations} "
            f"iterations ({iterations(pattern.first_iteration, pattern.last_iteration)}, median "
            f"{ratio(pattern.median_ratio)} the baseline), "
            f"{period_causes.get(pattern.period_iterations, _USUAL_PERIODIC)}; "
            f"they cost {duration(pattern.lost_s)} ({_share(pattern.lost_s, analysis)})"
        )
        severity = _lost_severity(pattern.lost_s, analysis)
        verdicts.append(Verdict(severity, "PERIODIC_SLOW_STEPS", message))
    for event in slow.sustained:
        message = (
            f"{iterations(event.start_iteration, event.end_iteration)}{_records(event)} ran at "
            f"{seconds(event.step_time_s)} per iteration, {ratio(event.factor)} the pace of "
            f"{seconds(event.baseline_s)}, for {plural(event.iterations, 'iteration')}: "
            f"{duration(event.lost_s)} lost ({_share(event.lost_s, analysis)})"
        )
        severity = _lost_severity(event.lost_s, analysis)
        verdicts.append(Verdict(severity, "SUSTAINED_SLOWDOWN", message))
    return verdicts


def _records(event: Sustained) -> str:
    """Which records a slowdown spans, where they average several iterations each."""
    if event.interval <= 1:
        return ""
    return f" ({plural(event.records, 'record')}, {event.first_record} to {event.last_record})"


def _slow_frame(analysis: Analysis) -> pl.DataFrame:
    steps = analysis.slow.steps
    return pl.DataFrame(
        {
            "segment": [s.segment for s in steps],
            "iteration": [s.iteration for s in steps],
            "ratio": [s.ratio for s in steps],
        },
        schema={"segment": pl.Int32, "iteration": pl.Int64, "ratio": pl.Float64},
    )


def _at_slow_steps(analysis: Analysis, table: pl.DataFrame) -> list[Verdict]:
    slow = _slow_frame(analysis)
    if slow.is_empty():
        return []
    records = table.select(
        pl.col("segment").fill_null(0),
        "iteration",
        "loss",
        pl.col("skipped_iterations").fill_null(0),
        pl.col("nan_iterations").fill_null(0),
    ).join(slow, on=["segment", "iteration"], how="left", maintain_order="left")
    verdicts = []
    spikes = _loss_spikes(records).filter(pl.col("ratio").is_not_null())
    if spikes.height:
        listed = ", ".join(
            f"iteration {row['iteration']} (loss {row['loss']:.4g} against a local median of "
            f"{row['median']:.4g}, step {ratio(row['ratio'])} the baseline)"
            for row in spikes.head(_LISTED).iter_rows(named=True)
        )
        message = (
            f"{plural(spikes.height, 'slow step')} "
            f"{'coincides' if spikes.height == 1 else 'coincide'} with a loss spike: {listed}; "
            "a data or numerics problem can slow a step (recovery, re-tries) as well as the loss"
        )
        verdicts.append(Verdict("warning", "LOSS_SPIKE_AT_SLOW_STEP", message))
    bad = records.filter(
        pl.col("ratio").is_not_null()
        & ((pl.col("skipped_iterations") > 0) | (pl.col("nan_iterations") > 0))
    )
    if bad.height:
        listed = ", ".join(
            f"iteration {row['iteration']} ({row['skipped_iterations']} skipped, "
            f"{row['nan_iterations']} NaN, step {ratio(row['ratio'])} the baseline)"
            for row in bad.head(_LISTED).iter_rows(named=True)
        )
        message = f"{plural(bad.height, 'slow step')} skipped iterations or hit NaNs: {listed}"
        verdicts.append(Verdict("warning", "NAN_OR_SKIPPED_AT_SLOW_STEP", message))
    return verdicts


def _loss_spikes(records: pl.DataFrame) -> pl.DataFrame:
    """Records whose loss stands above its centred rolling median by more than
    `LOSS_SPIKE_MIN` and than the run's loss noise (the same rule as for step times)."""
    framed = records.filter(pl.col("loss").is_not_null())
    framed = framed.with_columns(centred_median(framed, "loss").alias("median"))
    excess = pl.col("loss") / pl.col("median") - 1
    return framed.filter(excess > max(LOSS_SPIKE_MIN, noise_floor(framed, excess)))


def _drift(analysis: Analysis) -> list[Verdict]:
    drift = analysis.drift
    if drift is None or drift.relative_change <= DRIFT_THRESHOLD:
        return []
    taken = "median" if drift.pace_method == "median" else "pace (total time over iterations)"
    message = (
        f"the steady step time rose {percent(drift.relative_change)}, from a {taken} of "
        f"{seconds(drift.first_median_s)} over {iterations(*drift.first_iterations)} to "
        f"{seconds(drift.last_median_s)} over {iterations(*drift.last_iterations)} (first and "
        "last tenth of "
        f"{drift.records} steady records)"
    )
    return [Verdict("warning", "STEP_TIME_DRIFT", message)]


def _restarts(analysis: Analysis) -> list[Verdict]:
    restarts = analysis.restarts
    if not restarts:
        return []
    lost = sum(r.lost_s for r in restarts)
    known = [r.gap_s for r in restarts if r.gap_s is not None]
    redone = sum(r.lost_iterations for r in restarts)
    gaps = (
        f"{duration(sum(known))} of gaps (known for {len(known)} of {len(restarts)})"
        if known
        else "gaps unknown (no timestamps)"
    )
    message = (
        f"{plural(len(restarts), 'restart')} cost {duration(lost)}: {gaps} and "
        f"{plural(redone, 'redone iteration')} ({duration(sum(r.redone_s for r in restarts))} "
        f"at the steady pace of {seconds(analysis.step_time_s.median)})"
    )
    return [Verdict(_lost_severity(lost, analysis), "RESTARTS_LOST_TIME", message)]


def _stalls(analysis: Analysis) -> list[Verdict]:
    stalls = analysis.stalls
    if not stalls:
        return []
    longest = max(stalls, key=lambda s: (s.gap_s, -s.iteration))
    message = (
        f"{plural(len(stalls), 'stall')} inside a run segment added "
        f"{duration(analysis.time.stalls_s)} "
        f"that the step times do not show; the longest, {duration(longest.gap_s)}, came between "
        f"iterations {longest.after_iteration} and {longest.iteration}"
    )
    return [Verdict("warning", "STALLS", message)]


def _rank_spread(analysis: Analysis) -> list[Verdict]:
    verdicts = []
    for spread in analysis.stragglers:
        if not spread.metric.startswith("timer/") or (spread.spread or 0) <= RANK_SPREAD_WARNING:
            continue
        slowest = spread.top[0]
        message = (
            f"{spread.metric}: rank {slowest.rank} takes {slowest.value:.4g} ms, "
            f"{ratio(spread.spread)} the median rank's {spread.median:.4g} ms over {spread.ranks} "
            "ranks"
        )
        verdicts.append(Verdict("warning", "STRAGGLER_RANK", message))
    return verdicts
