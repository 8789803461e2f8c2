"""The literal marks of the lines the Megatron parser reads; every other line is skipped
unparsed, and no regular expression sees it."""

from __future__ import annotations

from loganalyzer.parsers.megatron.command import COMMAND_MARKS

# The names nvidia-smi gives data-centre GPUs (`NVIDIA A100-SXM4-80GB`, before 2021
# `Tesla V100-SXM2-32GB`), in its table or list printed into a job's log.
GPU_MARKS = ("NVIDIA ", "Tesla ")

# Marks of the lines read besides iteration lines: memory and timer reports, start-up facts,
# checkpoint saves and evaluations.
OTHER_MARKS = (
    "memory (MB)",
    "time (ms)",
    ".:",
    "world size",
    "padded vocab",
    "parameters",
    "batch_size",
    "gradient_accumulation_steps",
    "saving checkpoint",
    "validation",
    "Tera Flops",  # Megatron-DeepSpeed's `Effective Tera Flops per GPU: v` below an iteration
    *GPU_MARKS,
    ".. ",  # an argument line outside a dump (`  num_layers ...... 24`)
    *COMMAND_MARKS,  # a launch command's options, its lines continued with ` \`
)

CANDIDATES = ("iteration", *OTHER_MARKS)
