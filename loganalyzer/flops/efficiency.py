"""TFLOPS, MFU and HFU of a parsed run: the log's facts, overridden by the user's, through the
one FLOPs engine, against the one peak table.

Every figure carries its working: the FLOPs derivation with the run's numbers plugged in,
the peak's source, and where each fact came from (`facts`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from loganalyzer.analysis import timed_records
from loganalyzer.errors import UsageProblem
from loganalyzer.flops import peaks
from loganalyzer.flops.fallbacks import seq_length_from_consumed
from loganalyzer.flops.formulas import (
    RECOMPUTE,
    FlopsResult,
    RatioReading,
    ShapeError,
    achieved,
    compute_flops,
    expected_reported_ratio,
    read_reported_ratio,
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
from loganalyzer.model import MODEL_FACTS, RUN_FACTS, ConfigValue, Run
from loganalyzer.spill import collect


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
    # the pipeline-bubble estimate needs it (micro-batches per step); FLOPs do not
    micro_batch_size: int | None = None
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
    # why recomputed / reported is not 1 (`render.wording.reported_ratio` words it)
    reported_reading: RatioReading | None
    # the framework's own MFU, as printed (a fraction): torchtitan's `mfu:`, against its peak
    reported_mfu: float | None
    expected_ratio: float | None
    params: int | None
    active_params: int | None  # per token: the experts a token is routed to, for MoE
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
    warnings.extend(overridden(run, shape, given))
    origins.update({key: "flag" for key in [*options["shape"], *given]})
    if shape.seq_length is None and (derived := seq_length_from_consumed(run.metrics)):
        shape = dataclasses.replace(shape, seq_length=derived[0])
        origins["seq_length"] = derived[1]
    batch = given.get("global_batch_size") or _batch(run, origins, warnings)
    gpu, gpu_source = _gpu(given.get("gpu"), run.config.get("gpu_name"), warnings)
    dtype = _precision(run, given.get("dtype"), gpu, origins, warnings)
    recompute = given.get("recompute") or _logged_recompute(run, warnings)
    lora = bool(given.get("lora")) or run.get("lora") is True
    if lora:
        shape = _adapter_facts(run, shape, origins, warnings)
    if batch is None:
        warnings.extend(_missing_shape(shape, run))
    return RunFacts(
        shape=shape,
        global_batch_size=batch,
        num_gpus=given.get("num_gpus") or run.get_int("num_gpus"),
        dtype=str(dtype) if dtype else None,
        recompute=str(recompute) if recompute else None,
        formula=str(given.get("formula", "megatron")),
        lora=lora,
        gpu=gpu,
        gpu_source=gpu_source,
        peak_override=given.get("peak_tflops"),
        micro_batch_size=given.get("micro_batch_size") or run.get_int("micro_batch_size"),
        origins=origins,
        warnings=tuple(warnings),
    )


# Run facts a command-line option can override, by option name (the same key in the log).
_RUN_OPTIONS = ("global_batch_size", "micro_batch_size", "num_gpus", "dtype", "recompute")


def overridden(run: Run, shape: ModelShape, given: dict[str, Any]) -> list[str]:
    """A warning for each fact the log states that the command line (an option, or --model)
    replaced with another value, naming both."""
    found = []
    for key in MODEL_FACTS:
        logged = run.config.get(key)
        used = getattr(shape, key, None)
        if logged is None or logged.value is None or used is None or used == logged.value:
            continue
        found.append(
            f"{key} = {used} from the command line overrides {logged.value} ({logged.provenance})"
        )
    for key in _RUN_OPTIONS:
        logged = run.config.get(key)
        if key in given and logged is not None and logged.value not in (None, given[key]):
            found.append(
                f"--{key.replace('_', '-')} {given[key]} overrides the log's {logged.value} "
                f"({logged.provenance})"
            )
    return found


def _adapter_facts(
    run: Run, shape: ModelShape, origins: dict[str, str], warnings: list[str]
) -> ModelShape:
    """A LoRA run's trainable parameters from the log (PEFT's `trainable params` line, the
    Trainer's count), unless a flag gave them; without them the adapters count as nothing."""
    if shape.trainable_params is not None:
        return shape
    found = run.get_int("trainable_params")
    if found is None:
        warnings.append(
            "LoRA run: trainable (adapter) parameters unknown, counted as 0; pass"
            " --trainable-params"
        )
        return shape
    origins["trainable_params"] = str(run.config["trainable_params"].provenance)
    return dataclasses.replace(shape, trainable_params=found)


# What the default FLOPs formula needs of the model, and the flag that gives each.
_SHAPE_FLAGS = {
    "num_layers": "--num-layers",
    "hidden_size": "--hidden-size",
    "num_attention_heads": "--num-attention-heads",
    "seq_length": "--seq-length",
    "vocab_size": "--vocab-size",
}


def missing_for_mfu(
    facts: RunFacts, efficiency: Efficiency, steady_step_s: float | None
) -> list[dict[str, str | None]]:
    """Why the steady MFU is unknown: each input the run lacks (`input`, as the run's facts
    name it) and the option that supplies it (`option`, None where no option can: a run
    without a steady timed record); empty when the MFU is known."""
    if efficiency.mfu is not None:
        return []
    missing: list[tuple[str, str | None]] = []
    if efficiency.flops is None:
        if facts.global_batch_size is None:
            missing.append(("global_batch_size", "--global-batch-size"))
        known = {**dataclasses.asdict(facts.shape), "vocab_size": facts.shape.vocab}
        shape = [(name, flag) for name, flag in _SHAPE_FLAGS.items() if known[name] is None]
        # several facts of the shape: a preset or config.json gives them all at once
        missing += shape if len(shape) == 1 else [(name, "--model") for name, _ in shape]
        if facts.global_batch_size is not None and not shape:
            missing.append(("model_shape", "--model"))
    if efficiency.peak is None:
        missing.append(("gpu", "--gpu") if facts.gpu is None else ("peak", "--peak-tflops"))
    if not facts.num_gpus:
        missing.append(("num_gpus", "--num-gpus"))
    if not steady_step_s:
        missing.append(("steady_step_time", None))
    return [{"input": name, "option": option} for name, option in missing]


def _missing_shape(shape: ModelShape, run: Run) -> list[str]:
    """Which model facts the run lacks, and the flags that supply them (said here because
    without a batch size the FLOPs engine stops before looking at the shape)."""
    known = {**dataclasses.asdict(shape), "vocab_size": shape.vocab}
    missing = [name for name in _SHAPE_FLAGS if known[name] is None]
    if not missing:
        return []
    base = run.get("peft_base_model")
    where = f" (the adapter's base model is {base})" if base else ""
    return [
        f"model shape unknown: {', '.join(missing)} not in the run; pass --model (a preset or"
        f" a Hugging Face config.json{where}) or {' '.join(_SHAPE_FLAGS[m] for m in missing)}"
    ]


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
    # through an expression: `table[name]` would write a literal out (`model.compact_table`)
    typical = table.select(pl.col("global_batch_size").drop_nulls().mode().max()).item()
    return None if typical is None else int(typical)


def _precision(
    run: Run,
    flag: str | None,
    gpu: peaks.Resolution | None,
    origins: dict[str, str],
    warnings: list[str],
) -> str | None:
    """The precision: --dtype (bf16 refused on a device that has none), else what the log
    states, else what it proves: a loss scale above 1 (fp16 needs one and bf16 does not; a
    dynamic one changes or is a power of two) or an `fp16` flag; else None (assumed, see
    `default_dtype`)."""
    if flag:
        if flag == "bf16" and gpu is not None and not peaks.has_bf16(gpu.accelerator):
            raise UsageProblem(
                f"--dtype bf16: {gpu.accelerator.name} has no bf16 (the peak table lists"
                f" {', '.join(peaks.precisions(gpu.accelerator))}); pass --dtype fp16"
            )
        return str(flag)
    stated = run.get("dtype")
    if stated:
        return str(stated)
    scaled = _loss_scale_evidence(run.table)
    if scaled is not None:
        origins["dtype"] = f"derived: the dynamic loss scale at {scaled}"
        warnings.append(f"precision: fp16, from the dynamic loss scale at {scaled}")
        return "fp16"
    flagged = run.config.get("fp16")
    if flagged is not None and str(flagged.value).lower() in ("true", "1"):
        origins["dtype"] = f"derived: fp16={flagged.value} ({flagged.provenance})"
        return "fp16"
    return None


def _loss_scale_evidence(table: pl.DataFrame) -> str | None:
    """`file:line` of the first loss scale above 1, where the run's loss scales above 1
    change or are powers of two (bf16 and fp32 runs print 1, or none)."""
    if "loss_scale" not in table.columns:
        return None
    scaled = table.select("loss_scale", "source", "line").filter(pl.col("loss_scale") > 1)
    if scaled.is_empty():
        return None
    values = scaled.get_column("loss_scale")
    powers = values.log(2).round() == values.log(2)
    if values.n_unique() == 1 and not powers.any():
        return None
    source, line = scaled.item(0, "source"), scaled.item(0, "line")
    return f"{source}:{line}" if line is not None else str(source)


def default_dtype(facts: RunFacts) -> str:
    """The precision a run that states none is held to: `ASSUMED_DTYPE`, or fp16 on a device
    that has no bf16 (a V100)."""
    if facts.gpu is not None and not peaks.has_bf16(facts.gpu.accelerator):
        return "fp16"
    return ASSUMED_DTYPE


def _gpu(
    flag: str | None, logged: ConfigValue | None, warnings: list[str]
) -> tuple[peaks.Resolution | None, str | None]:
    """The accelerator the user named (an unknown name is a usage error), else the run's
    (an unknown one is a warning and a null, never a guess), with where it came from: "flag",
    "log" for a text log, else the provenance ("wandb metadata")."""
    from_log = logged.value if logged is not None else None
    if flag:
        found = peaks.resolve(flag)
        if found is None:
            raise UsageProblem(f"--gpu: {peaks.unknown_message(flag)}")
        read = peaks.resolve(str(from_log)) if from_log else None
        if from_log and (read is None or read.accelerator.key != found.accelerator.key):
            warnings.append(f"--gpu {flag} overrides the log's GPU {from_log!r}")
        return found, "flag"
    if logged is not None and from_log:
        found = peaks.resolve(str(from_log))
        if found is None:
            warnings.append(f"GPU {from_log!r} from the log is not in the peak table: pass --gpu")
            return None, None
        origin = logged.provenance
        return found, "log" if origin.kind == "log" else str(origin)
    return None, None


def measure(
    run: Run,
    facts: RunFacts,
    steady_step_s: float | None,
    logged: tuple[int, float],
    steady_rows: pl.Series | None = None,
) -> Efficiency:
    """FLOPs per iteration, then TFLOPS/GPU and MFU at the steady pace and over all time
    (`logged`: the iterations the timed records cover, and their step time plus the stalls
    between them, in seconds, as the analysis summed them: summed again here, they were a
    copy of two columns of every record at the summary's peak). The
    framework's own TFLOPS are the median over the records at `steady_rows` (rows of the
    per-iteration table), the records the steady pace is taken over (all records when not
    given)."""
    warnings: list[str] = []
    params = facts.shape.params if "params" in facts.origins else None
    counts = count_parameters(facts.shape)
    if params is None:
        params = counts.total if counts is not None else facts.shape.params
    active = counts.active if counts is not None and facts.shape.num_experts else params
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
        if not steady_step_s and timed_records(run.table, ["step"]).height:
            warnings.append(
                "no steady-state record (warm-up or slow steps cover the run): steady TFLOPS"
                " and MFU unknown; lower --warmup"
            )
        elif not steady_step_s:
            warnings.append("no timed iteration record: steady TFLOPS and MFU unknown")
        bf16 = facts.gpu.peak_tflops("bf16") if facts.gpu and facts.dtype == "fp8" else None
        figures = achieved(flops, steady_step_s, facts.num_gpus, peak_value, bf16)
        overall = _overall(flops, facts.num_gpus, *logged, peak_value)
    printed = _reported_per_gpu(run, facts.num_gpus)
    reported = _median(printed if steady_rows is None else printed.gather(steady_rows))
    printed_mfu = _reported_mfu(run)
    reported_mfu = _median(printed_mfu if steady_rows is None else printed_mfu.gather(steady_rows))
    if reported is None and reported_mfu is not None:
        reported = _tflops_of_reported_mfu(run, reported_mfu)
    shown = figures.tflops_per_gpu if figures else None
    ratio = shown / reported if shown is not None and reported else None
    if ratio is None and flops is not None:
        ratio = _ratio_to_total_flos(run, flops.per_iteration)
    reading = expected = None
    if ratio is not None:
        reading = read_reported_ratio(
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
        reported_reading=reading,
        reported_mfu=reported_mfu,
        expected_ratio=expected,
        params=params,
        active_params=active,
        warnings=tuple(warnings),
    )


def _reported_per_gpu(run: Run, num_gpus: int | None) -> pl.Series:
    """Per record, the framework's printed TFLOPS/GPU; for a run that reports only its total
    FLOPs (HF Trainer's `total_flos`), what that claims per GPU at each record's pace:
    total / steps / (step time x GPUs)."""
    total, steps = run.get("reported_total_flos"), run.get_int("global_step")
    # a copy through an expression: `get_column` would write a literal out in the table for
    # as long as it lives (`model.compact_table`)
    printed = run.table.select("reported_tflops_per_gpu").to_series()
    if not isinstance(total, (int, float)) or not steps or not num_gpus:
        return printed
    if printed.drop_nulls().len():
        return printed
    per_step = float(total) / steps
    return run.table.select(
        reported_tflops_per_gpu=per_step / (pl.col("step_time_s") * num_gpus * 1e12)
    ).to_series()


# The long-table metric of a framework's printed MFU, in percent (torchtitan's `mfu:`), and the
# config fact of the peak it was computed against, in FLOP/s ("Peak FLOPS used for computing
# MFU: 9.890e+14").
REPORTED_MFU_METRIC = "reported_mfu_pct"
REPORTED_PEAK_FACT = "reported_peak_flops"


def _reported_mfu(run: Run) -> pl.Series:
    """Per record of the table, the framework's printed MFU as a fraction (null where none)."""
    printed = collect(
        run.metrics.lazy()
        .filter(pl.col("name").cast(pl.String) == REPORTED_MFU_METRIC)
        .select("line", mfu=pl.col("value") / 100)
    )
    records = run.table.select("line")
    if printed.height == 0:
        return pl.Series("mfu", [None] * records.height, dtype=pl.Float64)
    joined = records.join(printed.unique("line"), on="line", how="left", maintain_order="left")
    return joined.get_column("mfu")


def _tflops_of_reported_mfu(run: Run, mfu: float) -> float | None:
    """The TFLOPS/GPU a printed MFU stands for against the peak the framework printed beside
    it: a log of torchtitan from before its `tflops:` field (February 2025) prints only MFU."""
    peak = run.get(REPORTED_PEAK_FACT)
    return mfu * float(peak) / 1e12 if isinstance(peak, (int, float)) and peak > 0 else None


def _ratio_to_total_flos(run: Run, per_iteration: float) -> float | None:
    """Recomputed over reported FLOPs for a run that reports only its total (HF Trainer's
    `total_flos` over its steps): a ratio of FLOPs per step, which needs neither the GPU
    count nor the step time."""
    total, steps = run.get("reported_total_flos"), run.get_int("global_step")
    if not isinstance(total, (int, float)) or not total or not steps:
        return None
    return per_iteration / (float(total) / steps)


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
    # An arguments dump without a swiglu argument comes from a Megatron that had none (2021
    # releases): a plain MLP is then a fact of the version, not an assumption.
    dumped = stated.get("num_layers", "flag") != "flag"
    if "swiglu" not in stated and not dumped:
        found.append("assumption: plain (not gated) MLP, as no swiglu was stated (--swiglu)")
    if shape.num_experts and "moe_router_topk" not in stated:
        found.append(
            f"assumption: top-{shape.moe_router_topk} routing (Megatron's default;"
            " --moe-router-topk)"
        )
    return found


# The precision a run that does not state one is assumed to train in (the peak it is held to).
ASSUMED_DTYPE = "bf16"


def assumed_dtype(facts: RunFacts) -> bool:
    """Whether the figures assume a precision (`default_dtype`): the run states and proves
    none, and no --peak-tflops makes the precision moot."""
    return facts.dtype is None and facts.peak_override is None


def _peak(facts: RunFacts, warnings: list[str]) -> dict[str, object] | None:
    dtype = facts.dtype or default_dtype(facts)
    if assumed_dtype(facts):
        why = (
            f" ({facts.gpu.accelerator.name} has no bf16)"
            if dtype != ASSUMED_DTYPE and facts.gpu
            else ""
        )
        warnings.append(f"precision unknown: {dtype} assumed{why}; pass --dtype")
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
    flops: FlopsResult, num_gpus: int | None, iterations: int, seconds: float, peak: float | None
) -> float | None:
    """All logged model FLOPs over all logged time, warm-up, slow steps and stalls included."""
    if not num_gpus or not seconds or not peak:
        return None
    return utilisation(tflops_per_gpu(flops.per_iteration * iterations, seconds, num_gpus), peak)


def goodput_mfu(
    efficiency: Efficiency, num_gpus: int | None, useful_iterations: int, wall_s: float
) -> float | None:
    """The model FLOPs of the iterations the run kept (redone work excluded) over the whole
    wall clock (restart gaps and stalls included): what the hardware delivered to the model."""
    peak = efficiency.peak["tflops_per_gpu"] if efficiency.peak else None
    if efficiency.flops is None or not num_gpus or wall_s <= 0 or not isinstance(peak, float):
        return None
    work = efficiency.flops.per_iteration * useful_iterations
    return utilisation(tflops_per_gpu(work, wall_s, num_gpus), peak)


# Counts a framework's printed TFLOPS may have used: its versions disagree, and a log
# rarely says which version printed it.
_COUNTS_BY_FRAMEWORK = {
    "megatron-lm": ("megatron-lm", "megatron-lm-0.11"),
    "maxtext": ("maxtext", "maxtext-2024"),
}


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


def _median(values: pl.Series) -> float | None:
    found = values.drop_nulls().median()
    return float(found) if isinstance(found, (int, float)) else None
