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
from loganalyzer.render.numbers import duration

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
    """What the FLOPs engine knows about the run, for the MFU verdicts. `params` is the total
    parameter count; `expected_ratio` is the recomputed/reported TFLOPS ratio that the formula
    differences explain (1.0 when both use the same formula)."""

    mfu: float | None
    hardware_key: str | None
    dtype: str | None
    params: float | None
    num_gpus: int | None
    recomputed_over_reported: float | None
    expected_ratio: float | None = None


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
        *_mfu_verdicts(mfu),
        *_tflops_mismatch(mfu),
        *_slow_step_verdicts(analysis, period_causes or {}),
        *_at_slow_steps(analysis, table),
        *_drift(analysis),
        *_restarts(analysis),
        *_stalls(analysis),
        *_rank_spread(analysis),
    ]
    return sorted(verdicts, key=lambda v: _SEVERITY_ORDER[v.severity])


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
                f"MFU {inputs.mfu:.2f} is above {IMPLAUSIBLE_MFU:.2f}, which no published GPU "
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
    precision = _precision_class(inputs.dtype)
    peers = [
        ref
        for ref in reference_runs()
        if hardware_family(ref.hardware) == family and _precision_class(ref.dtype) == precision
    ]
    label = f"{inputs.dtype} on {family.upper()}"
    if not peers:
        message = f"no published run of {label} to compare MFU {mfu:.2f} against"
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
        label = f"{label} (none within {UNLIKE_SIZE_FACTOR:g}x of this model's size)"
    peers.sort(key=lambda ref: (-ref.mfu, ref.run))
    low, high = peers[-1].mfu, peers[0].mfu
    listed = "; ".join(_describe(ref) for ref in peers[:_LISTED])
    band = f"{low:.3g}-{high:.3g}" if low != high else f"{low:.3g}"
    where = f"published runs of {label} reached {band} ({listed})"
    if mfu >= low:
        above = mfu > high
        code = "MFU_ABOVE_REFERENCE" if above else "MFU_WITHIN_REFERENCE"
        relation = "above what" if above else "within what"
        return [Verdict("info", code, f"MFU {mfu:.2f} is {relation} {where}")]
    severity: Severity = "critical" if mfu < CRITICAL_SHARE_OF_REFERENCE * low else "warning"
    if size_unlike:
        severity = "info"
    return [Verdict(severity, "MFU_BELOW_REFERENCE", f"MFU {mfu:.2f} is below what {where}")]


def _similar_size(ref: ReferenceRun, params: float | None, factor: float = SIZE_FACTOR) -> bool:
    if params is None or ref.params_b is None:
        return False
    ratio = params / (ref.params_b * 1e9)
    return 1 / factor <= ratio <= factor


def _describe(ref: ReferenceRun) -> str:
    devices = f" on {ref.num_devices} devices" if ref.num_devices else ""
    return f"{ref.run} {ref.mfu:.3g}{devices}, {ref.source}"


def _tflops_mismatch(inputs: MfuInputs) -> list[Verdict]:
    ratio = inputs.recomputed_over_reported
    if ratio is None:
        return []
    expected = inputs.expected_ratio if inputs.expected_ratio is not None else 1.0
    off = ratio / expected - 1
    if abs(off) <= TFLOPS_TOLERANCE:
        return []
    message = (
        f"recomputed TFLOPS are {ratio:.2f}x the framework's own figure where the formula "
        f"differences explain {expected:.2f}x: {off:+.0%} unexplained (tolerance "
        f"{TFLOPS_TOLERANCE:.0%}); check the GPU count, the model shape and the batch size"
    )
    return [Verdict("warning", "REPORTED_TFLOPS_MISMATCH", message)]


def _lost_severity(lost_s: float, analysis: Analysis) -> Severity:
    logged = analysis.time.logged_s
    return "warning" if logged > 0 and lost_s > LOST_SHARE_WARNING * logged else "info"


def _share(lost_s: float, analysis: Analysis) -> str:
    logged = analysis.time.logged_s
    return f"{lost_s / logged:.1%} of the logged {duration(logged)}" if logged > 0 else ""


def _slow_step_verdicts(analysis: Analysis, period_causes: Mapping[int, str]) -> list[Verdict]:
    slow = analysis.slow
    verdicts = []
    spikes = [s for s in slow.steps if s.kind == "spike"]
    if spikes:
        lost = sum(s.lost_s for s in spikes)
        worst = max(spikes, key=lambda s: (s.ratio, -s.iteration))
        message = (
            f"{len(spikes)} isolated slow step(s) above {slow.threshold:.2f}x their baseline "
            f"cost {duration(lost)} ({_share(lost, analysis)}); the worst, iteration "
            f"{worst.iteration}, took {worst.step_time_s:.3g} s against {worst.baseline_s:.3g} s "
            f"({worst.ratio:.2f}x)"
        )
        verdicts.append(Verdict(_lost_severity(lost, analysis), "SLOW_STEPS", message))
    for pattern in slow.periodic:
        message = (
            f"{pattern.occurrences} slow steps recur every {pattern.period_iterations} "
            f"iterations (iterations {pattern.first_iteration}-{pattern.last_iteration}, median "
            f"{pattern.median_ratio:.2f}x baseline), "
            f"{period_causes.get(pattern.period_iterations, _USUAL_PERIODIC)}; "
            f"they cost {duration(pattern.lost_s)} ({_share(pattern.lost_s, analysis)})"
        )
        severity = _lost_severity(pattern.lost_s, analysis)
        verdicts.append(Verdict(severity, "PERIODIC_SLOW_STEPS", message))
    for event in slow.sustained:
        message = (
            f"iterations {event.start_iteration}-{event.end_iteration} ran at "
            f"{event.step_time_s:.3g} s per step, {event.factor:.2f}x the pace of "
            f"{event.baseline_s:.3g} s, for {event.iterations} iterations: "
            f"{duration(event.lost_s)} lost ({_share(event.lost_s, analysis)})"
        )
        severity = _lost_severity(event.lost_s, analysis)
        verdicts.append(Verdict(severity, "SUSTAINED_SLOWDOWN", message))
    return verdicts


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
            f"{row['median']:.4g}, step {row['ratio']:.2f}x baseline)"
            for row in spikes.head(_LISTED).iter_rows(named=True)
        )
        message = (
            f"{spikes.height} slow step(s) coincide with a loss spike: {listed}; a data or "
            "numerics problem can slow a step (recovery, re-tries) as well as the loss"
        )
        verdicts.append(Verdict("warning", "LOSS_SPIKE_AT_SLOW_STEP", message))
    bad = records.filter(
        pl.col("ratio").is_not_null()
        & ((pl.col("skipped_iterations") > 0) | (pl.col("nan_iterations") > 0))
    )
    if bad.height:
        listed = ", ".join(
            f"iteration {row['iteration']} ({row['skipped_iterations']} skipped, "
            f"{row['nan_iterations']} NaN, step {row['ratio']:.2f}x baseline)"
            for row in bad.head(_LISTED).iter_rows(named=True)
        )
        message = f"{bad.height} slow step(s) skipped iterations or hit NaNs: {listed}"
        verdicts.append(Verdict("warning", "NAN_OR_SKIPPED_AT_SLOW_STEP", message))
    return verdicts


def _loss_spikes(records: pl.DataFrame) -> pl.DataFrame:
    """Records whose loss stands above its centred rolling median by more than
    `LOSS_SPIKE_MIN` and than the run's loss noise (the same rule as for step times)."""
    median = centred_median(pl.col("loss")).over("segment")
    framed = records.filter(pl.col("loss").is_not_null()).with_columns(median.alias("median"))
    excess = framed["loss"] / framed["median"] - 1
    return framed.filter(excess > max(LOSS_SPIKE_MIN, noise_floor(excess)))


def _drift(analysis: Analysis) -> list[Verdict]:
    drift = analysis.drift
    if drift is None or drift.relative_change <= DRIFT_THRESHOLD:
        return []
    message = (
        f"the steady step time rose {drift.relative_change:.0%}, from a median of "
        f"{drift.first_median_s:.3g} s over iterations {drift.first_iterations[0]}-"
        f"{drift.first_iterations[1]} to {drift.last_median_s:.3g} s over iterations "
        f"{drift.last_iterations[0]}-{drift.last_iterations[1]} (first and last tenth of "
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
        f"{len(restarts)} restart(s) cost {duration(lost)}: {gaps} and {redone} redone "
        f"iterations ({duration(sum(r.redone_s for r in restarts))} at the steady pace of "
        f"{analysis.step_time_s.median or 0.0:.3g} s)"
    )
    return [Verdict(_lost_severity(lost, analysis), "RESTARTS_LOST_TIME", message)]


def _stalls(analysis: Analysis) -> list[Verdict]:
    stalls = analysis.stalls
    if not stalls:
        return []
    longest = max(stalls, key=lambda s: (s.gap_s, -s.iteration))
    message = (
        f"{len(stalls)} stall(s) inside a run segment added {duration(analysis.time.stalls_s)} "
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
            f"{spread.spread:.2f}x the median rank's {spread.median:.4g} ms over {spread.ranks} "
            "ranks"
        )
        verdicts.append(Verdict("warning", "STRAGGLER_RANK", message))
    return verdicts
