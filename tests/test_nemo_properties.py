"""Property tests: lines written with NeMo's own format strings parse back to their values.

NeMo 2: nemo/lightning/pytorch/callbacks/progress_printer.py (nemo_toolkit 2.2.1, lines
55-62 and 140, quoted in the shared FORMATS reference 5b):
    prefix = self.train_description + f" epoch {trainer.current_epoch}, iteration "
             f"{n-1}/{self.total-1}"   (one f-string in the source)
    log_string += f' | {metric}: {val}'      # integral floats printed as int
    log_string += f' | {metric}: {val:.4}'   # others with 4 significant digits
NeMo 1: PyTorch Lightning's tqdm bar, postfix values through Lightning's `_format_num` over
tqdm's `format_num` (lightning/pytorch/callbacks/progress/tqdm_progress.py), frames redrawn
with '\\r'.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.parsers.nemo import NemoParser

PREFIXES = ["", "0: ", " 0: ", "[rank0]:", "[2025-11-20T14:55:23+08:00] retraining/0 "]


def printed(val: float) -> str:
    """ProgressPrinter's value: integral floats as int, others with 4 significant digits."""
    return str(int(val)) if float(val).is_integer() else f"{val:.4}"


@st.composite
def steps(draw: st.DrawFn) -> list[dict[str, float]]:
    count = draw(st.integers(1, 30))
    start = draw(st.integers(0, 100_000))
    return [
        {
            "step": start + k,
            "loss": draw(st.floats(1e-3, 20, allow_nan=False)),
            "time": draw(st.floats(1e-3, 500, allow_nan=False)),
            "lr": draw(st.floats(1e-7, 1e-2, allow_nan=False)),
            "tflops": draw(st.floats(1, 3000, allow_nan=False)),
        }
        for k in range(count)
    ]


def _parse(text: str) -> tuple[list[tuple[object, ...]], list[str]]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "train.log"
        path.write_text(text, encoding="utf-8")
        run = NemoParser().parse(path)
    rows = run.table.select(
        "iteration", "loss", "step_time_s", "lr", "reported_tflops_per_gpu"
    ).rows()
    return rows, run.warnings


@settings(max_examples=60, deadline=None)
@given(
    recs=steps(),
    prefix=st.sampled_from(PREFIXES),
    extra=st.booleans(),
    tflops_name=st.sampled_from(["TFLOPS_per_GPU", "tflops_per_sec_per_gpu"]),
    epoch=st.integers(0, 3),
)
def test_progress_lines_parse_back(
    recs: list[dict[str, float]], prefix: str, extra: bool, tflops_name: str, epoch: int
) -> None:
    total = recs[-1]["step"] + 10
    lines = []
    for rec in recs:
        fields = {
            "lr": rec["lr"],
            "global_batch_size": 512.0,
            "global_step": float(rec["step"]),
            "reduced_train_loss": rec["loss"],
            "train_step_timing in s": rec["time"],
            tflops_name: rec["tflops"],
        }
        if extra:
            fields["consumed_samples"] = 512.0 * (rec["step"] + 1)
            fields["val_loss"] = 3.25
        line = f"{prefix}Training epoch {epoch}, iteration {rec['step'] % 97}/{total - 1}"
        line += "".join(f" | {name}: {printed(val)}" for name, val in fields.items())
        lines.append(line)
    rows, _ = _parse("\n".join(lines) + "\n")
    assert rows == [
        (
            rec["step"] + 1,
            float(printed(rec["loss"])),
            float(printed(rec["time"])),
            float(printed(rec["lr"])),
            float(printed(rec["tflops"])),
        )
        for rec in recs
    ]


def _tqdm_format_num(n: float) -> str:
    """tqdm.std.tqdm.format_num."""
    f = f"{n:.3g}".replace("+0", "+").replace("-0", "-")
    return f if len(f) < len(str(n)) else str(n)


def bar_value(n: float) -> str:
    """Lightning's `_format_num` (pad size 5) over tqdm's."""
    text = _tqdm_format_num(n)
    if "e" not in text:
        if "." not in text and len(text) < 5:
            text += "."
        text += "0" * (5 - len(text))
    return text


@settings(max_examples=60, deadline=None)
@given(
    recs=steps(),
    prefix=st.sampled_from(PREFIXES[:4]),
    redraws=st.integers(1, 3),
    per_line=st.integers(1, 8),
)
def test_lightning_bar_frames_parse_back(
    recs: list[dict[str, float]], prefix: str, redraws: int, per_line: int
) -> None:
    total = recs[-1]["step"] + 10
    frames = []
    for rec in recs:
        count = rec["step"] + 1
        post = (
            f"reduced_train_loss={bar_value(rec['loss'])}, "
            f"global_step={bar_value(float(rec['step']))}, "
            f"consumed_samples={bar_value(float(count * 256))}, "
            f"train_step_timing in s={bar_value(rec['time'])}"
        )
        frame = f"Epoch 0: :  50%|█████     | {count}/{total} [1:02:03<1:02:03, {post}]"
        frames.extend([frame] * redraws)
    lines = [
        prefix + "\r".join(frames[at : at + per_line]) for at in range(0, len(frames), per_line)
    ]
    rows, warnings = _parse("\n".join(lines) + "\n")
    assert [row[:3] for row in rows] == [
        (rec["step"] + 1, float(bar_value(rec["loss"])), float(bar_value(rec["time"])))
        for rec in recs
    ]
    assert any("significant digits" in w for w in warnings)
