"""MaxText stdout logs (TPU and GPU), in the wordings of its releases since 2023.

What it reads (the format strings are quoted in `lines`):
- the step lines, `completed step: N, seconds: S, TFLOP/s/device: T, Tokens/s/device: K,
  total_weights: W, loss: L` (2023's `TFLOP/s: T` and the lines without `Tokens/s/device`
  too), after an absl prefix, a launcher label, or nothing: the step time, the loss, and the
  per-device TFLOP/s MaxText computed from its own FLOPs count, kept as reported; every other
  field to the long table;
- the config dump (`Config param KEY: VALUE`), every key kept as printed, and the model's
  shape, batch, precision, recomputation and parallelism under the names the FLOPs formula
  reads (see `config`);
- `System Information:` (JAX and jaxlib versions, backend; a TPU's kind, `TPU v6 lite`, from
  its runtime's version), a GPU's name from XLA's `StreamExecutor device (0): ...` line, and
  `Num_devices: N, shape (...)`;
- how the run ended (tracebacks, launcher and scheduler lines).

A step number that does not increase starts a new segment (a restart).
"""

from loganalyzer.parsers.maxtext.parser import MaxTextParser

__all__ = ["MaxTextParser"]
