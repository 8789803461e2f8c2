"""The plugin: detection, and the assembly of a log's DeepSpeed lines into one Run."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from loganalyzer.endings import candidates as ending_candidates
from loganalyzer.endings import read_endings
from loganalyzer.errors import NothingReadError
from loganalyzer.model import (
    ConfigValue,
    Provenance,
    Run,
    SourceInfo,
    conform_metrics,
    conform_table,
)
from loganalyzer.parsers.deepspeed import lines
from loganalyzer.parsers.deepspeed.config import (
    engine_config,
    gpu_count,
    json_config,
    pipeline_width,
)
from loganalyzer.sources import read_head, text_head
from loganalyzer.textlog import scanned_chunks, to_timestamp

DEEPSPEED_MARKERS = re.compile(
    r"\[Rank \d+\] step=\d+, skipped=|\d, (?:RunningAvg)?SamplesPerSec="
    r"|DeepSpeedEngine configuration|time \(ms\) \| fwd(?:_microstep)?: "
    r"|DeepSpeed Flops Profiler|iter time \(s\): "
)
# One of these is in every match of DEEPSPEED_MARKERS: a head without any is passed over
# with `in`, far cheaper than the pattern tried at every position of a 4 MB head.
DEEPSPEED_LITERALS = (
    "] step=",
    "SamplesPerSec=",
    "DeepSpeedEngine configuration",
    "time (ms) | fwd",
    "DeepSpeed Flops Profiler",
    "iter time (s): ",
)
# Megatron's own structure: such a log (Megatron-DeepSpeed) is the Megatron parser's.
MEGATRON_MARKERS = re.compile(
    r"iteration\s{1,8}\d+\s*/\s*\d+\s*\||^-+ arguments -+$|using world size: \d+",
    re.M,
)
# The ALCF Megatron-DeepSpeed fork's key=value iteration line (`iteration=  136004/  136100 |
# consumed_samples= ... | elapsed_time_per_iteration_ms=3415.3 | ...`), which the Megatron
# parser does not read: such a log is read here, by its DeepSpeed engine lines, and says so.
KEY_VALUE_ITERATION = re.compile(r"\biteration=\s{0,8}\d+\s*/\s*\d+\s*\|")
KEY_VALUE_NOTE = (
    "the ALCF Megatron-DeepSpeed fork's key=value iteration lines (`iteration= N/ M |"
    " ... elapsed_time_per_iteration_ms= ...`) are not read (no parser reads that variant"
    " yet): their loss, global batch and elapsed time per iteration are not used; the"
    " records are DeepSpeed's step= lines"
)
# HF Trainer prints these; a Trainer run with DeepSpeed is the HF Trainer parser's.
HF_MARKERS = re.compile(r"\*\*\*\*\* Running training \*\*\*\*\*|\{'(?:loss|train_runtime)': ")
# The Trainer's records (its log dicts): without them, the `***** Running training *****`
# banner alone is no Trainer run, as DeepSpeed-Chat prints the same banner before its steps.
HF_RECORDS = ("{'loss': ", "{'train_runtime': ", "{'eval_loss': ")
# DeepSpeed's own records: a step line past step 0 (printed at start-up), a ThroughputTimer
# report, a pipeline engine step.
DEEPSPEED_RECORDS = re.compile(
    r"\] step=[1-9]\d*, skipped=|SamplesPerSec=|steps: \d+ loss: [^ ]+ iter time \(s\): "
)

# What a run at DeepSpeed's default log level (WARNING since 0.17.6) does not print.
QUIET_LOG = (
    "no DeepSpeedEngine configuration, step= or ThroughputTimer lines: DeepSpeed >= 0.17.6"
    ' logs at WARNING by default; "log_level": "info" in the DeepSpeed config prints them'
    " (batch size, precision, ZeRO stage, step numbers, samples/s)"
)


# What the step times rest on, when not the step= lines with the ThroughputTimer.
def _stamped(lines: str, first: str, resolution: float | None) -> str:
    """The note on step times read from logger timestamps, for want of the batch size."""
    clock = "whole seconds" if resolution else "1 ms resolution"
    return (
        f"step times from the logger timestamps of consecutive {lines} lines ({clock};"
        f" the first {first} of each launch has none): CurrSamplesPerSec needs"
        " train_batch_size, which neither the engine printout nor a ds_config*.json beside the"
        ' log gives ("log_level": "info" prints it)'
    )


# Why DeepSpeed-Chat's own TFLOPs figure is not the reported TFLOPS per GPU.
CHAT_TFLOPS = (
    "DeepSpeed-Chat's `TFLOPs:` figures (its `Model Parameters: ..., Latency: ...` lines) are"
    " not taken as the reported TFLOPS per GPU: dschat/utils/perf.py divides the FLOPs of one"
    " GPU's batch by the micro-step's latency x the world size, which is the per-GPU figure"
    " only on one GPU"
)
UNTIMED = (
    "step times unknown: CurrSamplesPerSec needs train_batch_size, which neither the engine"
    ' printout nor a ds_config*.json beside the log gives ("log_level": "info" prints it)'
)
TIMER_ONLY = (
    "no step= lines: the records are the ThroughputTimer's reports (every steps_per_print"
    " steps), their step times from its samples per second and the train batch size"
)

# A log with step lines but no configuration printout (cut before the engine started).
NO_PRINTOUT = (
    "no DeepSpeedEngine configuration printout (the log begins after the engine started) and"
    " no ds_config*.json beside it: train batch size, precision and ZeRO stage unknown"
)


class DeepSpeedParser:
    """DeepSpeed engine stdout logs (the plugin API is in loganalyzer.plugin)."""

    name = "deepspeed"
    description = "DeepSpeed engine stdout: step/ThroughputTimer/timer lines, config, profiler"
    # the releases whose real stdout the tests read (fixtures/deepspeed, fixtures/corpus)
    tested_on = (
        "DeepSpeed of 2020 (DeepSpeedLight, SamplesPerSec=)",
        "DeepSpeed of early 2022 (SamplesPerSec=)",
        "DeepSpeed 0.7",
        "DeepSpeed 0.7.7",
        "DeepSpeed 0.9.5 (pipeline engine)",
        "DeepSpeed 0.10.0",
        "DeepSpeed 0.19.8 (INFO and default WARNING levels)",
        "DeepSpeed-Chat (2023, DeepSpeed ~0.9)",
        "DeepSpeed-Chat DPO (2025, DeepSpeed ~0.16)",
    )

    def detect(self, path: Path) -> float:
        head = text_head(path, json_too=True)
        if head is None or not any(literal in head for literal in DEEPSPEED_LITERALS):
            return 0.0
        if not DEEPSPEED_MARKERS.search(head):
            return 0.0
        if MEGATRON_MARKERS.search(head) or any(record in head for record in HF_RECORDS):
            return 0.2
        if HF_MARKERS.search(head):
            # the Trainer's banner with none of its records: the steps here are DeepSpeed's
            return 0.95 if DEEPSPEED_RECORDS.search(head) else 0.2
        return 0.8

    def parse(self, path: Path) -> Run:
        source = str(path)
        found: dict[str, list[pl.DataFrame]] = {k: [] for k in (*_EXTRACTORS, "endings")}
        for chunk in scanned_chunks(path, _scan):
            for key, part in chunk.items():
                found[key].append(part)
        parts = {key: pl.concat(frames) for key, frames in found.items()}
        config = engine_config(parts["config"], source)
        from_json, warnings = json_config(path)
        for key, value in from_json.items():
            config.setdefault(key, value)
        config["framework"] = ConfigValue("deepspeed", Provenance("log", source))
        if parts["config"].filter(pl.col("key") != "dist_world_size").height == 0:
            if parts["steps"].height == 0 and parts["throughput"].height == 0:
                warnings.append(f"{source}: {QUIET_LOG}")
            elif not from_json:
                warnings.append(f"{source}: {NO_PRINTOUT}")
        if (parts["config"]["key"] == "chat_throughput").any():
            warnings.append(f"{source}: {CHAT_TFLOPS}")
        if KEY_VALUE_ITERATION.search(read_head(path)):
            warnings.append(f"{source}: {KEY_VALUE_NOTE}")
        pipelined = parts["pipeline"].height > 0 or parts["stages"].height > 0
        width = pipeline_width(parts["stages"], parts["starts"]) if pipelined else None
        gpus, note = gpu_count(parts["config"], config, width or 0 if pipelined else None, source)
        if gpus is not None:
            config["num_gpus"] = gpus
        if note:
            warnings.append(f"{source}: {note}")
        if "global_batch_size" not in config:
            batch_read, note = _pipeline_batch(parts["pipeline"], source)
            if batch_read is not None:
                config["global_batch_size"] = batch_read
                warnings.append(f"{source}: {note}")
        batch = config.get("global_batch_size")
        accumulation = config.get("gradient_accumulation_steps")
        table, notes, resolution = _records(
            parts,
            batch.value if batch else None,
            accumulation.value if accumulation else None,
            source,
        )
        warnings.extend(f"{source}: {note}" for note in notes)
        table = _with_loss_scale(table, parts["scales"])
        metrics = _metrics(parts, table, source)
        table = _with_reported(table, metrics)
        if table.height == 0 and metrics.height == 0 and len(config) == 1:
            raise NothingReadError(f"{source}: no DeepSpeed step, timer or config lines found")
        if table.height == 0:
            warnings.append(f"{source}: no training steps logged (the run may have died early)")
        return Run(
            framework="deepspeed",
            config=config,
            table=table,
            metrics=metrics,
            sources=[SourceInfo(source, self.name, table.height, resolution)],
            warnings=warnings,
            endings=read_endings([parts["endings"]], source),
        )


def _config_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The engine's statements of its config and DeepSpeed-Chat's, as (line, key, value)."""
    rows: pl.DataFrame = pl.concat([lines.engine_config(frame), lines.chat_facts(frame)])
    return rows


_EXTRACTORS = {
    "steps": lines.step_lines,
    "throughput": lines.throughput_lines,
    "pipeline": lines.pipeline_lines,
    "scales": lines.loss_scale_lines,
    "timers": lines.timer_lines,
    "config": _config_rows,
    "profiler": lines.profiler_rows,
    "starts": lines.engine_starts,
    "stages": lines.stage_lines,
}


def _scan(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """Every kind of line one chunk holds."""
    candidates = lines.candidates(frame)
    found = {key: extract(candidates) for key, extract in _EXTRACTORS.items()}
    sections = frame.filter(pl.col("text").str.contains_any(['"fp16"', '"bf16"', '"bfloat16"']))
    if sections.height:  # the printed JSON's lines: their next line is needed too
        found["config"] = pl.concat([found["config"], lines.json_precision(frame)])
    if found["starts"].height:  # a printout without the logger: its rows carry no marker
        found["config"] = pl.concat([found["config"], lines.plain_printout(frame)])
    found["config"] = first_statements(found["config"])
    found["endings"] = ending_candidates(frame)
    return found


def first_statements(rows: pl.DataFrame) -> pl.DataFrame:
    """Each (key, value) at its first line only: DeepSpeed-Chat states its batch and sequence
    length on every throughput line (3 rows a micro-step), and the config's readers take
    the first statement of each key (the first readable one, so a key's other values are
    kept), so the rows held stay as few as the distinct statements, not the log's lines."""
    return rows.sort("line", maintain_order=True).unique(
        ["key", "value"], keep="first", maintain_order=True
    )


def _records(
    parts: dict[str, pl.DataFrame], batch: object, accumulation: object, source: str
) -> tuple[pl.DataFrame, list[str], float | None]:
    """The per-iteration table from the best lines the log has, notes on what the step
    times rest on (step lines with their ThroughputTimer report, else the pipeline engine's
    lines, else the ThroughputTimer's own reports, else the per-step timers) and the
    resolution of their clock when it is coarse (whole-second logger timestamps)."""
    resolution = None
    starts = parts["starts"]
    steps = _launches(parts["steps"].filter(pl.col("iteration") > 0), starts)
    pipeline = _launches(parts["pipeline"], starts)
    timer, notes = _timer_reports(parts["throughput"], starts, batch, accumulation)
    if steps.height:
        throughput = timer.join_asof(
            steps.select("line", step_line="line"), on="line", strategy="backward"
        )
        throughput = throughput.unique("step_line", keep="first", maintain_order=True)
        records = steps.join(
            throughput.drop("line", "stamp", "timer_step", "iteration", "launch", "epoch"),
            left_on="line",
            right_on="step_line",
            how="left",
        )
        if pipeline.height:
            records = records.drop("samples_per_s", "step_time_s").join(
                pipeline.select("launch", "iteration", "loss", "step_time_s", "samples_per_s"),
                on=["launch", "iteration"],
                how="left",
                maintain_order="left",
            )
            notes = []
        elif not _has_batch(batch) and records["stamp"].drop_nulls().len() > 1:
            records = records.with_columns(step_time_s=_stamped_step_times())
            resolution = stamp_resolution(records["stamp"])
            notes = [_stamped("step=", "step", resolution)]
        elif not _has_batch(batch):
            notes = [UNTIMED]
        else:
            notes = []
        records = records.with_columns(skipped_iterations=_skipped_per_record())
    elif pipeline.height:
        records, notes = pipeline, []
    elif timer.height:
        records = timer.drop("timer_step", "epoch")
        notes.append(TIMER_ONLY)
        if not _has_batch(batch) and records["stamp"].drop_nulls().len() > 1:
            records = records.with_columns(step_time_s=_stamped_step_times())
            resolution = stamp_resolution(records["stamp"])
            notes.append(_stamped("ThroughputTimer", "report", resolution))
        elif not _has_batch(batch):
            notes.append(UNTIMED)
    else:
        records, notes = _timer_records(parts["timers"]), []
        if records.height:
            notes = [
                "step numbers and times come from the per-step wall_clock_breakdown timers"
                " (step time = fwd + bwd + step; data loading and the rest of the loop are not"
                " included; steps counted from 1 as the log has no step lines)"
            ]
    return _table(records, source), notes, resolution


def _skipped_per_record() -> pl.Expr:
    """The steps each record's interval skipped, from the engine's running count (`skipped=`).
    A launch's first record has it all when it covers the steps from 0 (its step is no more
    than the launch's usual steps between records: a fresh start, whose count began at 0);
    a log that begins mid-run, or a resumed launch (the count comes back from the checkpoint),
    has no count to start from, and its first record is taken to have skipped none."""
    total, iteration = pl.col("skipped_total"), pl.col("iteration")
    typical = iteration.diff().over("launch").drop_nulls().mode().min().over("launch")
    first = pl.when(iteration <= typical).then(total)
    return pl.coalesce(total.diff().over("launch").clip(lower_bound=0), first, pl.lit(0))


def _pipeline_batch(pipeline: pl.DataFrame, source: str) -> tuple[ConfigValue | None, str]:
    """The train batch size the pipeline engine's lines state: it prints samples/sec as
    train_batch_size / iter time, so their product is the batch (to the 3 decimals printed);
    None when the products are not one whole number (to 1 %)."""
    products = (pipeline["samples_per_s"] * pipeline["step_time_s"]).drop_nulls()
    if products.len() == 0:
        return None, ""
    value = products.median()
    assert isinstance(value, float)
    batch = round(value)
    if batch < 1 or (products - batch).abs().max() > 0.01 * batch:
        return None, ""
    where = Provenance("log", source, int(pipeline["line"][0]))
    note = (
        f"train batch size {batch} from the pipeline engine's lines (samples/sec x iter time"
        " (s)): no engine printout or ds_config*.json gives it"
    )
    return ConfigValue(batch, where), note


def _with_loss_scale(table: pl.DataFrame, scales: pl.DataFrame) -> pl.DataFrame:
    """Each record's dynamic loss scale: the last one printed before its line (a change's
    new scale), and before the first change the scale that change started from. Only
    changes are printed, and the scaler of DeepSpeed's loss_scaler.py raises the scale
    without a line: between changes the figure is the last printed, not always the scale."""
    if scales.height == 0 or table.height == 0:
        return table
    scales = scales.sort("line")
    known = table.select("line").join_asof(
        scales.select("line", printed="scale_after"), on="line", strategy="backward"
    )
    first = scales["scale_before"][0]
    return table.with_columns(loss_scale=pl.coalesce(known["printed"], pl.lit(first, pl.Float64)))


def _has_batch(batch: object) -> bool:
    return isinstance(batch, int) and batch > 0


def _timer_reports(
    throughput: pl.DataFrame, starts: pl.DataFrame, batch: object, accumulation: object
) -> tuple[pl.DataFrame, list[str]]:
    """The ThroughputTimer's reports, each with the optimizer step it follows (`iteration`)
    and that step's time in seconds, from what the timer printed and the train batch size
    B (`train_batch_size` = micro batch x data-parallel size x accumulation steps g):

    - DeepSpeed >= 0.8 (`global_step=`): CurrSamplesPerSec = B / the step's time, so the
      step time is B / CurrSamplesPerSec.
    - 0.7: CurrSamplesPerSec = (micro batch x DP) / one micro-step's time, printed every
      `steps_per_print` micro-steps of the epoch: the step time is g micro-steps,
      B / CurrSamplesPerSec, and the step is the micro-step count / g (rounded up).
    - 0.3-0.6: only the running average R(n) = b (n - 2) / T(n) over the n micro-steps
      since the start (the first 2 untimed, b = B / g): the timer's own clock T(n) =
      b (n - 2) / R(n), so a step over the micro-steps (m, n] between two reports took
      g (T(n) - T(m)) / (n - m) = B ((n - 2) / R(n) - (m - 2) / R(m)) / (n - m).

    The timer times from the forward pass to the end of `step()`: time outside them (data
    loading between steps) is not in these figures. Before 0.8 the micro-step count starts
    again each epoch: it is carried on from the last one printed in the epoch before."""
    notes: list[str] = []
    if throughput.height == 0:
        empty = throughput.with_columns(
            iteration=pl.lit(None, pl.Int64),
            launch=pl.lit(None, pl.UInt32),
            step_time_s=pl.lit(None, pl.Float64),
        )
        return empty, notes
    old = throughput["timer_step"].null_count() > 0
    steps_per = accumulation if isinstance(accumulation, int) and accumulation > 0 else None
    if old and steps_per is None:
        steps_per = 1
        notes.append(
            "the ThroughputTimer before DeepSpeed 0.8 counts micro-steps and"
            " gradient_accumulation_steps is not printed: each micro-step is taken for a step"
        )
    g = steps_per or 1
    counted = _micro_steps(throughput, starts)
    counted = counted.with_columns(
        iteration=pl.coalesce("timer_step", (pl.col("micro_total") + g - 1) // g)
    )
    if old and (counted["epoch"] > 0).any():
        notes.append(
            "the ThroughputTimer before DeepSpeed 0.8 counts micro-steps from 0 each epoch:"
            " later epochs are counted on from the last report of the epoch before (up to"
            " steps_per_print micro-steps short)"
        )
    reports = _launches(counted, starts)
    if not _has_batch(batch):
        return reports.with_columns(step_time_s=pl.lit(None, pl.Float64)).drop("micro_total"), notes
    assert isinstance(batch, int)
    clock = (pl.col("micro_total") - 2) / pl.col("running_avg_samples_per_s")
    before = clock.shift(1).over("launch").fill_null(0.0)
    since = pl.col("micro_total") - pl.col("micro_total").shift(1).over("launch").fill_null(2)
    from_average = pl.when(since > 0).then(batch * (clock - before) / since)
    reports = reports.with_columns(
        step_time_s=pl.coalesce(batch / pl.col("samples_per_s"), from_average)
    )
    return reports.drop("micro_total"), notes


def _micro_steps(throughput: pl.DataFrame, starts: pl.DataFrame) -> pl.DataFrame:
    """The reports with `micro_total`, the micro-steps since their launch: the count printed
    before 0.8 starts again each epoch, so a new epoch carries on from the last count of the
    one before; an engine start, or a count or epoch going back, starts a launch afresh."""
    engines = starts.with_row_index("engine").select("line", pl.col("engine").cast(pl.Int64))
    ordered = throughput.sort("line").join_asof(engines, on="line", strategy="backward")
    epoch, micro, engine = pl.col("epoch"), pl.col("micro_step"), pl.col("engine").fill_null(-1)
    restart = (
        (engine != engine.shift(1))
        | (epoch < epoch.shift(1))
        | ((epoch == epoch.shift(1)) & (micro <= micro.shift(1)))
    )
    ordered = ordered.with_columns(relaunch=restart.fill_null(False).cum_sum())
    new_epoch = epoch > epoch.shift(1).over("relaunch")
    carried = pl.when(new_epoch).then(micro.shift(1).over("relaunch")).otherwise(0).fill_null(0)
    return ordered.with_columns(micro_total=micro + carried.cum_sum().over("relaunch")).drop(
        "engine", "relaunch"
    )


# A logger timestamp with a fraction of a second: the logger prints milliseconds (`,827`).
FRACTION = r"[,.]\d+$"


def stamp_resolution(stamps: pl.Series) -> float | None:
    """The clock resolution of logger timestamps, when coarse enough to matter: 1 s when a
    stamp prints whole seconds (the 2020 logger), None for milliseconds."""
    printed = stamps.drop_nulls()
    return 1.0 if printed.len() and not printed.str.contains(FRACTION).all() else None


def _stamped_step_times() -> pl.Expr:
    """Seconds per step between consecutive step lines of a launch, from their logger
    timestamps (a step line is printed as its step ends)."""
    stamp = to_timestamp(pl.col("stamp"))
    seconds = stamp.diff().over("launch").dt.total_microseconds() / 1e6
    steps = pl.col("iteration").diff().over("launch")
    return pl.when(steps > 0).then(seconds / steps)


def _launches(lines: pl.DataFrame, starts: pl.DataFrame) -> pl.DataFrame:
    """Step lines once each, numbered by launch: each engine start (its configuration
    printout) begins one, and so does the counter going back without one. The copies that
    several ranks or nodes print of a line come together and are dropped."""
    numbered = lines.sort("line").join_asof(
        starts.with_row_index("engine").select("line", pl.col("engine").cast(pl.Int64)),
        on="line",
        strategy="backward",
    )
    numbered = numbered.with_columns(pl.col("engine").fill_null(-1))
    copy = (pl.col("iteration") == pl.col("iteration").shift(1)) & (
        pl.col("engine") == pl.col("engine").shift(1)
    )
    numbered = numbered.filter(~copy.fill_null(False))
    new = (pl.col("engine") != pl.col("engine").shift(1)) | (
        pl.col("iteration") <= pl.col("iteration").shift(1)
    )
    return numbered.with_columns(launch=new.fill_null(False).cum_sum()).drop("engine")


def _timer_records(timers: pl.DataFrame) -> pl.DataFrame:
    """One record per per-step timer report: its ordinal as the step, fwd+bwd+step as time."""
    per_step = timers.filter(pl.col("is_step"))
    if per_step.height == 0:
        return pl.DataFrame(schema={"line": pl.Int64, "iteration": pl.Int64})
    wide = per_step.pivot(on="name", index="line", values="value", aggregate_function="first")
    parts = [c for c in ("timer/fwd", "timer/bwd", "timer/step") if c in wide.columns]
    return wide.sort("line").select(
        "line",
        iteration=pl.int_range(1, pl.len() + 1, dtype=pl.Int64),
        step_time_s=pl.sum_horizontal(parts) / 1000.0,
    )


def _table(records: pl.DataFrame, source: str) -> pl.DataFrame:
    """Segments (a step counter that does not increase), intervals, the contract's schema."""
    if records.height == 0:
        return conform_table(pl.DataFrame())
    records = records.sort("line")
    new_segment = pl.col("iteration") <= pl.col("iteration").shift(1)
    if "launch" in records.columns:
        new_segment = new_segment | (pl.col("launch") != pl.col("launch").shift(1))
    records = records.with_columns(segment=new_segment.fill_null(False).cum_sum().cast(pl.Int32))
    step = pl.col("iteration") - pl.col("iteration").shift(1).over("segment")
    typical = step.drop_nulls().mode().min().over("segment")
    interval = pl.coalesce(step, pl.min_horizontal(typical, pl.col("iteration")), pl.lit(1))
    columns = {
        "timestamp": to_timestamp(pl.col("stamp")) if "stamp" in records.columns else None,
        "interval": interval.clip(lower_bound=1).cast(pl.Int64),
        "source": pl.lit(source),
    }
    records = records.with_columns(**{k: v for k, v in columns.items() if v is not None})
    keep = [c for c in records.columns if c in _TABLE_COLUMNS]
    return conform_table(records.select(keep))


_TABLE_COLUMNS = {
    "iteration",
    "interval",
    "step_time_s",
    "timestamp",
    "loss",
    "lr",
    "samples_per_s",
    "skipped_iterations",
    "mem_allocated_gb",
    "mem_max_allocated_gb",
    "segment",
    "rank",
    "line",
    "source",
}


def _metrics(parts: dict[str, pl.DataFrame], table: pl.DataFrame, source: str) -> pl.DataFrame:
    """The long table: every timer tied to its step, the ThroughputTimer's running average,
    and the flops profiler's figures at their profiled step."""
    timers = _placed_timers(parts["timers"], parts["steps"])
    profiler = parts["profiler"]
    anchors = profiler.filter(pl.col("name") == "profile_step").select(
        "line", iteration=pl.col("value").cast(pl.Int64)
    )
    figures = (
        profiler.filter(pl.col("name") != "profile_step")
        .join_asof(anchors, on="line", strategy="backward")
        .select(
            "line",
            "iteration",
            name=(pl.lit("flops_profiler/") + pl.col("name")).cast(pl.Categorical),
            value="value",
            rank=pl.lit(None, dtype=pl.Int32),
        )
    )
    running = (
        parts["throughput"]
        .join_asof(table.select("line", "iteration").sort("line"), on="line", strategy="backward")
        .select(
            "line",
            "iteration",
            name=pl.lit("deepspeed/running_avg_samples_per_s", dtype=pl.Categorical),
            value="running_avg_samples_per_s",
            rank=pl.lit(None, dtype=pl.Int32),
        )
        .drop_nulls("value")
    )
    long = pl.concat([timers, figures, running]).sort("line", maintain_order=True)
    return conform_metrics(
        long.with_columns(pl.col("name").cast(pl.Categorical), source=pl.lit(source))
    )


def _with_reported(table: pl.DataFrame, metrics: pl.DataFrame) -> pl.DataFrame:
    """The flops profiler's TFLOPS per GPU (`3 * fwd flops / iter latency`; older versions
    print only the fwd+bwd figure) as what DeepSpeed reported, on the profiled step's record."""
    names = ["flops_profiler/tflops_per_gpu", "flops_profiler/fwd_bwd_tflops_per_gpu"]
    reported = (
        metrics.filter(pl.col("name").cast(pl.String).is_in(names))
        .sort(pl.col("name").cast(pl.String).replace_strict(names, [0, 1]), maintain_order=True)
        .unique("iteration", keep="first")
        .select("iteration", printed="value")
    )
    if reported.height == 0:
        return table
    return (
        table.join(reported, on="iteration", how="left", maintain_order="left")
        .with_columns(reported_tflops_per_gpu=pl.col("printed"))
        .select(table.columns)
    )


def _placed_timers(timers: pl.DataFrame, steps: pl.DataFrame) -> pl.DataFrame:
    """Timer rows with their step. The per-step report (`fwd:`) printed right after a
    `step=N` line is step N's (`step=0`, printed at start-up, is followed by step 1's); the
    reports before the first step line count back from it, or from 1 without step lines.
    Micro-step and ZeRO timers belong to the next per-step report."""
    schema = {
        "line": pl.Int64,
        "iteration": pl.Int64,
        "name": pl.Categorical,
        "value": pl.Float64,
    }
    if timers.height == 0:
        return pl.DataFrame(schema={**schema, "rank": pl.Int32})
    reports = (
        timers.filter(pl.col("is_step"))
        .unique("line", maintain_order=True)
        .select("line", count=pl.int_range(1, pl.len() + 1, dtype=pl.Int64))
    )
    if steps.height:
        anchors = (
            steps.select("line", "iteration")
            .join_asof(reports, on="line", strategy="backward")
            .select(
                "line",
                next_step=pl.max_horizontal("iteration", pl.lit(1)),
                before=pl.col("count").fill_null(0),
            )
        )
        back = reports.join_asof(anchors, on="line", strategy="backward")
        ahead = reports.join_asof(anchors, on="line", strategy="forward")
        reports = reports.with_columns(
            iteration=pl.coalesce(
                back["next_step"] + back["count"] - back["before"] - 1,
                ahead["next_step"] - (ahead["before"] - ahead["count"]) - 1,
            )
        )
    else:
        reports = reports.with_columns(iteration=pl.col("count"))
    reports = reports.select(report_line="line", iteration="iteration")
    forward = timers.join_asof(reports, left_on="line", right_on="report_line", strategy="forward")
    backward = timers.join_asof(
        reports, left_on="line", right_on="report_line", strategy="backward"
    )
    return timers.select(
        "line",
        iteration=pl.coalesce(forward["iteration"], backward["iteration"]),
        name="name",
        value="value",
        rank="rank",
    )
