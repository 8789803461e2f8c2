"""Weights & Biases runs: offline and synced run folders, and runs named by ID.

- framing (`transaction_log`): the `.wandb` LevelDB-style log, CRC-checked, resynchronised at
  the next block after damage, a cut-off tail keeps everything before it;
- records (`records`): history, config, summary, environment (GPU), system metrics, exit,
  decoded with the installed wandb's `wandb_internal_pb2` (readable from 0.16 to today);
- history (`history`): the iteration from the run's step metric, else `_step`; names mapped
  by `loganalyzer.parsers.metric_names`.
"""

from loganalyzer.parsers.wandb.parser import WandbParser

__all__ = ["WandbParser"]
