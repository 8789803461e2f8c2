"""What the frameworks call their per-iteration metrics in TensorBoard tags and W&B keys, and
which column of the per-iteration table each one fills.

Names are quoted from each framework's logging code (see the project's FORMATS reference):
Megatron-LM's `training_log`, Megatron-DeepSpeed's, DeepSpeed's monitor, HF Trainer's
`rewrite_logs`, torchtitan's metrics processor, Lightning/NeMo callbacks. A name not listed
here goes to the long metrics table, never away.
"""

from __future__ import annotations

import re

# name → (column, factor from the logged unit to the column's unit)
COLUMNS: dict[str, tuple[str, float]] = {
    # Megatron-LM (TensorBoard and wandb.log use the same names)
    "iteration-time": ("step_time_s", 1.0),
    "lm loss": ("loss", 1.0),
    "learning-rate": ("lr", 1.0),
    "batch-size": ("global_batch_size", 1.0),
    "grad-norm": ("grad_norm", 1.0),
    "loss-scale": ("loss_scale", 1.0),
    "throughput": ("reported_tflops_per_gpu", 1.0),
    "mem-allocated-bytes": ("mem_allocated_gb", 1e-9),
    "mem-max-allocated-bytes": ("mem_max_allocated_gb", 1e-9),
    # Megatron-DeepSpeed (Microsoft: `group/name`; BigScience's iteration-time group)
    "iteration-time/iteration-time": ("step_time_s", 1.0),
    "lm-loss-training/lm loss": ("loss", 1.0),
    "learning-rate/learning-rate": ("lr", 1.0),
    "batch-size/batch-size": ("global_batch_size", 1.0),
    "grad-norm/grad-norm": ("grad_norm", 1.0),
    "loss-scale/loss-scale": ("loss_scale", 1.0),
    "throughput/tflops": ("reported_tflops_per_gpu", 1.0),
    "throughput/samples_per_sec": ("samples_per_s", 1.0),
    "throughput/tokens_per_sec": ("tokens_per_s", 1.0),
    "iteration-time/TFLOPs per gpu (estimated)": ("reported_tflops_per_gpu", 1.0),
    "iteration-time/samples per second": ("samples_per_s", 1.0),
    "iteration-time/tokens per second": ("tokens_per_s", 1.0),
    # DeepSpeed's TensorBoard/CSV/W&B monitor (indexed by samples, see SAMPLE_INDEXED)
    "Train/Samples/train_loss": ("loss", 1.0),
    "Train/Samples/lr": ("lr", 1.0),
    "Train/Samples/loss_scale": ("loss_scale", 1.0),
    # HF Trainer (`train/` prefix from rewrite_logs)
    "train/loss": ("loss", 1.0),
    "train/learning_rate": ("lr", 1.0),
    "train/grad_norm": ("grad_norm", 1.0),
    # torchtitan
    "loss_metrics/global_avg_loss": ("loss", 1.0),
    "grad_norm": ("grad_norm", 1.0),
    "lr": ("lr", 1.0),
    "tflops": ("reported_tflops_per_gpu", 1.0),
    "throughput(tps)": ("tokens_per_s", 1.0),
    "time_metrics/end_to_end(s)": ("step_time_s", 1.0),
    # Lightning / NeMo
    "reduced_train_loss": ("loss", 1.0),
    "train_loss": ("loss", 1.0),
    "train_step_timing in s": ("step_time_s", 1.0),
}

# DeepSpeed's monitor times the phases of a step, never the step: forward + backward + the
# optimizer step is its "iter latency" (what its own flops profiler prints).
STEP_PARTS_MS = (
    "Train/Samples/elapsed_time_ms_forward",
    "Train/Samples/elapsed_time_ms_backward",
    "Train/Samples/elapsed_time_ms_step",
)
SAMPLE_INDEXED_PREFIX = "Train/Samples/"

# Megatron writes each scalar a second time against consumed samples (and tokens, gigaflos):
# the same values on another axis, not read twice.
AXIS_COPY = re.compile(r" vs (samples|tokens|gigaflos.*)$")

# W&B keys that give the iteration (optimizer step) number, best first.
STEP_KEYS = (
    "train/global_step",
    "iteration",
    "iteration_step",
    "global_step",
    "step",
    "trainer/global_step",
)

# Which framework wrote a run, from the names it logged (first match wins).
FRAMEWORK_MARKERS = (
    ("lm-loss-training/", "megatron-deepspeed"),
    ("iteration-time", "megatron-lm"),
    ("lm loss", "megatron-lm"),
    ("Train/Samples/", "deepspeed"),
    ("train/global_step", "hf-trainer"),
    ("train/loss", "hf-trainer"),
    ("loss_metrics/global_avg_loss", "torchtitan"),
    ("reduced_train_loss", "nemo"),
)


def framework_of(names: list[str]) -> str | None:
    """The framework whose metric names these are, None when no name is telling."""
    for marker, framework in FRAMEWORK_MARKERS:
        if any(name.startswith(marker) for name in names):
            return framework
    return None
