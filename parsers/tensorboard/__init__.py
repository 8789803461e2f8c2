"""TensorBoard event files: every scalar, both encodings, text and hparams as config.

- framing (`tfrecord`): CRC-checked, resynchronised after a damaged record, a cut-off tail
  keeps everything before it;
- events (`events`): scalars decoded with numpy all at once (the records of one length and
  layout as a group, `uniform`: one simple value, several (TF1 merged summaries), TF2
  tensor scalars of fixed width), the rest, text summaries and hparams through
  tensorboard's protobuf classes (no TensorFlow);
- a writer's sub-folders (`writer_folders`): `add_scalars` series (the folder's name
  qualifies the tag) and `add_hparams` read with the writer's own event file;
- tags mapped to the per-iteration table by `loganalyzer.parsers.metric_names` (Megatron-LM,
  Megatron-DeepSpeed, DeepSpeed monitor, HF Trainer, torchtitan, Lightning); every other tag
  goes to the long metrics table.
"""

from loganalyzer.parsers.tensorboard.parser import TensorBoardParser

__all__ = ["TensorBoardParser"]
