"""TensorBoard event files: every scalar, both encodings, text and hparams as config.

- framing (`tfrecord`): CRC-checked, resynchronised after a damaged record, a cut-off tail
  keeps everything before it;
- events (`events`): `simple_value` scalars decoded with numpy all at once (the records of
  one length and tag as a group, `uniform`), TF2 tensor scalars, text summaries and hparams
  through tensorboard's protobuf classes (no TensorFlow);
- tags mapped to the per-iteration table by `loganalyzer.parsers.metric_names` (Megatron-LM,
  Megatron-DeepSpeed, DeepSpeed monitor, HF Trainer, torchtitan, Lightning); every other tag
  goes to the long metrics table.
"""

from loganalyzer.parsers.tensorboard.parser import TensorBoardParser

__all__ = ["TensorBoardParser"]
