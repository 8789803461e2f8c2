"""The DeepSpeed lines worth reading, found in one chunk of a log at a time (polars, no row
loops). Each function takes the chunk's candidate lines (line, rank, text, stamp) and returns
one row per line it recognises; the file-level assembly ties them together."""

from __future__ import annotations

import polars as pl

from loganalyzer.textlog import NUMBER, clean, launcher_rank, numbers, strip_launcher

# Literal markers of the lines read; every other line is skipped unparsed.
CANDIDATES = (
    "step=",
    "SamplesPerSec",
    "time (ms)",
    "iter time (s)",
    ":print]",
    "dist_world_size=",
    "_world_size=",
    "sequence_parallel_size=",
    "Profile Summary at step",
    " per GPU",
    "latency:",
    "samples/second:",
    "world size:",
    "loss scale",
    "configuration:",
    "STAGE_PARAMS=",
    "--max_seq_len",
    "--per_device_train_batch_size",
    "Sequence Length: ",
)

# The logger's prefix `[2026-11-22 00:19:05,827] [INFO] [logging.py:123:log_dist] `.
LOGGER_STAMP = r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+)\] \[[A-Z]+\] \[[^\]]*\]"
# DeepSpeed's logger of 2020 (0.1-0.2, deepspeed.pt): level first, whole seconds, as in
# its CIFAR-10 tutorial's output and issue #255: `[INFO 2020-02-06 19:53:56] 0/50, ...`.
LEGACY_STAMP = r"\[[A-Z]+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\] "

STEP = r"\bstep=(\d+), skipped=(\d+), lr=\[([^\],]*)"
# The ThroughputTimer's line in every wording it has had (deepspeed/utils/timer.py):
#   0.3-0.5  "{}/{}, SamplesPerSec={}"  (epoch / micro-steps this epoch, running average)
#   0.6      "{}/{}, SamplesPerSec={}, MemAllocated={}GB, MaxMemAllocated={}GB"
#   0.7      "{}/{}, RunningAvgSamplesPerSec={}, CurrSamplesPerSec={}, MemAllocated={}GB, ..."
#   0.8+     "epoch={}/micro_step={}/global_step={}, RunningAvgSamplesPerSec={},"
#            " CurrSamplesPerSec={},"
#            " MemAllocated={}GB, MaxMemAllocated={}GB"
THROUGHPUT = (
    r"(?:epoch=(\d+)/micro_step=(\d+)/global_step=(\d+)|(?:^|[\s\]:])(\d+)/(\d+)), "
    r"(?:RunningAvgSamplesPerSec=([^,\s]+), CurrSamplesPerSec=([^,\s]+)|SamplesPerSec=([^,\s]+))"
    r"(?:, MemAllocated=([\d.]+)GB, MaxMemAllocated=([\d.]+)GB)?"
)
PIPELINE = rf"steps: (\d+) loss: ({NUMBER}) iter time \(s\): ({NUMBER}) samples/sec: ({NUMBER})"
# The dynamic loss scaler's changes (fp16 only): `[deepspeed] OVERFLOW! [Rank 0 ]Skipping step.
# Attempted loss scale: 1048576, reducing to 524288` (ZeRO and the fp16 optimizers, with
# `..., but hysteresis is 2. Reducing hysteresis to 1` when it holds), and the fp16
# optimizers' `Reducing|Increasing dynamic loss scale from 4096.0 to 2048.0`.
LOSS_SCALE = (
    rf"(?:Attempted loss scale: |dynamic loss scale from )({NUMBER})"
    rf"(?:,? (?:reducing )?to ({NUMBER}))?"
)
ENGINE_CONFIG = r"\[config\.py:\d+:print\]\s+(\w+) \.*\s(.*?)\s*$"
WORLD = r"\bdist_world_size=(\d+)"
# The engine's `distributed groups summary` (DeepSpeed >= 0.17, rank 0): `\t self.dp_world_size=8`.
GROUPS = r"\bself\.(dp_world_size|mp_world_size|seq_dp_world_size|sequence_parallel_size)=(\d+)"
# The pipeline engine's layout line, printed by each rank of the first data-parallel group
# (runtime/pipe/engine.py): `RANK=0 STAGE=0 LAYERS=22 [0, 22) STAGE_PARAMS=57044810
# (57.045M) TOTAL_PARAMS=57044810 (57.045M) UNIQUE_PARAMS=...`, TOTAL_PARAMS summed over
# the rank's model-parallel group (its stages x tensor slices). Newer versions break the
# line after `STAGE={}/{}`, so RANK may be on a line before.
STAGE_PARAMS = r"(?:RANK=(\d+) .*)?STAGE_PARAMS=(\d+) \([^)]*\) TOTAL_PARAMS=(\d+)"
# DeepSpeed-Chat (DeepSpeedExamples applications/DeepSpeed-Chat): its scripts' arguments on a
# launch command echoed into the log (DeepSpeed's runner logs `cmd = ... main.py --data_path
# ... --max_seq_len 512 ...`; scripts echo `cmd = deepspeed main.py ...`), and the throughput
# line steps 1 and 2 print after each micro-step (dschat/utils/perf.py print_throughput):
# `Model Parameters: {} B, Latency: {:.2f}s, TFLOPs: {:.2f}, Samples/sec: {:.2f}, Time/seq
# {:.2f}s, Batch Size: {per_device_train_batch_size}, Sequence Length: {max_seq_len}`.
# (pattern, key, the literal a line needs first)
CHAT_ARGUMENTS = (
    (r"\.py\s.*?--max_seq_len[= ](\d+)\b", "chat_max_seq_len", "--max_seq_len"),
    (
        r"\.py\s.*?--per_device_train_batch_size[= ](\d+)\b",
        "chat_micro_batch",
        "--per_device_train_batch_size",
    ),
)
CHAT_THROUGHPUT = (
    r"Model Parameters: .*?, Latency: [\d.]+s, TFLOPs: [\d.]+, Samples/sec: [\d.]+,"
    r" Time/seq [\d.]+s, Batch Size: (\d+), Sequence Length: (\d+)"
)
PROFILE_STEP = r"Profile Summary at step (\d+):"
# `label:   value unit` rows of the profiler's summary, as printed (`{:<70}  {:<8}`).
PROFILE_ROW = r"^(world size|data parallel size|model parallel size|batch size per GPU|params per GPU|fwd latency|bwd latency|step latency|iter latency|samples/second|FLOPS per GPU = 3 \* fwd flops per GPU / iter latency|fwd\+bwd FLOPS per GPU = 3 \* fwd flops per GPU / \(fwd\+bwd latency\)):\s+(.*?)\s*$"  # noqa: E501
PROFILE_NAMES = {
    "world size": "world_size",
    "data parallel size": "data_parallel_size",
    "model parallel size": "model_parallel_size",
    "batch size per GPU": "batch_size_per_gpu",
    "params per GPU": "params_per_gpu",
    "fwd latency": "fwd_latency_s",
    "bwd latency": "bwd_latency_s",
    "step latency": "step_latency_s",
    "iter latency": "iter_latency_s",
    "samples/second": "samples_per_s",
    "FLOPS per GPU = 3 * fwd flops per GPU / iter latency": "tflops_per_gpu",
    "fwd+bwd FLOPS per GPU = 3 * fwd flops per GPU / (fwd+bwd latency)": "fwd_bwd_tflops_per_gpu",
}
# The profiler prints humanised values: `988.72 us`, `525.57 K`, `11.68 GFLOPS`.
UNIT_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
TIME_SCALE = {"s": 1.0, "ms": 1e-3, "us": 1e-6}


def candidates(frame: pl.DataFrame) -> pl.DataFrame:
    """The chunk's lines that may matter, launcher prefix and colours removed, with the
    logger's timestamp (text) where the line has one."""
    text = pl.col("text")
    return (
        frame.filter(text.str.contains_any(list(CANDIDATES)))
        .with_columns(launcher_rank(text))
        .with_columns(clean(strip_launcher(text)).alias("text"))
        .with_columns(
            stamp=pl.coalesce(
                pl.col("text").str.extract(LOGGER_STAMP),
                pl.col("text").str.extract(LEGACY_STAMP),
            )
        )
    )


def _matching(
    frame: pl.DataFrame, pattern: str, *literals: str, filled: tuple[str, ...] = ("1",)
) -> pl.DataFrame:
    """The lines `pattern` matches (its groups in the struct `m`; a match fills one of the
    groups `filled` at least); when given, a cheap literal test first keeps the regex off
    the (many) lines that cannot match."""
    if literals:
        frame = frame.filter(pl.col("text").str.contains_any(list(literals)))
    m = pl.col("m").struct
    return frame.with_columns(m=pl.col("text").str.extract_groups(pattern)).filter(
        pl.any_horizontal(m.field(group).is_not_null() for group in filled)
    )


def step_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """`[Rank 0] step=N, skipped=K, lr=[...]`: the step number, skips and the first group's lr."""
    m = pl.col("m").struct
    return _matching(frame, STEP, "step=").select(
        "line",
        "rank",
        "stamp",
        iteration=m.field("1").cast(pl.Int64),
        skipped_total=m.field("2").cast(pl.Int64),
        lr=m.field("3").str.strip_chars().cast(pl.Float64, strict=False),
    )


def throughput_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """The ThroughputTimer's report, printed every `steps_per_print` steps: DeepSpeed >= 0.8
    counts optimizer steps (`global_step`, null before) and micro-steps; before 0.8 the
    count is of micro-steps in the current epoch (`micro_step`, `timer_step` null). Before
    0.7 only the running average (`running_avg_samples_per_s`) is printed, no current rate."""
    m = pl.col("m").struct
    number = pl.Float64
    return _matching(frame, THROUGHPUT, "SamplesPerSec", filled=("6", "8")).select(
        "line",
        "stamp",
        timer_step=m.field("3").cast(pl.Int64),
        micro_step=pl.coalesce(m.field("2"), m.field("5")).cast(pl.Int64),
        epoch=pl.coalesce(m.field("1"), m.field("4")).cast(number),
        running_avg_samples_per_s=pl.coalesce(m.field("6"), m.field("8")).cast(
            number, strict=False
        ),
        samples_per_s=m.field("7").cast(number, strict=False),
        mem_allocated_gb=m.field("9").cast(number, strict=False),
        mem_max_allocated_gb=m.field("10").cast(number, strict=False),
    )


def loss_scale_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """Each printed change of the dynamic loss scale: the scale before and after it (the
    same when the scaler's hysteresis holds it)."""
    m = pl.col("m").struct
    before = m.field("1").cast(pl.Float64, strict=False)
    return _matching(frame, LOSS_SCALE, "loss scale").select(
        "line",
        scale_before=before,
        scale_after=pl.coalesce(m.field("2").cast(pl.Float64, strict=False), before),
    )


def pipeline_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """The pipeline engine's `steps: N loss: X iter time (s): T samples/sec: S`."""
    m = pl.col("m").struct
    return _matching(frame, PIPELINE, "iter time (s)").select(
        "line",
        "rank",
        "stamp",
        iteration=m.field("1").cast(pl.Int64),
        loss=m.field("2").cast(pl.Float64, strict=False),
        step_time_s=m.field("3").cast(pl.Float64, strict=False),
        samples_per_s=m.field("4").cast(pl.Float64, strict=False),
    )


def chat_facts(frame: pl.DataFrame) -> pl.DataFrame:
    """DeepSpeed-Chat's sequence length and per-GPU batch, as (line, key, value) rows: from an
    echoed launch command's arguments and from its throughput lines (`chat_throughput`
    marks that the log has them)."""
    rows = [
        _matching(frame, pattern, literal).select(
            "line", key=pl.lit(key), value=pl.col("m").struct.field("1")
        )
        for pattern, key, literal in CHAT_ARGUMENTS
    ]
    printed = _matching(frame, CHAT_THROUGHPUT, "Sequence Length: ")
    m = pl.col("m").struct
    rows += [
        printed.select("line", key=pl.lit("chat_micro_batch"), value=m.field("1")),
        printed.select("line", key=pl.lit("chat_max_seq_len"), value=m.field("2")),
        printed.select("line", key=pl.lit("chat_throughput"), value=pl.lit("")),
    ]
    return pl.concat(rows)


def stage_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """The pipeline engine's layout lines: the rank (when on the line), its parameters and
    its model-parallel group's."""
    m = pl.col("m").struct
    return _matching(frame, STAGE_PARAMS, "STAGE_PARAMS=", filled=("2",)).select(
        "line",
        stage_rank=m.field("1").cast(pl.Int64),
        stage_params=m.field("2").cast(pl.Int64),
        total_params=m.field("3").cast(pl.Int64),
    )


def timer_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """`time (ms) | name: value | ...` → one row per timer (`timer/<name>`, in ms). `is_step`
    marks the per-step report (it has `fwd:`), the others are micro-step or ZeRO timers.
    These are most of a log's lines: literal splits, and a regex only for odd values."""
    marker = "time (ms) |"
    timers = frame.filter(pl.col("text").str.contains(marker, literal=True)).select(
        "line",
        "rank",
        is_step=pl.col("text").str.contains("| fwd: ", literal=True),
        field=pl.col("text").str.splitn(marker, 2).struct.field("field_1").str.split("|"),
    )
    pairs = (
        timers.explode("field")
        .with_columns(kv=pl.col("field").str.splitn(":", 2))
        .select(
            "line",
            "rank",
            "is_step",
            name=pl.lit("timer/") + pl.col("kv").struct.field("field_0").str.strip_chars(),
            printed=pl.col("kv").struct.field("field_1"),
        )
        .filter(pl.col("printed").is_not_null() & (pl.col("name") != "timer/"))
    )
    return (
        numbers(pairs, "printed", "value")
        .drop_nulls("value")
        .with_columns(pl.col("name").cast(pl.Categorical))
    )


def engine_config(frame: pl.DataFrame) -> pl.DataFrame:
    """`DeepSpeedEngine configuration:` rows (`  name ........ value`), the launcher's
    `dist_world_size=N` and the engine's groups summary, as (line, key, value) text."""
    dump = _matching(frame, ENGINE_CONFIG, ":print]").select(
        "line", key=pl.col("m").struct.field("1"), value=pl.col("m").struct.field("2")
    )
    world = _matching(frame, WORLD, "dist_world_size=").select(
        "line", key=pl.lit("dist_world_size"), value=pl.col("m").struct.field("1")
    )
    groups = _matching(frame, GROUPS, "self.").select(
        "line", key=pl.col("m").struct.field("1"), value=pl.col("m").struct.field("2")
    )
    return pl.concat([dump, world, groups])


# The user's config as the printout's `json = {` shows it (sorted, indent 4): a precision
# section opens a line, its `enabled` is on the next (`"fp16": {` / `"enabled": true, `;
# newer versions print without spaces, `"fp16":{`), or on the same line when inline; behind
# a pdsh label (`worker-0: `) as well.
JSON_SECTION = r'^(?:[\w.-]+: )?\s*"(fp16|bf16|bfloat16)":\s?\{\s*(?:"enabled":\s?(true|false))?'
JSON_ENABLED = r'^(?:[\w.-]+: )?\s*"enabled":\s?(true|false)'


def json_precision(frame: pl.DataFrame) -> pl.DataFrame:
    """The printed config JSON's `"fp16"`/`"bf16"` sections, as (line, key, value) rows
    (`json_fp16`, `True`) beside the printout's own flags. Read from the whole chunk (the
    JSON's lines carry no logger prefix); a section cut by a chunk's end is not read."""
    text = pl.col("text")
    found = frame.select(
        "line",
        m=text.str.extract_groups(JSON_SECTION),
        next_enabled=text.shift(-1).str.extract(JSON_ENABLED),
    ).filter(pl.col("m").struct.field("1").is_not_null())
    name = pl.col("m").struct.field("1").replace({"bfloat16": "bf16"})
    enabled = pl.coalesce(pl.col("m").struct.field("2"), "next_enabled")
    return found.filter(enabled.is_not_null()).select(
        "line",
        key=pl.lit("json_") + name,
        value=pl.when(enabled == "true").then(pl.lit("True")).otherwise(pl.lit("False")),
    )


# The printout's heading: `DeepSpeedLight configuration:` (0.1-0.2, the engine's old name)
# or `DeepSpeedEngine configuration:`, behind the logger's prefix from 0.3 on.
PRINTOUT_HEADINGS = ["DeepSpeedEngine configuration:", "DeepSpeedLight configuration:"]
# A row of a printout printed without the logger (`print('  {} {} {}'.format(arg, dots,
# value))`, dots to column 29): `  train_batch_size ............. 4`, and with no dots for a
# name of 29 characters or more, `  train_micro_batch_size_per_gpu  4`; behind a pdsh label
# (`worker-0:   train_batch_size ...`) as well; an empty value prints dots alone.
PRINTOUT_SPAN = 400  # lines after a heading that may be its rows (2020 printed about 25)
PLAIN_ROW = r"^(?:[\w.-]+: )?  (\w+) (?:\.+ ?|\s)(.*?)\s*$"


def engine_starts(frame: pl.DataFrame) -> pl.DataFrame:
    """The lines where an engine starts (its configuration printout's heading)."""
    return frame.filter(pl.col("text").str.contains_any(PRINTOUT_HEADINGS)).select("line")


def plain_printout(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of a configuration printout printed without the logger's prefix (DeepSpeed
    before 0.3), as (line, key, value): the rows right after the heading, to the first line
    that is not one (`  json = {`). Only there: Megatron's `arguments:` dump has the same
    rows, and its `world_size` is not DeepSpeed's. A printout cut by a chunk's end is read
    to the cut; only the lines just after a heading are tried (a printout has fewer)."""
    text = clean(strip_launcher(pl.col("text")))
    plain = text.str.contains_any(PRINTOUT_HEADINGS) & ~text.str.contains(":print]", literal=True)
    heads = frame.filter(plain).select("line", head_line="line").sort("line")
    near = frame.sort("line").join_asof(heads, on="line", strategy="backward")
    near = near.filter(pl.col("line") - pl.col("head_line") < PRINTOUT_SPAN)
    rows = near.select("line", "head_line", m=text.str.extract_groups(PLAIN_ROW))
    is_row = pl.col("m").struct.field("1").is_not_null()
    ended = (~is_row & (pl.col("line") != pl.col("head_line"))).cum_sum().over("head_line")
    return rows.filter(is_row & (ended == 0)).select(
        "line", key=pl.col("m").struct.field("1"), value=pl.col("m").struct.field("2")
    )


def profiler_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The flops profiler's summary: `Profile Summary at step N` rows (value = N, name
    `profile_step`) and its figures, in base units (seconds, TFLOPS, counts)."""
    steps = _matching(frame, PROFILE_STEP, "Profile Summary").select(
        "line", name=pl.lit("profile_step"), value=pl.col("m").struct.field("1").cast(pl.Float64)
    )
    rows = _matching(frame, PROFILE_ROW, *PROFILE_NAMES).with_columns(
        label=pl.col("m").struct.field("1"),
        parts=pl.col("m").struct.field("2").str.extract_groups(rf"^({NUMBER})\s*([KMGTP]?)(\S*)"),
    )
    number = pl.col("parts").struct.field("1").cast(pl.Float64, strict=False)
    prefix = pl.col("parts").struct.field("2")
    unit = pl.col("parts").struct.field("3")
    scale = prefix.replace_strict(UNIT_SCALE, default=1.0, return_dtype=pl.Float64)
    value = (
        pl.when(unit.is_in(list(TIME_SCALE)))
        .then(number * unit.replace_strict(TIME_SCALE, default=1.0, return_dtype=pl.Float64))
        .when(unit == "FLOPS")
        .then(number * scale / 1e12)
        .otherwise(number * scale)
    )
    figures = rows.select(
        "line",
        name=pl.col("label").replace_strict(PROFILE_NAMES, return_dtype=pl.String),
        value=value,
    )
    return pl.concat([steps, figures.drop_nulls("value")])
