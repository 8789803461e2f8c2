"""The literal marks of the lines the Megatron parser reads; every other line is skipped
unparsed, and no regular expression sees it."""

from __future__ import annotations

from loganalyzer.parsers.megatron.command import COMMAND_MARKS

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
    ".. ",  # an argument line outside a dump (`  num_layers ...... 24`)
    *COMMAND_MARKS,  # a launch command's options, its lines continued with ` \`
)

CANDIDATES = ("iteration", *OTHER_MARKS)
