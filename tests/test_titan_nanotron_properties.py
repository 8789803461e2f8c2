"""Property tests: step lines written with torchtitan's and nanotron's own format strings
(quoted in the shared FORMATS reference, sections 5 and 5c) parse back to their values."""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.parsers.nanotron import NanotronParser
from loganalyzer.parsers.torchtitan import TorchtitanParser

# torchtitan's colours (torchtitan/tools/utils.py Color): ANSI unless disabled.
COLOURS = {
    "red": "\x1b[31m",
    "green": "\x1b[32m",
    "orange": "\x1b[33m",
    "turquoise": "\x1b[36m",
    "blue": "\x1b[34m",
    "cyan": "\x1b[36m",
    "magenta": "\x1b[35m",
    "reset": "\x1b[39m",
}
NO_COLOURS = dict.fromkeys(COLOURS, "")


@st.composite
def titan_steps(draw: st.DrawFn) -> list[dict[str, float | int]]:
    count = draw(st.integers(1, 20))
    start = draw(st.integers(1, 100_000))
    every = draw(st.integers(1, 50))
    return [
        {
            "step": start + k * every,
            "loss": draw(st.floats(0, 20, allow_nan=False)),
            "grad_norm": draw(st.floats(0, 1000, allow_nan=False)),
            "gib": draw(st.floats(0, 200, allow_nan=False)),
            "pct": draw(st.floats(0, 100, allow_nan=False)),
            "tps": draw(st.integers(0, 10_000_000)),
            "tflops": draw(st.floats(0, 5000, allow_nan=False)),
            "mfu": draw(st.floats(0, 100, allow_nan=False)),
            "ms": draw(st.integers(0, 999)),
        }
        for k in range(count)
    ]


def _titan_line(rec: dict[str, float | int], c: dict[str, str], wording: str, prefix: str) -> str:
    """torchtitan/components/metrics.py's step line (`wps` and no tflops before 2025-02, no
    grad_norm before 2025-06), after its logger's and torchrun's prefixes."""
    stamp = f"2025-06-16 22:30:{int(rec['step']) % 60:02d},{rec['ms']:03d}"
    out = f"{prefix}[titan] {stamp} - root - INFO - "
    out += f"{c['red']}step: {rec['step']:2}  {c['green']}loss: {rec['loss']:8.5f}  "
    if wording == "current":
        out += f"{c['orange']}grad_norm: {rec['grad_norm']:7.4f}  "
    out += f"{c['turquoise']}memory: {rec['gib']:5.2f}GiB({rec['pct']:.2f}%)  "
    if wording == "2024":
        out += f"{c['blue']}wps: {round(rec['tps']):7,}  "
    else:
        out += f"{c['blue']}tps: {round(rec['tps']):,}  "
        out += f"{c['cyan']}tflops: {rec['tflops']:,.2f}  "
    out += f"{c['magenta']}mfu: {rec['mfu']:.2f}%{c['reset']}"
    return out


@settings(max_examples=40, deadline=None)
@given(
    titan_steps(),
    st.sampled_from(["current", "2025", "2024"]),
    st.booleans(),
    st.sampled_from(["", "[rank0]:"]),
)
def test_torchtitan_step_lines_read_back(
    recs: list[dict[str, float | int]], wording: str, colour: bool, prefix: str
) -> None:
    colours = COLOURS if colour else NO_COLOURS
    text = "\n".join(_titan_line(r, colours, wording, prefix) for r in recs) + "\n"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "train.log"
        path.write_text(text, encoding="utf-8")
        assert TorchtitanParser().detect(path) >= 0.9
        run = TorchtitanParser().parse(path)
    table = run.table
    assert table["iteration"].to_list() == [r["step"] for r in recs]
    assert table["loss"].to_list() == pytest.approx([round(float(r["loss"]), 5) for r in recs])
    if wording == "current":
        expected = [round(float(r["grad_norm"]), 4) for r in recs]
        assert table["grad_norm"].to_list() == pytest.approx(expected)
    if wording != "2024":
        expected = [round(float(r["tflops"]), 2) for r in recs]
        assert table["reported_tflops_per_gpu"].to_list() == pytest.approx(expected)
    assert isinstance(run.metrics, pl.DataFrame)
    mfu = run.metrics.filter(pl.col("name") == "reported_mfu_pct")["value"].to_list()
    assert mfu == pytest.approx([round(float(r["mfu"]), 2) for r in recs])
    tps = run.metrics.filter(pl.col("name") == "tokens_per_s_per_device")["value"].to_list()
    assert tps == [float(r["tps"]) for r in recs]


def human_format(num: float) -> str:
    """nanotron/logging.py's human_format (nanotron 0.4): 3 significant digits, a 1000-based
    suffix."""
    if abs(num) < 1:
        return f"{num:.3g}"
    sizes = ["", "K", "M", "G", "T", "P", "E"]
    num = float(f"{num:.3g}")
    magnitude = 0
    while abs(num) >= 1000 and magnitude < len(sizes) - 1:
        magnitude += 1
        num /= 1000.0
    return "{}{}".format(f"{num:f}".rstrip("0").rstrip("."), sizes[magnitude])


@st.composite
def nanotron_steps(draw: st.DrawFn) -> list[dict[str, float | int]]:
    count = draw(st.integers(1, 20))
    start = draw(st.integers(1, 400_000))
    return [
        {
            "iteration": start + k,
            "ms": draw(st.floats(0.01, 1e7, allow_nan=False)),
            "tokens": draw(st.floats(1, 1e15, allow_nan=False)),
            "loss": draw(st.floats(0.001, 20, allow_nan=False)),
            "lr": draw(st.floats(1e-8, 1e-2, allow_nan=False)),
            "tflops": draw(st.floats(1e-6, 3000, allow_nan=False)),
            "gbs": draw(st.integers(1, 65536)),
        }
        for k in range(count)
    ]


def _nanotron_line(rec: dict[str, float | int], total: int, prefix: str) -> str:
    """nanotron/trainer.py's train-step log line, after its logger's prefix."""
    fields = [f"iteration: {rec['iteration']} / {total}"] + [
        f"{tag}: {human_format(float(value))}"
        for tag, value in (
            ("consumed_tokens", rec["tokens"]),
            ("elapsed_time_per_iteration_ms", rec["ms"]),
            ("tokens_per_sec", rec["tokens"] / 100),
            ("tokens_per_sec_per_gpu", rec["tokens"] / 800),
            ("global_batch_size", rec["gbs"]),
            ("lm_loss", rec["loss"]),
            ("lr", rec["lr"]),
            ("model_tflops_per_gpu", rec["tflops"]),
            ("hardware_tflops_per_gpu", rec["tflops"]),
        )
    ]
    return f"{prefix}10/17/2025 16:31:56 [INFO|DP=0|PP=0|TP=0|ip-26-0-160-225]: " + " | ".join(
        fields
    )


def _read(printed: str) -> float:
    """What a human_format figure stands for."""
    scale = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15}
    return float(printed[:-1]) * scale[printed[-1]] if printed[-1] in scale else float(printed)


@settings(max_examples=40, deadline=None)
@given(nanotron_steps(), st.sampled_from(["", "[default0]:"]))
def test_nanotron_iteration_lines_read_back(
    recs: list[dict[str, float | int]], prefix: str
) -> None:
    total = int(recs[-1]["iteration"]) + 10
    text = "\n".join(_nanotron_line(r, total, prefix) for r in recs) + "\n"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "train.log"
        path.write_text(text, encoding="utf-8")
        assert NanotronParser().detect(path) >= 0.9
        run = NanotronParser().parse(path)
    table = run.table
    assert table["iteration"].to_list() == [r["iteration"] for r in recs]
    step = [_read(human_format(float(r["ms"]))) / 1000 for r in recs]
    assert table["step_time_s"].to_list() == pytest.approx(step, rel=1e-9)
    loss = [_read(human_format(float(r["loss"]))) for r in recs]
    assert table["loss"].to_list() == pytest.approx(loss, rel=1e-9)
    tflops = [_read(human_format(float(r["tflops"]))) for r in recs]
    assert table["reported_tflops_per_gpu"].to_list() == pytest.approx(tflops, rel=1e-9)
    assert isinstance(run.metrics, pl.DataFrame)
    consumed = run.metrics.filter(pl.col("name") == "consumed_tokens")["value"].to_list()
    expected = [_read(human_format(float(r["tokens"]))) for r in recs]
    assert consumed == pytest.approx(expected, rel=1e-9)
