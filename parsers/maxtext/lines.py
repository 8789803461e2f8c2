"""MaxText's stdout lines, a chunk at a time, as frames (polars expressions, no row loops).

MaxText logs through `max_logging.log` (absl): a line may carry an absl prefix
(`I0317 10:00:13.224641 125344476638336 metric_logger.py:181] `), a launcher label, or
none, and a copy pasted as comments carries `# `. Every pattern here is looked for after
whatever precedes it on the line, never anchored at its start.
"""

from __future__ import annotations

import polars as pl

from loganalyzer.textlog import clean, launcher_rank, numbers, strip_launcher

# The step line (MaxText train.py / metric_logger.py; `{:.3f}` values):
#   2023: f"completed step: {step}, seconds: {...:.3f}, TFLOP/s: {...:.3f}, loss: {...:.3f}"
#   2024: "..., TFLOP/s/device: {...:.3f}, loss: {...:.3f}"
#   2024-07 on: "..., TFLOP/s/device: ..., Tokens/s/device: ..., total_weights: ..., loss: ..."
#   2025 on, MoE/MTP/distillation runs: more `, name: value` fields after the loss.
# The fields after the step number are read as `name: value` pairs, whatever their order.
STEP_MARKER = "completed step: "
STEP = r"\bcompleted step: (\d+), (.+?)\s*$"
# `Config param base_emb_dim: 2048` (pyconfig's dump, sorted by key; an empty value prints
# nothing after the colon).
CONFIG_MARKER = "Config param "
CONFIG = r"\bConfig param (\w+):(.*)$"
# `System Information: Jax Version: 0.4.25` (max_utils.print_system_information).
SYSTEM_MARKER = "System Information: "
SYSTEM = r"\bSystem Information: (Jax Version|Jaxlib Version|Jax Backend): ?(.*?)\s*$"
# The TPU runtime's platform version, printed as the backend (`Jax Backend: PJRT C API`)
# over several lines: `TFRT TPU v6 lite` on the next one, then `Built on ...`; a log
# collector that joined them keeps it on the backend's line.
TPU_KIND = r"(?:^|\s)TFRT (TPU.*?)(?:\s+Built on\b.*)?\s*$"
# A GPU's name, as XLA logs each device when its CUDA client starts (xla/service/service.cc:
# `LOG(INFO) << StrFormat("  StreamExecutor device (%d): %s, %s", i, description.name(),
# description.platform_version())`, `NVIDIA H100 80GB HBM3, Compute Capability 9.0`).
GPU_MARKER = "StreamExecutor device "  # a literal, found before GPU_KIND reads the line
GPU_KIND = r"\bStreamExecutor device \(\d+\): (.+?), (?:Compute Capability|CUDA|ROCm|rocm)"
# `Num_devices: 8, shape (1, 8, 1, 1, 1, 1)`: the device count, and the device mesh's
# shape, one size per axis of `mesh_axes`.
DEVICES_MARKER = "Num_devices: "
DEVICES = r"\bNum_devices: (\d+)(?:, shape \(([\d, ]*)\))?"

# What a step line's fields are in the per-iteration table; the rest go to the long table.
COLUMNS = {
    "seconds": "step_time_s",
    "TFLOP/s/device": "reported_tflops_per_gpu",
    "TFLOP/s": "reported_tflops_per_gpu",  # 2023's wording of the same per-device figure
    "loss": "loss",
}


def candidates(frame: pl.DataFrame) -> pl.DataFrame:
    """The chunk's lines that may matter, launcher label and colours removed, with the rank
    the label names."""
    text = pl.col("text")
    markers = [STEP_MARKER, CONFIG_MARKER, SYSTEM_MARKER, DEVICES_MARKER, "TFRT TPU", GPU_MARKER]
    return (
        frame.filter(text.str.contains_any(markers))
        .with_columns(launcher_rank(text))
        .with_columns(clean(strip_launcher(text)).alias("text"))
    )


def step_fields(frame: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The step lines: (line, rank, iteration) a line, and their fields long, as
    (line, name, value) with the value a number (`nan` too)."""
    text = pl.col("text")
    found = (
        frame.filter(text.str.contains(STEP_MARKER, literal=True))
        .with_columns(m=text.str.extract_groups(STEP))
        .filter(pl.col("m").struct.field("1").is_not_null())
    )
    steps = found.select(
        "line",
        "rank",
        iteration=pl.col("m").struct.field("1").cast(pl.Int64, strict=False),
    )
    pairs = (
        found.select("line", field=pl.col("m").struct.field("2").str.split(", "))
        .explode("field")
        .with_columns(kv=pl.col("field").str.splitn(":", 2))
        .select(
            "line",
            name=pl.col("kv").struct.field("field_0").str.strip_chars(),
            printed=pl.col("kv").struct.field("field_1"),
        )
        .filter(pl.col("printed").is_not_null() & (pl.col("name") != ""))
    )
    return steps, numbers(pairs, "printed", "value").drop_nulls("value")


def config_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The config dump, the system information and the device count, as (line, key, value)
    text: `Config param` keys as printed; `jax_version`, `jaxlib_version`, `jax_backend`,
    `device_kind` (a TPU's, from its runtime's version; a GPU's, from XLA's device line),
    `num_devices`, `mesh_shape`."""
    text = pl.col("text")
    m = pl.col("m").struct
    dump = (
        frame.filter(text.str.contains(CONFIG_MARKER, literal=True))
        .with_columns(m=text.str.extract_groups(CONFIG))
        .filter(m.field("1").is_not_null())
        .select("line", key=m.field("1"), value=m.field("2").str.strip_chars())
    )
    system = (
        frame.filter(text.str.contains(SYSTEM_MARKER, literal=True))
        .with_columns(m=text.str.extract_groups(SYSTEM))
        .filter(m.field("1").is_not_null())
        .select(
            "line",
            key=m.field("1").str.to_lowercase().str.replace(" ", "_", literal=True),
            value=m.field("2"),
        )
    )
    tpu = (
        frame.filter(text.str.contains("TFRT TPU", literal=True))
        .select("line", key=pl.lit("device_kind"), value=text.str.extract(TPU_KIND))
        .drop_nulls("value")
    )
    gpu = (
        frame.filter(text.str.contains(GPU_MARKER, literal=True))
        .select("line", key=pl.lit("device_kind"), value=text.str.extract(GPU_KIND))
        .drop_nulls("value")
    )
    devices = (
        frame.filter(text.str.contains(DEVICES_MARKER, literal=True))
        .with_columns(m=text.str.extract_groups(DEVICES))
        .filter(m.field("1").is_not_null())
    )
    counts = devices.select("line", key=pl.lit("num_devices"), value=m.field("1"))
    shapes = devices.select("line", key=pl.lit("mesh_shape"), value=m.field("2")).drop_nulls()
    return pl.concat([dump, system, tpu, gpu, counts, shapes])
