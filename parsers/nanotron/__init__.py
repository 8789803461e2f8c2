"""nanotron stdout logs.

What it reads (the formats are quoted in the project's FORMATS reference):
- iteration lines ``iteration: N / M | consumed_tokens: ... | elapsed_time_per_iteration_ms:
  ... | ... | model_tflops_per_gpu: ... | hardware_tflops_per_gpu: ... | grad_norm: ...`` with
  nanotron's K/M/G/T suffixes; the elapsed time is the step time, `model_tflops_per_gpu`
  the reported TFLOPS per GPU, every other field goes to the long table;
- the config it prints at start (``Config(general=..., parallelism=ParallelismArgs(dp=...),
  model=ModelArgs(model_config=LlamaConfig(...)), tokens=TokensArgs(...))``, one logger line
  per pformat line) or a YAML dump of it, and the ``[Start training]`` line: the model's
  shape, sequence length, batch, degrees, precision;
- the logger's prefix, launcher labels, ANSI colours; a `[Start training]` line or a step
  counter that goes back starts a segment.
"""

from loganalyzer.parsers.nanotron.parser import NanotronParser

__all__ = ["NanotronParser"]
