"""The `summary --json` document (schema loganalyzer.summary/1.3), built from a loaded run.

This is the one place that decides what the summary says; the terminal renderer and the
JSON output both read the document it builds, so the two can never disagree.

1.2 adds `outcome`, how the run ended (`loganalyzer.analysis.outcome`), first in the
document and in every output:
  status          completed | stopped | crashed | hung | killed | unknown
  reason          oom | nccl_timeout | nan | cuda_error | exception | signal | time_limit |
                  preempted | node_failure | cancelled | exit_duration | exit_interval |
                  exit_signal | train_iters_reached | null
  exception       the exception's class name (no module path), or null
  message         the deciding line as printed (launcher labels taken off), at most 300
                  characters, masked like every log text
  rank, host      the first failing rank and its host where the text names them (a
                  `[rankN]:` label, torchrun's root cause, `[Rank N]`, srun's task and node);
                  never slurm's batch host
  collective      an NCCL timeout's {op, seq, timeout_ms, ran_ms} as printed, or null
  last_iteration  the last iteration record's number (null: none), train_iters its total
  at              the ending event's time (ISO 8601, UTC; a time printed without a zone is
                  read as UTC), or null
  hang_s          seconds from the last progress to the ending (or, for a log that stops,
                  over the lines printed after it), where both have times; hang_bound says
                  "exact" (from the last record's time) or "at_least" (from the first line
                  printed after it); hang_gpu_hours = hang_s x GPUs of a hung run
  evidence        [{role, file, line, text}]: the deciding line first ("decides", or
                  "last_record" for an ending read from the records alone, text null), the
                  first traceback line ("traceback"), torchrun's root cause ("launcher");
                  a W&B run's `line` is its record's number
  other_ranks     the other ranks whose failures were read; failure_lines how many lines
Each entry of `restarts` has `previous_outcome`, the same object for the launch that
ended before it (decided over the lines between its last record and the next launch's
first), or null.
A run with no iteration record is summarised (exit 0) with its outcome and null figures;
`--fail-on-crash` exits 4 unless the status is completed or stopped. The verdicts begin
with one on the ending (ENDING_<STATUS>: critical for crashed and hung, warning for killed
and unknown, info otherwise).

Keys added since 1.2 (nothing renamed or removed):
  verdicts[].lost_s      the seconds the verdict is about (a save's, an evaluation's, a slow
                         step's, a stall's, a restart's; a waterfall step's share of the
                         productive steady time), null for a verdict not about time (MFU,
                         TFLOPS, incidents, the ending)
  verdicts[].gpu_hours   lost_s x GPUs / 3600, null where either is unknown
  verdicts               ordered by severity (critical first), then lost_s (largest first);
                         severity from the seconds at stake and whether the logs explain them
                         (`analysis.verdicts.cost_severity`)
  <entry>.cause          (slow_steps, stalls, restarts) gains `evidence_kind` (line, metric,
                         folder, interval, timer, none: `analysis.causes.EVIDENCE`, strongest
                         first), `event_iteration` (the save's or evaluation's iteration) and
                         `shares` ([{kind, iteration, seconds, evidence_kind, evidence}]: a
                         save and an evaluation one entry paid for; seconds null where the log
                         does not time them apart)
  goodput.attributed[]   gains `evidence_kind` (line, metric or folder)
  flops.mfu_missing      why the steady MFU is unknown: [{input, option}] (option null where
                         none supplies it), empty when it is known; the MFU_UNKNOWN verdict
                         says the same
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from loganalyzer import __version__
from loganalyzer.analysis import Analysis, analyse
from loganalyzer.analysis.events import schedule_of
from loganalyzer.analysis.goodput import Goodput, held_after
from loganalyzer.analysis.incident_verdicts import judge_incidents
from loganalyzer.analysis.incidents import find_incidents
from loganalyzer.analysis.invariants import INVARIANTS, check
from loganalyzer.analysis.outcome import (
    ENDING_SEVERITY,
    Outcome,
    decide,
    launch_endings,
    progress_of,
)
from loganalyzer.analysis.steady import Warmup
from loganalyzer.analysis.verdicts import MfuInputs, ReferenceBand, judge, reference_band
from loganalyzer.clock import clock_assumptions
from loganalyzer.explain import Explanation, attach_causes, explain
from loganalyzer.explain import mfu_goodput as goodput_mfu_of
from loganalyzer.flops.efficiency import (
    Efficiency,
    RunFacts,
    assumed_dtype,
    default_dtype,
    measure,
    missing_for_mfu,
    resolve_facts,
)
from loganalyzer.flops.peaks import resolution_json
from loganalyzer.load import Loaded
from loganalyzer.model import MODEL_FACTS, PARALLELISM_FACTS, Run
from loganalyzer.render import wording
from loganalyzer.render.clocks import clock_notes
from loganalyzer.render.ending import ending_sentence
from loganalyzer.render.invariants import invariant_warnings
from loganalyzer.render.numbers import plural
from loganalyzer.render.verdict_wording import Verdict, reference_scope, worded
from loganalyzer.secrets import mask_secrets, run_secrets

SCHEMA = "loganalyzer.summary/1.3"
# Below this many steady records, the steady figures are marked low-confidence.
MIN_STEADY_RECORDS = 10


def build_summary(
    loaded: Loaded,
    options: dict[str, dict[str, Any]],
    *,
    warmup: int | None = None,
    slow_factor: float = 1.5,
) -> dict[str, Any]:
    """The summary document. A figure the run does not allow to be known is null, with a
    warning saying what would supply it."""
    run = loaded.run
    warnings = [*run.warnings, *clock_assumptions(run)]
    schedule = schedule_of(run)
    analysis = analyse(
        run.table,
        run.metrics,
        warmup=warmup,
        slow_factor=slow_factor,
        configured_periods=schedule.periods(),
        clocks={s.path: s.clock_resolution_s for s in run.sources if s.clock_resolution_s},
    )
    warnings.extend(clock_notes(analysis.clocks))
    if untimed := analysis.records - analysis.timed_records:
        warnings.append(
            f"{untimed} of {analysis.records} records have no usable step time (missing, nan, "
            "inf, zero or negative): they are counted, not timed"
        )
    facts = resolve_facts(run, options)
    warnings.extend(facts.warnings)
    median = analysis.step_time_s.median
    logged = (analysis.iterations, analysis.time.logged_s + analysis.time.stalls_s)
    efficiency = measure(run, facts, median, logged, analysis.steady_rows)
    confidence = _confidence(analysis)
    warnings.extend(efficiency.warnings)
    tokens = (
        facts.global_batch_size * facts.shape.seq_length
        if facts.global_batch_size and facts.shape.seq_length
        else None
    )
    if tokens is None:
        missing = [
            option
            for option, value in (
                ("--global-batch-size", facts.global_batch_size),
                ("--seq-length", facts.shape.seq_length),
            )
            if not value
        ]
        warnings.append(f"tokens per iteration unknown: pass {' and '.join(missing)}")
    tokens_per_s = tokens / median if tokens and median else None
    files = [source.path for source in run.sources]
    progress = progress_of(run.table, run.get_int("train_iters"), median)
    outcome = decide(run.endings, progress, files)
    launches = launch_endings(run.table, run.endings, run.get_int("train_iters"), median, files)
    held = held_after(outcome, progress.line_pace_s)
    why = explain(run, analysis, schedule, facts, efficiency, tokens_per_s, held)
    mfu_goodput = goodput_mfu_of(analysis, efficiency, facts, why.goodput)
    invariants = _invariants(analysis, why, mfu_goodput)
    warnings.extend(invariant_warnings(invariants))
    mfu_missing = missing_for_mfu(facts, efficiency, median)
    mfu_inputs = MfuInputs(
        mfu=efficiency.mfu,
        hardware_key=facts.gpu.accelerator.key if facts.gpu else None,
        dtype=facts.dtype,
        params=efficiency.active_params,
        num_gpus=facts.num_gpus,
        recomputed_over_reported=efficiency.recomputed_over_reported,
        expected_ratio=efficiency.expected_ratio,
        low_confidence=confidence,
        mfu_vs_bf16=efficiency.mfu_vs_bf16,
        # a run without a timed record has nothing to measure: its ending says why
        missing=tuple((m["input"] or "", m["option"]) for m in mfu_missing)
        if analysis.timed_records
        else (),
    )
    verdicts = [
        worded(finding)
        for finding in judge(
            analysis,
            run.table,
            mfu_inputs,
            causes=why.causes,
        )
    ]
    # Megatron's text lines leave a NaN loss out (its parser: "megatron", both families)
    left_out = [s.path for s in run.sources if s.format == "megatron"]
    units = {s.path: s.unit for s in run.sources}
    incidents = find_incidents(run.table, left_out)
    verdicts += [
        Verdict(v.severity, v.code, wording.incident_message(v, units))
        for v in judge_incidents(incidents, analysis.iterations, analysis.last_iteration)
    ]
    document = {
        "schema": SCHEMA,
        "tool_version": __version__,
        "outcome": _outcome(outcome, facts.num_gpus, units),
        "sources": [
            {
                "path": s.path,
                "format": s.format,
                "records": s.records,
                "unit": s.unit,
                "tags": dict(s.tags),
            }
            for s in run.sources
        ],
        "clocks": [dataclasses.asdict(clock) for clock in analysis.clocks],
        "ignored": [dataclasses.asdict(skipped) for skipped in loaded.ignored],
        "read_along": [dataclasses.asdict(part) for part in loaded.read_along],
        "confidence": "low" if confidence else "normal",
        "confidence_reason": confidence,
        "run": _run(run, facts, efficiency, tokens),
        "iterations": {
            "logged": analysis.records,
            # the iterations the timed records stand for (their log intervals summed): a
            # rate per iteration divides by this, not by the records
            "covered": analysis.iterations,
            "first": analysis.first_iteration,
            "last": analysis.last_iteration,
            "segments": analysis.segments,
        },
        "step_time_s": {
            "median": median,
            "mean": analysis.step_time_s.mean,
            "p90": analysis.step_time_s.p90,
            "min": analysis.step_time_s.min,
            "max": analysis.step_time_s.max,
            "steady_records": analysis.step_time_s.steady_records,
            "pace_method": analysis.step_time_s.pace_method,
        },
        "throughput": {
            "tokens_per_s": tokens / median if tokens and median else None,
            "samples_per_s": facts.global_batch_size / median
            if facts.global_batch_size and median
            else None,
        },
        "flops": {
            **_flops(efficiency, facts.formula, mfu_goodput),
            "mfu_missing": mfu_missing,
        },
        "reported": {
            "tflops_per_gpu": efficiency.reported_tflops_per_gpu,
            "recomputed_over_reported": efficiency.recomputed_over_reported,
            "explanation": wording.reported_ratio(efficiency.reported_reading),
            "mfu": efficiency.reported_mfu,
        },
        "peak": efficiency.peak,
        "reference": _reference(reference_band(mfu_inputs)),
        "warmup": [_warmup(w) for w in analysis.warmup],
        "slow_steps": _slow_steps(analysis),
        "periodic": [dataclasses.asdict(p) for p in analysis.slow.periodic],
        "restarts": [
            {
                **dataclasses.asdict(r),
                "previous_outcome": _outcome(launches[r.segment], facts.num_gpus, units)
                if r.segment in launches
                else None,
            }
            for r in analysis.restarts
        ],
        "stalls": [dataclasses.asdict(s) for s in analysis.stalls],
        "stragglers": [dataclasses.asdict(s) for s in analysis.stragglers],
        "incidents": [dataclasses.asdict(i) for i in incidents],
        "time": _time(analysis),
        **why.objects,
        "invariants": invariants,
        "verdicts": _by_severity(
            [{**ending_verdict(outcome, facts.num_gpus, units), "lost_s": _held_s(why.goodput)}]
            + [dataclasses.asdict(v) for v in verdicts]
            + why.verdicts,
            facts.num_gpus,
        ),
        "warnings": list(dict.fromkeys(warnings)),  # once per run, however many files say it
    }
    attach_causes(document, why)
    safe: dict[str, Any] = mask_secrets(_finite(document), planted=run_secrets(run))
    return safe


def _outcome(
    outcome: Outcome, num_gpus: int | None, units: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The `outcome` object: the dataclass, its message cut and its GPU-hours held while
    hung (null unless both the hang and the GPU count are known); each evidence item says
    what its `line` counts (`unit`: a record of a binary store is no line)."""
    document = dataclasses.asdict(outcome)
    for item in document.get("evidence") or ():
        item["unit"] = (units or {}).get(item["file"], "line")
    document["hang_gpu_hours"] = (
        outcome.hang_s * num_gpus / 3600
        if outcome.status == "hung" and outcome.hang_s is not None and num_gpus
        else None
    )
    return document


def ending_verdict(
    outcome: Outcome, num_gpus: int | None, units: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The verdict on the ending: critical for a crash or a hang, a warning for a kill or
    an ending the log does not say, info for a completed or cleanly stopped run."""
    severity = ENDING_SEVERITY[outcome.status]
    return {
        "severity": severity,
        "code": f"ENDING_{outcome.status.upper()}",
        "message": ending_sentence(_outcome(outcome, num_gpus, units)),
    }


def _held_s(goodput: Goodput) -> float | None:
    """The seconds the run held its GPUs after its last progress (the budget's hang line)."""
    return goodput.hang.seconds if goodput.hang is not None else None


def _by_severity(verdicts: list[dict[str, Any]], num_gpus: int | None) -> list[dict[str, Any]]:
    """Most severe first, then the most seconds at stake; each verdict with its `lost_s`
    (null: not a verdict about time) and `gpu_hours` (null also where the GPU count is
    unknown)."""
    order = {"critical": 0, "warning": 1, "info": 2}
    for verdict in verdicts:
        lost = verdict.setdefault("lost_s", None)
        verdict["gpu_hours"] = lost * num_gpus / 3600 if lost is not None and num_gpus else None
    return sorted(verdicts, key=lambda v: (order[v["severity"]], -(v["lost_s"] or 0.0)))


def _run(run: Run, facts: RunFacts, efficiency: Efficiency, tokens: int | None) -> dict[str, Any]:
    shape = facts.shape
    model: dict[str, Any] = {key: getattr(shape, key) for key in MODEL_FACTS if key != "seq_length"}
    model["padded_vocab_size"] = shape.vocab
    model["params"] = efficiency.params
    model["active_params"] = efficiency.active_params
    return {
        "framework": run.framework,
        "gpu": resolution_json(facts.gpu, facts.gpu_source) if facts.gpu else None,
        "num_gpus": facts.num_gpus,
        "dtype": default_dtype(facts) if assumed_dtype(facts) else facts.dtype,
        "dtype_assumed": assumed_dtype(facts),
        "global_batch_size": facts.global_batch_size,
        "seq_length": shape.seq_length,
        "tokens_per_iteration": tokens,
        "model": model,
        "parallelism": _parallelism(run, facts),
        "recompute": facts.recompute or "none",
        "recompute_assumed": facts.recompute is None,
        "provenance": facts.origins,
    }


def _confidence(analysis: Analysis) -> str | None:
    """Why the steady figures (step time, TFLOPS, MFU) rest on too few records, or None."""
    count = analysis.step_time_s.steady_records
    if count >= MIN_STEADY_RECORDS:
        return None
    return (
        f"the steady step time, TFLOPS and MFU rest on {plural(count, 'record')} (fewer than "
        f"{MIN_STEADY_RECORDS})"
    )


def _invariants(analysis: Analysis, why: Explanation, mfu_goodput: float | None) -> dict[str, Any]:
    """The document's `invariants`: what the records broke (and the fallback taken), and
    any figure that still cannot be true."""
    broken = check(analysis.time.logged_s, why.goodput, why.waterfall, mfu_goodput)
    beyond = why.goodput.beyond_clock
    return {
        "checked": list(INVARIANTS),
        "clock_fallbacks": [dataclasses.asdict(f) for f in analysis.checks.clock_fallbacks],
        "overlaps": [dataclasses.asdict(o) for o in analysis.checks.overlaps],
        "unlogged_beyond_clock": dataclasses.asdict(beyond) if beyond else None,
        "broken": [dataclasses.asdict(b) for b in broken],
    }


def _parallelism(run: Run, facts: RunFacts) -> dict[str, int | None]:
    """TP, PP, DP, CP, EP as the log states them; DP, where the log states TP but no DP, from
    the world size (world = TP * PP * DP * CP, as Megatron lays ranks out; a ZeRO run states
    no PP)."""
    sizes = {name: run.get_int(key) for name, key in PARALLELISM_FACTS.items()}
    split = (sizes["tensor"] or 1) * (sizes["pipeline"] or 1) * (sizes["context"] or 1)
    known = sizes["data"] is None and sizes["tensor"] is not None
    if known and facts.num_gpus and facts.num_gpus % split == 0:
        sizes["data"] = facts.num_gpus // split
        facts.origins["data_parallel_size"] = (
            "derived: GPUs / (TP * PP * CP), PP and CP 1 where the log states none"
        )
    return sizes


def _flops(efficiency: Efficiency, formula: str, goodput: float | None) -> dict[str, Any]:
    """The `flops` object; every field null when the FLOPs cannot be computed."""
    result = efficiency.flops
    flops: dict[str, Any] = {
        "formula": result.formula if result else formula,
        "per_iteration": result.per_iteration if result else None,
        "hardware_per_iteration": result.hardware_per_iteration if result else None,
        "tflops_per_gpu": efficiency.tflops_per_gpu,
        "mfu": efficiency.mfu,
        "hfu": efficiency.hfu,
        "mfu_overall": efficiency.mfu_overall,
        "mfu_goodput": goodput,
        "derivation": result.derivation if result else None,
        "assumptions": list(result.assumptions) if result else [],
    }
    if efficiency.mfu_vs_bf16 is not None:
        flops["mfu_vs_bf16"] = efficiency.mfu_vs_bf16
    return flops


def _slow_steps(analysis: Analysis) -> list[dict[str, Any]]:
    """Isolated, stalled and periodic slow records, then sustained slowdowns as single events;
    every entry gives the iterations it covers (`first_iteration`, `last_iteration`) and the
    log `interval`, and `iteration` is always a real record."""
    steps: list[dict[str, Any]] = [dataclasses.asdict(s) for s in analysis.slow.steps]
    for event in analysis.slow.sustained:
        entry = dataclasses.asdict(event)
        entry["kind"] = "sustained"
        entry["iteration"] = event.first_record
        entry["first_iteration"] = event.start_iteration
        entry["last_iteration"] = event.end_iteration
        entry["ratio"] = event.factor
        steps.append(entry)
    return steps


def _warmup(warmup: Warmup) -> dict[str, Any]:
    """A segment's warm-up as the document says it: the facts and the reason worded from them."""
    document = dataclasses.asdict(warmup)
    del document["fixed"], document["peak_ratio"]
    return {**document, "reason": wording.warmup_reason(warmup)}


def _time(analysis: Analysis) -> dict[str, Any]:
    time = analysis.time
    return {
        "logged_s": time.logged_s,
        "productive_s": time.productive_s,
        "lost_s": {
            "slow_steps": time.slow_steps_s,
            "restarts": time.restarts_s,
            "warmup": time.warmup_s,
            "stalls": time.stalls_s,
        },
        "summary": wording.time_summary(time),
    }


def _finite(value: Any) -> Any:
    """The document with NaN and infinities as null: JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _reference(band: ReferenceBand | None) -> dict[str, Any] | None:
    """The published band the MFU is judged against (null without one): the verdict, the
    report's card and its chart state this one band."""
    if band is None:
        return None
    return {
        "scope": reference_scope(band),
        "dtype": band.dtype,
        "mfu_low": band.low,
        "mfu_high": band.high,
        "runs": [dataclasses.asdict(ref) for ref in band.runs],
    }
