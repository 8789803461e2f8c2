"""TFLOPS, MFU and HFU of a parsed run: the log's facts, overridden by the user's, through the
one FLOPs engine, against the one peak table.

Every figure carries its working: the FLOPs derivation with the run's numbers plugged in,
the peak's source, and where each fact came from (`facts`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import polars as pl

from loganalyzer.analysis import timed_records
from loganalyzer.errors import UsageProblem
from loganalyzer.flops import peaks
from loganalyzer.flops.formulas import (
    RECOMPUTE,
    FlopsResult,
    ShapeError,
    achieved,
    compute_flops,
    expected_reported_ratio,
    explain_reported_ratio,
    tflops_per_gpu,
    utilisation,
)
from loganalyzer.flops.shape import (
    ArgumentError,
    ModelShape,
    count_parameters,
    layered_shape,
    shape_from_megatron_args,
)
from loganalyzer.model import MODEL_FACTS, RUN_FACTS, Run


@dataclass(frozen=True)
class RunFacts:
    """The facts the FLOPs and peak need, each with where it came from."""

    shape: ModelShape
    global_batch_size: int | None
    num_gpus: int | None
    dtype: str | None
    recompute: str | None
    formula: str
    lora: bool
    gpu: peaks.Resolution | None
    gpu_source: str | None
    peak_override: float | None
    origins: dict[str, str] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Efficiency:
    """What the summary prints about FLOPs; None where the run does not allow it to be known."""

    flops: FlopsResult | None
    tflops_per_gpu: float | None
    mfu: float | None
    hfu: float | None
    mfu_overall: float | None
    mfu_vs_bf16: float | None
    peak: dict[str, object] | None
    reported_tflops_per_gpu: float | None
    recomputed_over_reported: float | None
    reported_explanation: str | None
    expected_ratio: float | None
    params: int | None
    warnings: tuple[str, ...]


def resolve_facts(run: Run, options: dict[str, dict[str, Any]]) -> RunFacts:
    """The log's model shape and run facts with the command-line options laid over them.

    `origins` says where each fact came from (a log's file and line, or "flag").
    """
    warnings: list[str] = []
    given = options["run"]
    shape = layered_shape(_shape_from_log(run, warnings), given.get("model"), options["shape"])
    origins = {
        key: str(value.provenance)
        for key, value in sorted(run.config.items())
        if key in (*MODEL_FACTS, *RUN_FACTS) and value.value is not None
    }
    origins.update({key: "flag" for key in [*options["shape"], *given]})
    batch = given.get("global_batch_size") or _batch(run, origins, warnings)
    gpu, gpu_source = _gpu(given.get("gpu"), run.get("gpu_name"), warnings)
    dtype = given.get("dtype") or run.get("dtype")
    recompute = given.get("recompute") or _logged_recompute(run, warnings)
    return RunFacts(
        shape=shape,
        global_batch_size=batch,
        num_gpus=given.get("num_gpus") or run.get_int("num_gpus"),
        dtype=str(dtype) if dtype else None,
        recompute=str(recompute) if recompute else None,
        formula=str(given.get("formula", "megatron")),
        lora=bool(given.get("lora")),
        gpu=gpu,
        gpu_source=gpu_source,
        peak_override=given.get("peak_tflops"),
        origins=origins,
        warnings=tuple(warnings),
    )


def _logged_recompute(run: Run, warnings: list[str]) -> object:
    """The log's recomputation, when it is one of the kinds the FLOPs know (a damaged or
    unfamiliar value is reported, not trusted)."""
    found = run.config.get("recompute")
    if found is None or found.value in RECOMPUTE:
        return None if found is None else found.value
    warnings.append(
        f"{found.provenance}: recompute {str(found.value)[:80]!r} is not one of "
        f"{', '.join(RECOMPUTE)}; ignored (pass --recompute)"
    )
    return None


def _shape_from_log(run: Run, warnings: list[str]) -> ModelShape:
    """The model shape the run's arguments give; an argument that is not a number is left
    out, with a warning naming its line."""
    args = {k: str(v.value) for k, v in run.config.items()}
    while True:
        try:
            return shape_from_megatron_args(args)
        except ArgumentError as exc:
            warnings.append(f"{run.config[exc.name].provenance}: {exc}; it is not used")
            del args[exc.name]


def _batch(run: Run, origins: dict[str, str], warnings: list[str]) -> int | None:
    """The arguments' global batch size, unless the iteration lines mostly printed another
    (batch-size ramp-up): then the most common printed one, and a warning."""
    argued = run.get_int("global_batch_size")
    printed = typical_global_batch(run.table)
    if printed is not None and printed != argued:
        if argued is not None:
            warnings.append(
                f"global batch size: the iteration lines mostly print {printed}, the arguments"
                f" say {argued} ({origins.get('global_batch_size')}); {printed} is used"
            )
        origins["global_batch_size"] = "the iteration lines (most common value)"
        return printed
    return argued


def typical_global_batch(table: pl.DataFrame) -> int | None:
    """The global batch size most records printed (ramp-up aside); the largest on a tie."""
    sizes = table["global_batch_size"].drop_nulls()
    if sizes.len() == 0:
        return None
    return int(sizes.mode().max())  # type: ignore[arg-type]


def _gpu(
    flag: str | None, from_log: object, warnings: list[str]
) -> tuple[peaks.Resolution | None, str | None]:
    """The accelerator the user named (an unknown name is a usage error), else the log's
    (an unknown one is a warning and a null, never a guess)."""
    if flag:
        found = peaks.resolve(flag)
        if found is None:
            raise UsageProblem(f"--gpu: {peaks.unknown_message(flag)}")
        return found, "flag"
    if from_log:
        found = peaks.resolve(str(from_log))
        if found is None:
            warnings.append(f"GPU {from_log!r} from the log is not in the peak table: pass --gpu")
            return None, None
        return found, "log"
    return None, None


def measure(run: Run, facts: RunFacts, steady_step_s: float | None, stalls_s: float) -> Efficiency:
    """FLOPs per iteration, then TFLOPS/GPU and MFU at the steady pace and over all time
    (`stalls_s`: wall-clock time inside segments that no step time accounts for)."""
    warnings: list[str] = []
    params = facts.shape.params if "params" in facts.origins else None
    if params is None:
        counts = count_parameters(facts.shape)
        params = counts.total if counts is not None else facts.shape.params
    recompute = facts.recompute or "none"
    if facts.recompute is None:
        warnings.append("activation recomputation unknown: none assumed (pass --recompute)")
    flops = _flops(facts, recompute, warnings)
    peak = _peak(facts, warnings)
    peak_value = peak["tflops_per_gpu"] if peak is not None else None
    peak_value = peak_value if isinstance(peak_value, float) else None
    figures = overall = None
    if flops is not None:
        if not facts.num_gpus:
            warnings.append("number of GPUs unknown: pass --num-gpus")
        if not steady_step_s:
            warnings.append(
                "no steady-state record (warm-up or slow steps cover the run): steady TFLOPS"
                " and MFU unknown; lower --warmup"
            )
        bf16 = facts.gpu.peak_tflops("bf16") if facts.gpu and facts.dtype == "fp8" else None
        figures = achieved(flops, steady_step_s, facts.num_gpus, peak_value, bf16)
        overall = _overall(run.table, flops, facts.num_gpus, stalls_s, peak_value)
    reported = _median(run.table["reported_tflops_per_gpu"])
    ratio = _reported_ratio(run.table, flops, facts.num_gpus)
    explanation = expected = None
    if ratio is not None:
        explanation = explain_reported_ratio(
            run.framework, ratio, recompute, facts.shape, facts.global_batch_size
        )
        if facts.global_batch_size:
            expected = _expected_ratio(run.framework, facts, recompute, ratio)
    return Efficiency(
        flops=flops,
        tflops_per_gpu=figures.tflops_per_gpu if figures else None,
        mfu=figures.mfu if figures else None,
        hfu=figures.hfu if figures else None,
        mfu_overall=overall,
        mfu_vs_bf16=figures.mfu_vs_bf16 if figures else None,
        peak=peak,
        reported_tflops_per_gpu=reported,
        recomputed_over_reported=ratio,
        reported_explanation=explanation,
        expected_ratio=expected,
        params=params,
        warnings=tuple(warnings),
    )


def _flops(facts: RunFacts, recompute: str, warnings: list[str]) -> FlopsResult | None:
    if facts.global_batch_size is None:
        warnings.append("global batch size unknown: pass --global-batch-size")
        return None
    try:
        result = compute_flops(
            facts.shape,
            facts.global_batch_size,
            formula=facts.formula,
            recompute=recompute,
            lora=facts.lora,
        )
    except ShapeError as exc:
        warnings.append(f"FLOPs unknown: {exc}")
        return None
    warnings.extend(f"assumption: {a}" for a in result.assumptions)
    warnings.extend(_defaults_used(facts))
    return result


def _defaults_used(facts: RunFacts) -> list[str]:
    """The model facts nobody stated that the FLOPs took Megatron-LM's defaults for (the FLOPs
    engine itself notes the FFN size and vocabulary padding it assumed)."""
    if "model" in facts.origins:  # a preset or config.json states them all
        return []
    stated = facts.origins
    shape = facts.shape
    found = []
    if "swiglu" not in stated:
        found.append("assumption: plain (not gated) MLP, as no swiglu was stated (--swiglu)")
    if shape.num_experts and "moe_router_topk" not in stated:
        found.append(
            f"assumption: top-{shape.moe_router_topk} routing (Megatron's default;"
            " --moe-router-topk)"
        )
    return found


def _peak(facts: RunFacts, warnings: list[str]) -> dict[str, object] | None:
    dtype = facts.dtype
    if dtype is None:
        dtype = "bf16"
        if facts.peak_override is None:
            warnings.append("precision unknown: bf16 assumed; pass --dtype")
    if facts.gpu is not None:
        warnings.extend(facts.gpu.warnings)
    peak = peaks.peak_json(facts.gpu, dtype, facts.peak_override)
    if peak is None:
        if facts.gpu is None:
            warnings.append("GPU type unknown: pass --gpu (or --peak-tflops)")
        else:
            warnings.append(f"{facts.gpu.accelerator.key} has no {dtype} peak: pass --peak-tflops")
    return peak


def _overall(
    table: pl.DataFrame,
    flops: FlopsResult,
    num_gpus: int | None,
    stalls_s: float,
    peak: float | None,
) -> float | None:
    """All logged model FLOPs over all logged time, warm-up, slow steps and stalls included."""
    timed = timed_records(table)
    iterations = int(timed["interval"].sum())
    seconds = float((timed["step"] * timed["interval"]).sum()) + stalls_s
    if not num_gpus or not seconds or not peak:
        return None
    return utilisation(tflops_per_gpu(flops.per_iteration * iterations, seconds, num_gpus), peak)


# Counts a framework's printed TFLOPS may have used: its versions disagree, and a log
# rarely says which version printed it.
_COUNTS_BY_FRAMEWORK = {"megatron-lm": ("megatron-lm", "megatron-lm-0.11")}


def _expected_ratio(
    framework: str, facts: RunFacts, recompute: str, observed: float
) -> float | None:
    """The recomputed/reported ratio the framework's own count predicts; of the counts its
    versions used, the one closest to what was observed."""
    batch = facts.global_batch_size or 0
    predicted = [
        expected_reported_ratio(count, facts.shape, batch, recompute)
        for count in _COUNTS_BY_FRAMEWORK.get(framework, (framework,))
    ]
    known = [p for p in predicted if p is not None]
    return min(known, key=lambda p: abs(p - observed)) if known else None


def _reported_ratio(
    table: pl.DataFrame, flops: FlopsResult | None, num_gpus: int | None
) -> float | None:
    """Recomputed over reported TFLOPS, record by record (same step time on both sides),
    then the median: a figure the framework's formula alone explains."""
    if flops is None or not num_gpus:
        return None
    recomputed = flops.per_iteration / (pl.col("step_time_s") * num_gpus * 1e12)
    ratios = table.select(
        (recomputed / pl.col("reported_tflops_per_gpu")).alias("ratio")
    ).get_column("ratio")
    return _median(ratios.filter(ratios.is_finite()))


def _median(values: pl.Series) -> float | None:
    found = values.drop_nulls().median()
    return float(found) if isinstance(found, (int, float)) else None
