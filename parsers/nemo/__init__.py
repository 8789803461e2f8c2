"""NeMo stdout logs: NeMo 1 (PyTorch Lightning bars), NeMo 2 (ProgressPrinter lines) and
Megatron-Bridge (Megatron-LM iteration lines with Bridge's own config dump).

What it reads (the formats are quoted in the project's FORMATS reference, 5b):
- NeMo 2's ``Training epoch E, iteration i/N-1 | key: value | ...`` lines, any field order,
  fields that come and go across versions (``consumed_samples``, ``val_loss``,
  ``grad_norm``, ``TFLOPS_per_GPU`` / ``tflops_per_sec_per_gpu``, memory); unknown fields
  kept in the long table; a launcher label or logger stamp before the line;
- NeMo 1's Lightning progress bars with NeMo's postfix (``reduced_train_loss=``,
  ``global_step=``, ``train_step_timing in s=``), redrawn with ``\\r``: the last frame of
  each step;
- the config dumps (``parsers/nemo/config.py``): NeMo 1's hydra YAML, Megatron-Bridge's
  ``Task Configuration``, mapped to the Megatron-LM argument names the FLOPs formula reads;
  NeMo 1's padded vocabulary line, Lightning's and gloo's world size;
- a Megatron-Bridge log's iteration lines through the Megatron parser, and Bridge's
  ``Step Time : ... TFLOP/s/GPU`` as its reported figure.

NeMo prints ``global_step`` from 0 (the first step's line says 0, the last of N steps N-1);
records are numbered as Megatron-LM counts iterations, from 1: ``global_step`` + 1 (kept as
printed in the long table), so a run of N steps (``iteration i/N-1``: ``train_iters`` N)
ends at record N.
"""

from loganalyzer.parsers.nemo.parser import NemoParser

__all__ = ["NemoParser"]
