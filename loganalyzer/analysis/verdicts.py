"""Verdicts: what a reader should take away, each with a stable code and the numbers behind it.

Codes are part of the JSON contract: scripts match on them, so they never change meaning.
Each verdict is returned as facts (`Finding`): the figures a reader needs to check it by
hand, which `render.verdict_wording` words into its message. Verdicts come ordered by
severity (critical first), then by the seconds at stake (`lost_s`), then in the fixed order
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
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Literal

import polars as pl

from loganalyzer.analysis import Analysis
from loganalyzer.analysis.baseline import centred_median, noise_floor
from loganalyzer.analysis.causes import Cause, Causes
from loganalyzer.analysis.restarts import Stall
from loganalyzer.analysis.slow_steps import Periodic, SlowStep, Sustained
from loganalyzer.analysis.steady import Drift
from loganalyzer.analysis.stragglers import RankSpread

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
# The causes a period of slow steps can be named after.
PERIODIC_EVENTS = frozenset({"checkpoint_save", "evaluation"})
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
# The slow steps a verdict names one by one; the rest are counted.
EXAMPLES = 3
_NOT_GPUS = ("tpu", "trn", "gaudi")


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


@dataclass(frozen=True)
class ReferenceBand:
    """The published runs a run's MFU is compared with, and the band they span: the one band
    the verdict, the report's headline card and its TFLOPS chart all state. Its scope, the
    runs compared, is `dtype` on the chip `family`, narrowed to runs of similar size where
    there are any (`similar_size`); `size_unlike` where none is within `UNLIKE_SIZE_FACTOR`
    of this model's size (`render.verdict_wording.reference_scope` words it)."""

    family: str  # "v100", as `hardware_family` names it
    dtype: str  # the precision compared (bf16 for an FP8 run compared against the bf16 peak)
    similar_size: bool
    low: float
    high: float
    runs: tuple[ReferenceRun, ...]  # highest MFU first
    size_unlike: bool  # no published run within UNLIKE_SIZE_FACTOR of this model's size


@dataclass(frozen=True)
class ImplausibleMfu:
    """MFU_IMPLAUSIBLY_HIGH: an MFU on a GPU above `IMPLAUSIBLE_MFU`."""

    mfu: float


@dataclass(frozen=True)
class NoReference:
    """MFU_NO_REFERENCE: no published run of `dtype` on the chip `family` to compare `mfu`
    against."""

    mfu: float
    dtype: str
    family: str


@dataclass(frozen=True)
class AgainstReference:
    """MFU_BELOW_, MFU_WITHIN_ and MFU_ABOVE_REFERENCE: `mfu` against the published `band`;
    `against_bf16` where it is an FP8 run's MFU against the bf16 peak, as the band's runs
    published theirs."""

    mfu: float
    band: ReferenceBand
    against_bf16: bool


@dataclass(frozen=True)
class MfuUnknown:
    """MFU_UNKNOWN: the inputs the run lacks for its MFU, each with the option that supplies
    it (None where none does)."""

    missing: tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class TflopsMismatch:
    """REPORTED_TFLOPS_MISMATCH: recomputed over reported TFLOPS (`found`) where the formula
    differences explain `expected`, `unexplained` (relative) beyond it."""

    found: float
    expected: float
    unexplained: float


@dataclass(frozen=True)
class SlowRecords:
    """SLOW_STEPS: `count` isolated slow records no lever cause explains, costing `lost_s` of
    the `logged_s`; the costliest (`worst`) with the cause found for it, if any."""

    count: int
    lost_s: float
    logged_s: float
    worst: SlowStep
    cause: Cause | None


@dataclass(frozen=True)
class PeriodicSlowSteps:
    """PERIODIC_SLOW_STEPS: slow steps recurring every `pattern.period_iterations`; `shared`
    the first one's cause where every cause found among them is a save (or every one an
    evaluation), else None; `explained` of them are saves or evaluations with their own
    verdict, and the rest cost `lost_s` of the `logged_s`."""

    pattern: Periodic
    shared: Cause | None
    explained: int
    lost_s: float
    logged_s: float


@dataclass(frozen=True)
class SustainedSlowdown:
    """SUSTAINED_SLOWDOWN: a lasting slowdown no straggler or data loader explains, of the
    `logged_s`."""

    event: Sustained
    logged_s: float


@dataclass(frozen=True)
class LossSpikeAt:
    """A slow step at a loss spike: its `loss` against the loss's local `median`, and the
    step's `ratio` to the baseline."""

    iteration: int
    loss: float
    median: float
    ratio: float


@dataclass(frozen=True)
class SlowAtLossSpikes:
    """LOSS_SPIKE_AT_SLOW_STEP: `count` slow steps at a loss spike, the first `EXAMPLES`."""

    count: int
    examples: tuple[LossSpikeAt, ...]


@dataclass(frozen=True)
class SkippedAt:
    """A slow step that skipped iterations or hit NaNs, and its `ratio` to the baseline."""

    iteration: int
    skipped: int
    nan: int
    ratio: float


@dataclass(frozen=True)
class SlowAtSkipped:
    """NAN_OR_SKIPPED_AT_SLOW_STEP: `count` slow steps that skipped iterations or hit NaNs,
    the first `EXAMPLES`."""

    count: int
    examples: tuple[SkippedAt, ...]


@dataclass(frozen=True)
class RestartsLost:
    """RESTARTS_LOST_TIME: `restarts` cost `lost_s`: `gaps_s` of gaps, known for `gaps_known`
    of them, and `redone` iterations done again (`redone_s` at the steady pace `pace_s`)."""

    restarts: int
    lost_s: float
    gaps_s: float
    gaps_known: int
    redone: int
    redone_s: float
    pace_s: float | None


@dataclass(frozen=True)
class UnexplainedStalls:
    """STALLS: `count` stalls nothing explains, adding `lost_s`, the `longest` of them;
    `explained` more that their causes explain (their causes' verdicts)."""

    count: int
    explained: int
    lost_s: float
    longest: Stall


# The facts behind each verdict code: STEP_TIME_DRIFT's are the analysis' `Drift`,
# STRAGGLER_RANK's its `RankSpread`.
VerdictFacts = (
    ImplausibleMfu
    | NoReference
    | AgainstReference
    | MfuUnknown
    | TflopsMismatch
    | SlowRecords
    | PeriodicSlowSteps
    | SustainedSlowdown
    | SlowAtLossSpikes
    | SlowAtSkipped
    | Drift
    | RestartsLost
    | UnexplainedStalls
    | RankSpread
)


@dataclass(frozen=True)
class Finding:
    """One verdict, as facts: its `severity`, `code` and the seconds at stake (`lost_s`, where
    the verdict is about time), the figures behind it (`facts`), and `low_confidence`, why
    they rest on too few records, where they do. `render.verdict_wording` words it."""

    severity: Severity
    code: str
    facts: VerdictFacts
    lost_s: float | None = None
    low_confidence: str | None = None


def judge(
    analysis: Analysis,
    table: pl.DataFrame,
    mfu: MfuInputs,
    causes: Causes | None = None,
) -> list[Finding]:
    """Every verdict on the run, most severe first, then costliest; `causes`: every slow
    step's, slowdown's and stall's (see `causes`)."""
    found = causes or Causes((), (), ())
    verdicts = [
        *_tentative(mfu.low_confidence, [*_mfu_verdicts(mfu), *_tflops_mismatch(mfu)]),
        *(_mfu_unknown(mfu.missing) if mfu.mfu is None else []),
        *_slow_step_verdicts(analysis, found),
        *_at_slow_steps(analysis, table),
        *_drift(analysis),
        *_restarts(analysis),
        *_stalls(analysis, found),
        *_rank_spread(analysis),
    ]
    return sorted(verdicts, key=order)


def order(verdict: Finding) -> tuple[int, float]:
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


def _tentative(reason: str | None, verdicts: list[Finding]) -> list[Finding]:
    """Verdicts on figures that rest on too few records are information, saying why."""
    if reason is None:
        return verdicts
    return [Finding("info", v.code, v.facts, v.lost_s, reason) for v in verdicts]


def hardware_family(name: str) -> str | None:
    """The chip family a table key or a free-text hardware name belongs to ("h100-sxm" and
    "H100-80GB" are both "h100"; "TPU v4" and "tpu-v4" are "tpuv4")."""
    normalised = re.sub(r"tpu[\s-]*v", "tpuv", name.lower())
    found = re.match(r"[a-z]+\d+[a-z]?", normalised)
    return found.group(0) if found else None


def _precision_class(dtype: str) -> str:
    """16-bit mixed precision goes by several names in published runs."""
    return "16-bit" if dtype.lower() in ("bf16", "fp16", "mixed") else dtype.lower()


def _mfu_verdicts(inputs: MfuInputs) -> list[Finding]:
    if inputs.mfu is None:
        return []
    verdicts = []
    key = inputs.hardware_key or ""
    if inputs.mfu > IMPLAUSIBLE_MFU and not key.startswith(_NOT_GPUS):
        verdicts.append(Finding("critical", "MFU_IMPLAUSIBLY_HIGH", ImplausibleMfu(inputs.mfu)))
    verdicts.extend(_against_references(inputs.mfu, inputs))
    return verdicts


def _mfu_unknown(missing: tuple[tuple[str, str | None], ...]) -> list[Finding]:
    """MFU unknown, with what the run lacks for it: said, so that a run where nothing could
    be computed never reads as one where nothing stands out."""
    if not missing:
        return []
    return [Finding("info", "MFU_UNKNOWN", MfuUnknown(missing))]


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
    sized = [ref for ref in peers if _similar_size(ref, inputs.params)]
    # Published runs of a very different size say little about this one: below them is
    # then worth knowing, not a warning.
    size_unlike = inputs.params is not None and not any(
        _similar_size(ref, inputs.params, UNLIKE_SIZE_FACTOR) for ref in peers
    )
    if sized:
        peers = sized
    peers.sort(key=lambda ref: (-ref.mfu, ref.run))
    return ReferenceBand(
        family, dtype, bool(sized), peers[-1].mfu, peers[0].mfu, tuple(peers), size_unlike
    )


def _against_references(mfu: float, inputs: MfuInputs) -> list[Finding]:
    family = hardware_family(inputs.hardware_key) if inputs.hardware_key else None
    if family is None or inputs.dtype is None:
        return []
    band = reference_band(inputs)
    if band is None:
        return [Finding("info", "MFU_NO_REFERENCE", NoReference(mfu, inputs.dtype, family))]
    vs_bf16 = inputs.mfu_vs_bf16 if band.dtype != inputs.dtype else None
    if vs_bf16 is not None:
        mfu = vs_bf16
    facts = AgainstReference(mfu, band, against_bf16=vs_bf16 is not None)
    low, high = band.low, band.high
    if mfu >= low:
        code = "MFU_ABOVE_REFERENCE" if mfu > high else "MFU_WITHIN_REFERENCE"
        return [Finding("info", code, facts)]
    severity: Severity = "critical" if mfu < CRITICAL_SHARE_OF_REFERENCE * low else "warning"
    if band.size_unlike or mfu >= (1 - REFERENCE_TOLERANCE) * low:
        severity = "info"
    return [Finding(severity, "MFU_BELOW_REFERENCE", facts)]


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


def _tflops_mismatch(inputs: MfuInputs) -> list[Finding]:
    found = inputs.recomputed_over_reported
    if found is None:
        return []
    expected = inputs.expected_ratio if inputs.expected_ratio is not None else 1.0
    off = found / expected - 1
    if abs(off) <= TFLOPS_TOLERANCE:
        return []
    facts = TflopsMismatch(found, expected, off)
    return [Finding("warning", "REPORTED_TFLOPS_MISMATCH", facts)]


def _lost_severity(lost_s: float, analysis: Analysis, explained: bool = True) -> Severity:
    return cost_severity(lost_s, analysis.time.logged_s + analysis.time.stalls_s, explained)


def _slow_step_verdicts(analysis: Analysis, causes: Causes) -> list[Finding]:
    slow = analysis.slow
    logged = analysis.time.logged_s
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
        severity = max(
            _lost_severity(unexplained, analysis, explained=False),
            _lost_severity(lost, analysis),
            key=lambda s: -_SEVERITY_ORDER[s],
        )
        facts = SlowRecords(len(spikes), lost, logged, worst, cause)
        verdicts.append(Finding(severity, "SLOW_STEPS", facts, lost))
    for pattern in slow.periodic:
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
        shared = _shared_event([c for _, c in members])
        periodic = PeriodicSlowSteps(pattern, shared, len(members) - len(rest), lost, logged)
        severity = _lost_severity(lost, analysis, explained=shared is not None)
        verdicts.append(Finding(severity, "PERIODIC_SLOW_STEPS", periodic, lost))
    for event in slow.sustained:
        cause = cause_of(event.start_iteration, event.end_iteration, event.segment)
        if cause is not None and cause.kind in LEVER_CAUSES:
            continue  # the straggler's or the data loader's own verdict says it
        severity = _lost_severity(event.lost_s, analysis, explained=_explained(cause))
        sustained = SustainedSlowdown(event, logged)
        verdicts.append(Finding(severity, "SUSTAINED_SLOWDOWN", sustained, event.lost_s))
    return verdicts


def _shared_event(causes: list[Cause | None]) -> Cause | None:
    """The first of a period's causes, where every cause found among them is a save, or
    every one an evaluation: the period's slow steps are that event's."""
    kinds = {cause.kind for cause in causes if cause is not None}
    if causes and len(kinds) == 1 and kinds <= PERIODIC_EVENTS:
        return causes[0]
    return None


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


def _at_slow_steps(analysis: Analysis, table: pl.DataFrame) -> list[Finding]:
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
        examples = tuple(
            LossSpikeAt(row["iteration"], row["loss"], row["median"], row["ratio"])
            for row in spikes.head(EXAMPLES).iter_rows(named=True)
        )
        facts = SlowAtLossSpikes(spikes.height, examples)
        verdicts.append(Finding("warning", "LOSS_SPIKE_AT_SLOW_STEP", facts))
    bad = records.filter(
        pl.col("ratio").is_not_null()
        & ((pl.col("skipped_iterations") > 0) | (pl.col("nan_iterations") > 0))
    )
    if bad.height:
        skipped = tuple(
            SkippedAt(
                row["iteration"], row["skipped_iterations"], row["nan_iterations"], row["ratio"]
            )
            for row in bad.head(EXAMPLES).iter_rows(named=True)
        )
        verdicts.append(
            Finding("warning", "NAN_OR_SKIPPED_AT_SLOW_STEP", SlowAtSkipped(bad.height, skipped))
        )
    return verdicts


def _loss_spikes(records: pl.DataFrame) -> pl.DataFrame:
    """Records whose loss stands above its centred rolling median by more than
    `LOSS_SPIKE_MIN` and than the run's loss noise (the same rule as for step times)."""
    framed = records.filter(pl.col("loss").is_not_null())
    framed = framed.with_columns(centred_median(framed, "loss").alias("median"))
    excess = pl.col("loss") / pl.col("median") - 1
    return framed.filter(excess > max(LOSS_SPIKE_MIN, noise_floor(framed, excess)))


def _drift(analysis: Analysis) -> list[Finding]:
    drift = analysis.drift
    if drift is None or drift.relative_change <= DRIFT_THRESHOLD:
        return []
    return [Finding("warning", "STEP_TIME_DRIFT", drift)]


def _restarts(analysis: Analysis) -> list[Finding]:
    restarts = analysis.restarts
    if not restarts:
        return []
    lost = sum(r.lost_s for r in restarts)
    known = [r.gap_s for r in restarts if r.gap_s is not None]
    facts = RestartsLost(
        restarts=len(restarts),
        lost_s=lost,
        gaps_s=sum(known, 0.0),
        gaps_known=len(known),
        redone=sum(r.lost_iterations for r in restarts),
        redone_s=sum(r.redone_s for r in restarts),
        pace_s=analysis.step_time_s.median,
    )
    return [Finding(_lost_severity(lost, analysis), "RESTARTS_LOST_TIME", facts, lost)]


def _stalls(analysis: Analysis, causes: Causes) -> list[Finding]:
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
    facts = UnexplainedStalls(len(stalls), len(analysis.stalls) - len(stalls), lost, longest)
    return [Finding(_lost_severity(lost, analysis, explained=False), "STALLS", facts, lost)]


def _rank_spread(analysis: Analysis) -> list[Finding]:
    return [
        Finding("warning", "STRAGGLER_RANK", spread)
        for spread in analysis.stragglers
        if spread.metric.startswith("timer/") and (spread.spread or 0) > RANK_SPREAD_WARNING
    ]
