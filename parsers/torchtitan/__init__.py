"""torchtitan stdout logs, 2024 to today.

What it reads (the step line's format string is quoted in the project's FORMATS reference):
- step lines ``step: N  loss: L  [grad_norm: G]  memory: M GiB(P%)  tps|wps: T  [tflops: F]
  mfu: U%``, with or without the ``[titan]`` logger tag, torchrun's ``[rankN]:`` label and
  ANSI colours; the copies every rank prints (one rank's kept); `tflops` is the reported
  TFLOPS per GPU, `tps`, `mfu` and memory go to the long table;
- the start-up: ``Building <model> <flavor> with ModelArgs(...)`` (the shape; flavors whose
  shape torchtitan fixes map to presets when no ModelArgs is printed), the tokenizer's
  ``#words``, the device mesh (``Building 2-D device mesh with ['dp_shard', 'tp'], [4, 2]`` or
  ``pp=1, dp_replicate=1, dp_shard=8, cp=1, tp=1``: the parallelism and world size), the
  batch and sequence length (``Training starts at step 1, with local batch size ...`` or
  ``Trainer is initialized with ...``), ``CUDA capacity: <GPU> with ...``, the peak it uses
  for MFU, activation checkpointing, and a job-config TOML echoed into the log.

Step times come from the logger timestamps of consecutive step lines (torchtitan prints
none); a launch (``Training starts at step``) or a step counter that goes back starts a
segment.
"""

from loganalyzer.parsers.torchtitan.parser import TorchtitanParser

__all__ = ["TorchtitanParser"]
