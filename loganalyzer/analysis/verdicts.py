"""Verdicts: what a reader should take away, each with a stable code and the numbers behind it.

Codes are part of the JSON contract: scripts match on them, so they never change meaning.
Messages carry the figures a reader needs to check the verdict by hand. Verdicts come ordered
by severity (critical first), then by the seconds at stake (`lost_s`), then in the fixed order
of the checks below.

A loss of time is judged by what it cost and how well the logs explain it (`cost_severity`):
time the run spent on its own work (saves, evaluations, restarts, each with its evidence) is
a warning above `LOST_SHARE_WARNING` of the logged time; time nothing explains (a cause
`unknown`, or only a timer's growth) from `UNEXPLAINED_SHARE_WARNING`; either is critical
above `LOST_SHARE_CRITICAL`. Each loss has one verdict: slow steps and stalls that a save,
an evaluation, a straggler or the data loader explains are the cause's verdict
(`levers`), not also SLOW_STEPS, PERIODIC_SLOW_STEPS or STALLS, which say the rest, with the
cause the causes found (`causes`), so the two never disagree.
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
from loganalyzer.analysis.causes import Cause, Causes
from loganalyzer.analysis.slow_steps import Sustained
from loganalyzer.render.numbers import (
    duration,
    iterations,
    listing,
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
# ... where nothing in the logs explains it, above this share.
UNEXPLAINED_SHARE_WARNING = 0.01
# ... and above this share, whatever explains it, a critical.
LOST_SHARE_CRITICAL = 0.25
# Causes with their own verdict (`levers`): their time is not said again.
LEVER_CAUSES = frozenset({"checkpoint_save", "evaluation", "straggler", "data_loading"})
# Causes that explain a loss by the run's own work or a fault the logs name.
EXPLAINED = frozenset({*LEVER_CAUSES, "overflow", "nan", "restart"})
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
    lost_s: float | None = None  # the seconds at stake, where the verdict is about time


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
    # why the MFU is unknown: (input, option that supplies it or None)
    missing: tuple[tuple[str, str | None], ...] = ()


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
    causes: Causes | None = None,
    evidence: Mapping[Cause, str] | None = None,
) -> list[Verdict]:
    """Every verdict on the run, most severe first, then costliest. `period_causes` names,
    per period in iterations, the cause its slow steps were attributed to, `causes` every
    entry's (see `causes`), `evidence` each cause's evidence worded (`render.evidence`)."""
    found = causes or Causes((), (), ())
    verdicts = [
        *_tentative(mfu.low_confidence, [*_mfu_verdicts(mfu), *_tflops_mismatch(mfu)]),
        *(_mfu_unknown(mfu.missing) if mfu.mfu is None else []),
        *_slow_step_verdicts(analysis, period_causes or {}, found, evidence or {}),
        *_at_slow_steps(analysis, table),
        *_drift(analysis),
        *_restarts(analysis),
        *_stalls(analysis, found),
        *_rank_spread(analysis),
    ]
    return sorted(verdicts, key=order)


def order(verdict: Verdict) -> tuple[int, float]:
    """Most severe first, then the most seconds at stake (none known: last)."""
    return (_SEVERITY_ORDER[verdict.severity], -(verdict.lost_s or 0.0))


def cost_severity(lost_s: float, total_s: float, explained: bool) -> Severity:
    """The severity of `lost_s` seconds out of `total_s`: see the module's docstring."""
    if total_s <= 0:
        return "info"
    share = lost_s / total_s
    if share > LOST_SHARE_CRITICAL:
        return "critical"
    limit = LOST_SHARE_WARNING if explained else UNEXPLAINED_SHARE_WARNING
    return "warning" if share > limit else "info"


def _explained(cause: Cause | None) -> bool:
    return cause is not None and cause.kind in EXPLAINED


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


_INPUTS = {
    "gpu": "GPU type",
    "peak": "GPU's peak at its precision",
    "num_gpus": "GPU count",
    "steady_step_time": "steady step time",
    "seq_length": "sequence length",
    "vocab_size": "vocabulary size",
    "num_attention_heads": "attention heads",
    "num_layers": "layer count",
}


def _mfu_unknown(missing: tuple[tuple[str, str | None], ...]) -> list[Verdict]:
    """MFU unknown, with what the run lacks for it: said, so that a run where nothing could
    be computed never reads as one where nothing stands out."""
    if not missing:
        return []
    lacks = ", ".join(_INPUTS.get(name, name.replace("_", " ")) for name, _ in missing)
    options = list(dict.fromkeys(option for _, option in missing if option))
    passing = f"; pass {listing(options)}" if options else ""
    message = f"MFU unknown: the run does not give its {lacks}{passing}"
    return [Verdict("info", "MFU_UNKNOWN", message)]


@dataclass(frozen=True)
class ReferenceBand:
    """The published runs a run's MFU is compared with, and the band they span: the one band
    the verdict, the report's headline card and its TFLOPS chart all state."""

    scope: str  # "fp16 on V100 of similar size"
    dtype: str  # the precision compared (bf16 for an FP8 run compared against the bf16 peak)
    low: float
    high: float
    runs: tuple[ReferenceRun, ...]  # highest MFU first
    size_unlike: bool  # no published run within UNLIKE_SIZE_FACTOR of this model's size


def reference_band(inputs: MfuInputs) -> ReferenceBand | None:
    """The published band the run's MFU is judged against: runs on the same chip family and
    precision, those of similar size when there are any; None without any."""
    family = hardware_family(inputs.hardware_key) if inputs.hardware_key else None
    if family is None or inputs.dtype is None:
        return None
    dtype = inputs.dtype
    peers = _peers(family, dtype)
    if not peers and dtype == "fp8" and inputs.mfu_vs_bf16 is not None:
        # Most published figures are against the bf16 peak: so is this comparison.
        dtype = "bf16"
        peers = _peers(family, dtype)
    if not peers:
        return None
    scope = f"{dtype} on {family.upper()}"
    sized = [ref for ref in peers if _similar_size(ref, inputs.params)]
    # Published runs of a very different size say little about this one: below them is
    # then worth knowing, not a warning.
    size_unlike = inputs.params is not None and not any(
        _similar_size(ref, inputs.params, UNLIKE_SIZE_FACTOR) for ref in peers
    )
    if sized:
        peers, scope = sized, f"{scope} of similar size"
    elif size_unlike:
        scope = f"{scope} (none within {ratio(UNLIKE_SIZE_FACTOR, 0)} of this model's size)"
    peers.sort(key=lambda ref: (-ref.mfu, ref.run))
    return ReferenceBand(scope, dtype, peers[-1].mfu, peers[0].mfu, tuple(peers), size_unlike)


def _against_references(mfu: float, inputs: MfuInputs) -> list[Verdict]:
    family = hardware_family(inputs.hardware_key) if inputs.hardware_key else None
    if family is None or inputs.dtype is None:
        return []
    band = reference_band(inputs)
    if band is None:
        name = f"{inputs.dtype} on {family.upper()}"
        message = f"no published run of {name} to compare MFU {percent(mfu)} against"
        return [Verdict("info", "MFU_NO_REFERENCE", message)]
    name = "MFU"
    if band.dtype != inputs.dtype and inputs.mfu_vs_bf16 is not None:
        name, mfu = "MFU against the bf16 peak", inputs.mfu_vs_bf16
    low, high = band.low, band.high
    listed = "; ".join(_describe(ref) for ref in band.runs[:_LISTED])
    shown = f"{percent(low)} to {percent(high)}" if low != high else percent(low)
    where = f"published runs of {band.scope} reached {shown} ({listed})"
    if mfu >= low:
        above = mfu > high
        code = "MFU_ABOVE_REFERENCE" if above else "MFU_WITHIN_REFERENCE"
        relation = "above what" if above else "within what"
        return [Verdict("info", code, f"{name} {percent(mfu)} is {relation} {where}")]
    severity: Severity = "critical" if mfu < CRITICAL_SHARE_OF_REFERENCE * low else "warning"
    if band.size_unlike or mfu >= (1 - REFERENCE_TOLERANCE) * low:
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


def _lost_severity(lost_s: float, analysis: Analysis, explained: bool = True) -> Severity:
    return cost_severity(lost_s, analysis.time.logged_s + analysis.time.stalls_s, explained)


def _share(lost_s: float, analysis: Analysis) -> str:
    logged = analysis.time.logged_s
    return f"{percent(lost_s / logged)} of the logged {duration(logged)}" if logged > 0 else ""


def _slow_step_verdicts(
    analysis: Analysis,
    period_causes: Mapping[int, str],
    causes: Causes,
    evidence: Mapping[Cause, str],
) -> list[Verdict]:
    slow = analysis.slow
    verdicts = []

    def cause_of(first: int, last: int, segment: int) -> Cause | None:
        return causes.for_range(segment, first, last)

    spikes = [
        (s, cause_of(s.first_iteration, s.last_iteration, s.segment))
        for s in slow.steps
        if s.kind in ("spike", "stall")
    ]
    # the slow steps a save, an evaluation, a straggler or the data loader explains have the
    # cause's own verdict
    spikes = [(s, c) for s, c in spikes if c is None or c.kind not in LEVER_CAUSES]
    if spikes:
        lost = sum(s.lost_s for s, _ in spikes)
        unexplained = sum(s.lost_s for s, c in spikes if not _explained(c))
        worst, cause = max(spikes, key=lambda sc: (sc[0].lost_s, -sc[0].iteration))
        span = iterations(worst.first_iteration, worst.last_iteration)
        took = "averaged" if worst.interval > 1 else "took"
        message = (
            f"{plural(len(spikes), 'isolated slow record')} above the baseline cost "
            f"{duration(lost)} ({_share(lost, analysis)}); the worst, {span}, {took} "
            f"{seconds(worst.step_time_s)} against {seconds(worst.baseline_s)} "
            f"({ratio(worst.ratio)}): {duration(worst.lost_s)} lost"
        )
        if cause is not None and cause.kind != "unknown":
            message += f", {cause.kind.replace('_', ' ')}: {evidence[cause]}"
        elif worst.kind == "stall":
            message += (
                f", most likely one iteration that stalled for {duration(worst.lost_s)} rather "
                f"than {worst.interval} slow ones; nothing in the logs says why"
            )
        else:
            message += "; nothing in the logs says why"
        severity = max(
            _lost_severity(unexplained, analysis, explained=False),
            _lost_severity(lost, analysis),
            key=lambda s: -_SEVERITY_ORDER[s],
        )
        verdicts.append(Verdict(severity, "SLOW_STEPS", message, lost))
    for pattern in slow.periodic:
        named = period_causes.get(pattern.period_iterations)
        members = [
            (s, cause_of(s.first_iteration, s.last_iteration, s.segment))
            for s in slow.steps
            if s.period_iterations == pattern.period_iterations
        ]
        # the members a save or an evaluation explains are its own verdict's
        rest = [s for s, c in members if c is None or c.kind not in LEVER_CAUSES]
        if members and not rest:
            continue
        lost = sum(s.lost_s for s in rest) if members else pattern.lost_s
        others = len(members) - len(rest)
        which = plural(
            others, "of them is a save or an evaluation", "of them are saves or evaluations"
        )
        said = f"; {which}, said in its own verdict" if others else ""
        message = (
            f"{pattern.occurrences} slow steps recur every {pattern.period_iterations} "
            f"iterations ({iterations(pattern.first_iteration, pattern.last_iteration)}, median "
            f"{ratio(pattern.median_ratio)} the baseline), "
            f"{named or _USUAL_PERIODIC}{said}; "
            f"{'the rest cost' if others else 'they cost'} {duration(lost)} "
            f"({_share(lost, analysis)})"
        )
        severity = _lost_severity(lost, analysis, explained=named is not None)
        verdicts.append(Verdict(severity, "PERIODIC_SLOW_STEPS", message, lost))
    for event in slow.sustained:
        cause = cause_of(event.start_iteration, event.end_iteration, event.segment)
        if cause is not None and cause.kind in LEVER_CAUSES:
            continue  # the straggler's or the data loader's own verdict says it
        message = (
            f"{iterations(event.start_iteration, event.end_iteration)}{_records(event)} ran at "
            f"{seconds(event.step_time_s)} per iteration, {ratio(event.factor)} the pace of "
            f"{seconds(event.baseline_s)}, for {plural(event.iterations, 'iteration')}: "
            f"{duration(event.lost_s)} lost ({_share(event.lost_s, analysis)})"
        )
        severity = _lost_severity(event.lost_s, analysis, explained=_explained(cause))
        verdicts.append(Verdict(severity, "SUSTAINED_SLOWDOWN", message, event.lost_s))
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
    return [Verdict(_lost_severity(lost, analysis), "RESTARTS_LOST_TIME", message, lost)]


def _stalls(analysis: Analysis, causes: Causes) -> list[Verdict]:
    """The stalls no save, evaluation, straggler or data loader explains (those are their
    cause's verdict)."""
    stalls = [
        s
        for s in analysis.stalls
        if (c := causes.for_stall(s.segment, s.iteration)) is None or c.kind not in LEVER_CAUSES
    ]
    if not stalls:
        return []
    longest = max(stalls, key=lambda s: (s.gap_s, -s.iteration))
    lost = sum(s.gap_s for s in stalls)
    explained = len(analysis.stalls) - len(stalls)
    others = f" ({explained} more explained by their causes)" if explained else ""
    message = (
        f"{plural(len(stalls), 'stall')} inside a run segment{others} added {duration(lost)} "
        f"that the step times do not show and nothing in the logs explains; the longest, "
        f"{duration(longest.gap_s)}, came between iterations {longest.after_iteration} and "
        f"{longest.iteration}"
    )
    return [Verdict(_lost_severity(lost, analysis, explained=False), "STALLS", message, lost)]


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
