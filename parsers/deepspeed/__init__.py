"""DeepSpeed stdout logs (``deepspeed``/``torchrun`` launches, any rank prefix).

What it reads (the formats are quoted in the project's FORMATS reference):
- the engine's ``[Rank 0] step=N, skipped=K, lr=[...], mom=[...]`` lines (iteration, lr,
  skipped steps: a run's first record has those from step 0) and the ThroughputTimer line
  after each, in every wording it has had (0.3-0.6 ``E/S, SamplesPerSec=R``, 0.7 ``E/S,
  RunningAvgSamplesPerSec=R, CurrSamplesPerSec=C``, 0.8+ ``epoch=E/micro_step=M/
  global_step=G, ...``): the step time from the samples per second and the train batch size
  (``_timer_reports`` says how for each), ``MemAllocated``/``MaxMemAllocated``; without step
  lines the timer's reports are the records; without a batch size, the step time from the
  logger's timestamps (the 2020 logger's ``[INFO date time]`` has whole seconds, stated as
  the clock's resolution);
- the dynamic loss scale from the ``OVERFLOW! ... Attempted loss scale: X, reducing to Y``
  and ``Reducing|Increasing dynamic loss scale from X to Y`` lines;
- the pipeline engine's ``steps: N loss: X iter time (s): T samples/sec: S`` lines, and its
  layout lines (``RANK= STAGE= ... STAGE_PARAMS= TOTAL_PARAMS=``) for the GPU count;
- ``wall_clock_breakdown`` timers (``time (ms) | fwd_microstep: ... | step: ...``) into the
  long table, tied to their step; without step lines (DeepSpeed >= 0.17.6 logs at WARNING
  unless ``"log_level": "info"``) the per-step ``fwd``/``bwd``/``step`` timers are the records;
- the ``DeepSpeedEngine configuration:`` dump (``DeepSpeedLight configuration:`` in 2020,
  printed without the logger), its ``json = {`` config, ``dist_world_size=N``,
  the groups summary (``self.dp_world_size=N``), and a ``ds_config*.json`` beside the log:
  batch sizes, accumulation, ZeRO stage, precision, GPU count, into the run config;
- DeepSpeed-Chat's ``--max_seq_len``/``--per_device_train_batch_size`` on an echoed launch
  command and its ``Model Parameters: ... Sequence Length: N`` lines (not their TFLOPs,
  which are not per GPU);
- the flops profiler's ``Profile Summary at step N`` block, kept as what DeepSpeed reported.

A step counter that does not increase starts a new segment (a relaunch or a resume).
"""

from loganalyzer.parsers.deepspeed.parser import DeepSpeedParser

__all__ = ["DeepSpeedParser"]
