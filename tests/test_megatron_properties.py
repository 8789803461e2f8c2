"""Property tests: lines written with Megatron's own format strings parse back to their values."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.parsers.megatron import MegatronParser

PREFIXES = ["", "7: ", "[rank3]:", "[default0]:", "2026-02-05T16:03:52.889599000Z "]


@st.composite
def records(draw: st.DrawFn) -> list[dict[str, object]]:
    count = draw(st.integers(1, 40))
    interval = draw(st.integers(1, 50))
    start = draw(st.integers(0, 10_000))
    return [
        {
            "iteration": start + (k + 1) * interval,
            "ms": draw(st.floats(0.1, 1e7, allow_nan=False)),
            "lr": draw(st.floats(0, 1, allow_nan=False)),
            "loss": draw(st.floats(1e-3, 100, allow_nan=False)),
            "gbs": draw(st.integers(1, 65536)),
            "tflops": draw(st.one_of(st.none(), st.floats(0, 5000, allow_nan=False))),
        }
        for k in range(count)
    ]


def _line(rec: dict[str, object], current: bool, total: int) -> str:
    """Megatron-LM's training_log format strings (2021 v2.5, and current core)."""
    out = " [2025-01-02 03:04:05]" if current else ""
    out += " iteration {:8d}/{:8d} |".format(rec["iteration"], total)
    out += f" consumed samples: {1:12d} |"
    out += " elapsed time per iteration (ms): {:.1f} |".format(rec["ms"])
    if rec["tflops"] is not None:
        out += f" throughput per GPU (TFLOP/s/GPU): {rec['tflops']:.1f} |"
    out += f" learning rate: {rec['lr']:.6E} |" if current else f" learning rate: {rec['lr']:.3E} |"
    out += f" global batch size: {rec['gbs']:5d} |"
    out += " lm loss: {:.6E} |".format(rec["loss"])
    out += f" loss scale: {1.0:.1f} |"
    out += f" number of skipped iterations: {0:3d} |"
    out += f" number of nan iterations: {0:3d} |"
    return out


@settings(max_examples=60, deadline=None)
@given(
    recs=records(),
    current=st.booleans(),
    prefix=st.sampled_from(PREFIXES),
    copies=st.integers(1, 3),
)
def test_printed_values_parse_back(
    recs: list[dict[str, object]], current: bool, prefix: str, copies: int
) -> None:
    total = 10**7
    lines = []
    for rec in recs:
        lines += [prefix + _line(rec, current, total)] * copies  # copies from several ranks
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run.log"
        path.write_text("\n".join(lines) + "\n")
        table = MegatronParser().parse(path).table
    assert table["iteration"].to_list() == [r["iteration"] for r in recs]
    assert table["step_time_s"].to_list() == pytest.approx(
        [float(f"{r['ms']:.1f}") / 1000 for r in recs], rel=1e-12
    )
    assert table["loss"].to_list() == pytest.approx([float(f"{r['loss']:.6E}") for r in recs])
    assert table["global_batch_size"].to_list() == [r["gbs"] for r in recs]
    assert table["reported_tflops_per_gpu"].to_list() == [
        None if r["tflops"] is None else pytest.approx(float(f"{r['tflops']:.1f}")) for r in recs
    ]
    assert table["segment"].to_list() == [0] * len(recs)
    assert table["line"].to_list() == [1 + k * copies for k in range(len(recs))]
