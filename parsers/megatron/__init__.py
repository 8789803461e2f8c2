"""Megatron-LM and Megatron-DeepSpeed stdout logs, every version since 2021.

What it reads (the formats are quoted in the project's FORMATS reference):
- iteration lines, ``iteration N/ M | key: value | ...`` with or without the leading
  ``[YYYY-mm-dd HH:MM:SS(.ffffff)]``; elapsed time in ms, or in s (bigscience fork); any
  field order; unknown fields kept in the long table;
- the ``arguments`` dump → run config (every argument, with its file and line); argument
  lines without the dump's header and footer (pasted, or cut), and a dump cut before its
  footer; a launch command echoed into the log (``python pretrain_gpt.py --num-layers 24 ...``,
  over `` \\`` continuations or wrapped at a terminal's width, or its arrays echoed as
  ``MODEL_ARGS: --seq-length 2048 ...``), whose options a dump outranks;
  ``using world size: ...`` in every wording (each size by its name),
  ``> padded vocab ... (new size: N)``, ``using torch.X for parameters``; the GPU nvidia-smi
  names (its table, or ``GPU 0: NVIDIA A100-SXM4-80GB (UUID: ...)``);
- timers: one-line ``time (ms) | name: v | ...`` and the ``(min, max) time across ranks (ms):``
  / ``max time across ranks (ms):`` blocks; ``[Rank N] (after K iterations) memory (MB) | ...``;
  ``saving checkpoint at iteration N`` — all to the long table, tied to the last iteration seen;
- ``Effective Tera Flops per GPU: v and total parameters p B`` (Megatron-DeepSpeed, 2021)
  below an iteration line: that record's reported TFLOPS per GPU;
- a paste re-wrapped at a fixed width between a key and its value (``... | lm loss:`` /
  ``2.324108E+01 | loss scale: ...``), put back together;
- launcher prefixes, ANSI codes, ``\\r``, records glued without a newline, and the copies that
  several ranks or nodes print of one line (de-duplicated within each launch).

Each launch (an ``arguments`` dump), a step back of the iteration counter or a change of the
total it counts to (``iteration K/ N``: ``train_iters``) starts a segment.
"""

from loganalyzer.parsers.megatron.parser import MegatronParser

__all__ = ["MegatronParser"]
