"""Declared formats: a training loop that prints its own line a step is read from a small
TOML file that names the line's pattern and fields, without writing a parser.

A format file is given to a command with ``--format-file FILE`` (repeatable), or shipped by
a package as a data-only plugin, an entry point of the ``loganalyzer.parsers`` group that
names a TOML resource of an importable package::

    [project.entry-points."loganalyzer.parsers"]
    my_loop = "my_package.formats:my_loop.toml"

loganalyzer registers the formats it ships (``loganalyzer/declared/formats``) the same way;
``loganalyzer parsers`` lists them with the versions their tests read.

The schema (every key is checked when the file is loaded; a mistake is refused with one
line naming the file and the key, exit 1)::

    name = "my_loop"                 # required: lowercase letters, digits, '-', '_'
    description = "..."              # required: one line, shown by `loganalyzer parsers`
    tested_on = ["my_loop 1.2"]      # the versions whose real output was read with it
    framework = "my_loop"            # the run's framework (default: name)
    notes = ["..."]                  # said as warnings on every run read with it
    metrics = ["val_bpb"]            # free groups, kept as long-table metrics "<name>/<group>"

    [record]                         # required: the line printed for a step
    pattern = 'step (?P<iteration>\\d+) .* time (?P<step_time>[\\d.]+)ms'
    [record.fields.step_time]        # options of a field the pattern names
    unit = "ms"                      # s, ms, us, min; GB, GiB, MB, MiB; percent, fraction
    placeholders = [-100.0]          # printed values meaning "not measured yet"
    per = "step"                     # step_time only: "micro_step" (see below)

    [[lines]]                        # other lines with metrics (e.g. validation)
    pattern = 'step (?P<iteration>\\d+) val_bpb:(?P<val_bpb>[\\d.]+)'

    [[config]]                       # lines that state run facts, groups named by fact
    pattern = 'world_size:(?P<num_gpus>\\d+)'

    [fixed]                          # facts the log never prints
    gpu_name = "NVIDIA H100 80GB HBM3"

Patterns are regular expressions of the engine polars uses (Rust ``regex``: no
look-around or back-references), matched anywhere in a line after ANSI colour codes and a
launcher label (``[rank3]:``, srun's ``3:``, a Kubernetes timestamp) are taken off; anchor
with ``^`` to match at the start. Each named group is a field; unnamed groups are free.
Values are read as printed numbers: ``1,234.5``, ``1.2e-4``, ``nan``, ``3.4K`` / ``1.2M`` /
``7B`` (suffixes scale by 1e3, 1e6, 1e9).

Record fields, by kind:

- counters: ``iteration`` (required; the optimizer step: a record repeated by several
  ranks is read once, a step number that does not increase starts a new segment, a
  restart), ``train_iters`` (the planned total, kept as a run fact), ``micro_step`` (a
  micro-batch counter printed beside the step, as litgpt's ``iter``).
- a step time: ``step_time``, seconds of one step; with ``per = "micro_step"`` it is one
  micro-batch's time and is multiplied by the micro-batches per step (the differences of
  ``micro_step`` over those of ``iteration`` between records).
- a cumulative clock: ``train_time``, the time since training started (modded-nanogpt's
  ``train_time:21345ms``). A step's time is the difference of two records' clocks over the
  steps between them; the first record of each segment, and a record whose clock went back
  (a clock reset), are untimed and the run's warnings say so. A format with neither
  ``step_time`` nor ``train_time`` and a ``timestamp`` uses the records' times as its clock.
- figures: ``loss``, ``lr``, ``grad_norm``, ``loss_scale``, ``global_batch_size``,
  ``tokens`` (per step), ``samples_per_s``, ``tokens_per_s``, ``reported_tflops`` (the
  framework's own TFLOPS per GPU), ``skipped_iterations``, ``nan_iterations``.
- a ratio: ``mfu``, the framework's own MFU (unit ``percent`` or ``fraction``), kept in the
  long metrics table as ``reported_mfu``, a fraction.
- memory: ``mem_allocated_gb``, ``mem_max_allocated_gb`` (unit required).
- ``timestamp``: when the line was printed (``2024-01-02 03:04:05[.fff][+08:00]``; a time
  without a zone is read as UTC).

A group ``<field>_unit`` beside a time or memory field carries the unit the line prints
(``train_time:(?P<train_time>[\\d.]+)(?P<train_time_unit>ms|s)``); it wins over ``unit``.

Run facts a ``[[config]]`` group or ``[fixed]`` key may name: the model shape and run facts
named like Megatron-LM arguments (``num_layers``, ``hidden_size``, ``ffn_hidden_size``,
``num_attention_heads``, ``num_query_groups``, ``kv_channels``, ``seq_length``,
``padded_vocab_size``, ``swiglu``, ``num_experts``, ``moe_router_topk``,
``moe_ffn_hidden_size``, ``global_batch_size``, ``micro_batch_size``, ``num_gpus``,
``world_size``, the ``*_parallel_size`` facts, ``dtype``, ``recompute``, ``gpu_name``), and
``vocab_size``, ``params``, ``train_iters``, ``framework_version``, ``batch_tokens`` (the
batch in tokens: with ``seq_length`` it gives the global batch in sequences, when the log
states none). The first line that states a fact readably gives it; ``[fixed]`` fills only
what the log does not state.

Detection: a declared format claims a file only when its record pattern matches lines in
the head, and below every built-in parser's claim (but the bare ending reader's): a file a
framework parser finds records in is that parser's. Of two declared formats, the one whose
pattern matches more head lines is tried first; equal claims that both read records are a
tie (exit 3; ``--format NAME`` chooses).
"""

from loganalyzer.declared.parser import (
    DeclaredParser,
    from_entry_point,
    given_formats,
    load_format_file,
)
from loganalyzer.declared.schema import DeclaredFormat, parse_format

__all__ = [
    "DeclaredFormat",
    "DeclaredParser",
    "from_entry_point",
    "given_formats",
    "load_format_file",
    "parse_format",
]
