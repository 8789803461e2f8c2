"""DeepSpeed stdout logs (``deepspeed``/``torchrun`` launches, any rank prefix).

What it reads (the formats are quoted in the project's FORMATS reference):
- the engine's ``[Rank 0] step=N, skipped=K, lr=[...], mom=[...]`` lines (iteration, lr,
  skipped steps) and the ThroughputTimer line after each (``CurrSamplesPerSec`` gives the
  step time: train batch size / samples per second; ``MemAllocated``/``MaxMemAllocated``);
- the pipeline engine's ``steps: N loss: X iter time (s): T samples/sec: S`` lines;
- ``wall_clock_breakdown`` timers (``time (ms) | fwd_microstep: ... | step: ...``) into the
  long table, tied to their step; without step lines (DeepSpeed >= 0.17.6 logs at WARNING
  unless ``"log_level": "info"``) the per-step ``fwd``/``bwd``/``step`` timers are the records;
- the ``DeepSpeedEngine configuration:`` dump, ``dist_world_size=N``, and a ``ds_config*.json``
  beside the log: batch sizes, accumulation, ZeRO stage, precision, into the run config;
- the flops profiler's ``Profile Summary at step N`` block, kept as what DeepSpeed reported.

A step counter that does not increase starts a new segment (a relaunch or a resume).
"""

from loganalyzer.parsers.deepspeed.parser import DeepSpeedParser

__all__ = ["DeepSpeedParser"]
