"""A Megatron-LM log whose text tries to become markup or script in a report: in a config
value, in an iteration line (quoted by the slow-step table) and in the file's name (shown
in the identity line and in every chart point's hover)."""

from __future__ import annotations

from pathlib import Path

PAYLOADS = ("<script>alert(1)</script>", '"><img src=x onerror=alert(2)>', "</script>")
NAME = "<img src=x onerror=alert(3)>.log"


def write_hostile_log(folder: Path) -> Path:
    """Write the log into `folder` and return its path."""
    text = " ".join(PAYLOADS)
    lines = [
        "using world size: 8, data-parallel size: 2, tensor-model-parallel size: 2, "
        "pipeline-model-parallel size: 2",
        "------------------------ arguments ------------------------",
        "  bf16 ............................................ True",
        "  global_batch_size ............................... 8",
        "  hidden_size ..................................... 256",
        "  num_attention_heads ............................. 4",
        "  num_layers ...................................... 2",
        "  padded_vocab_size ............................... 50304",
        "  seq_length ...................................... 512",
        f"  tensorboard_dir ................................. {text}",
        "-------------------- end of arguments ---------------------",
    ]
    for iteration in range(10, 310, 10):
        ms = 1500.0 if iteration == 150 else 500.0 + (iteration % 30) / 10
        note = f" {text} |" if iteration == 150 else ""
        lines.append(
            f" [2025-01-01 00:{iteration // 60:02d}:{iteration % 60:02d}] iteration {iteration:8d}/"
            f"     300 | consumed samples: {iteration * 8:12d} | elapsed time per iteration (ms):"
            f" {ms:.1f} | learning rate: 1.000000E-04 | global batch size:     8 | lm loss:"
            f" 6.000000E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:"
            f"   0 | number of nan iterations:   0 |{note}"
        )
    path = folder / NAME
    path.write_text("\n".join(lines) + "\n")
    return path
