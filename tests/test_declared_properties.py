"""The declared path reads what a loop printed: any steps, printed as a step time or as a
cumulative clock, in any unit, behind any launcher label, come back as printed."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loganalyzer.declared import DeclaredParser, parse_format

FORMAT = """
name = "prop"
description = "property test"
[record]
pattern = '^step (?P<iteration>\\d+) loss (?P<loss>\\S+) {field} (?P<{field}>[\\d.]+){unit}'
[record.fields.{field}]
unit = "{unit}"
"""
FACTOR = {"s": 1.0, "ms": 1e-3, "us": 1e-6}
LABELS = ("", "[rank0]:", "3: ", "2024-01-02T03:04:05.123456789Z ")


@st.composite
def loops(draw: st.DrawFn) -> tuple[list[int], list[float], list[int], str, str, str]:
    """Steps (increasing, any gaps), losses, whole step times in the printed unit, the
    field that carries time, its unit and a launcher label."""
    gaps = draw(st.lists(st.integers(1, 50), min_size=1, max_size=60))
    first = draw(st.integers(0, 10_000))
    steps = [first + sum(gaps[: n + 1]) for n in range(len(gaps))]
    losses = draw(
        st.lists(st.floats(0, 20, allow_nan=False), min_size=len(steps), max_size=len(steps))
    )
    times = draw(st.lists(st.integers(1, 10**6), min_size=len(steps), max_size=len(steps)))
    field = draw(st.sampled_from(["step_time", "train_time"]))
    unit = draw(st.sampled_from(sorted(FACTOR)))
    label = draw(st.sampled_from(LABELS))
    return steps, losses, times, field, unit, label


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loop=loops())
def test_declared_path_reads_what_was_printed(
    loop: tuple[list[int], list[float], list[int], str, str, str],
) -> None:
    steps, losses, times, field, unit, label = loop
    parser = DeclaredParser(parse_format(FORMAT.format(field=field, unit=unit), "prop.toml"))
    clock = 0
    printed = []
    for step, loss, took in zip(steps, losses, times, strict=True):
        clock += took
        value = took if field == "step_time" else clock
        printed.append(f"{label}step {step} loss {loss!r} {field} {value}{unit}")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "loop.log"
        path.write_text("noise line\n" + "\n".join(printed) + "\n")
        assert parser.detect(path) > 0
        run = parser.parse(path)
    table = run.table
    assert table["iteration"].to_list() == steps
    assert table["loss"].to_list() == pytest.approx(losses)
    got = table["step_time_s"].to_list()
    if field == "step_time":
        want: list[float | None] = [t * FACTOR[unit] for t in times]
    else:  # the clock's differences over the steps between records; the first untimed
        want = [None] + [
            t * FACTOR[unit] / (b - a)
            for t, a, b in zip(times[1:], steps[:-1], steps[1:], strict=True)
        ]
    assert [g is None for g in got] == [w is None for w in want]
    assert [g for g in got if g is not None] == pytest.approx([w for w in want if w is not None])
    if label.startswith(("[rank0]", "3: ")):
        assert set(table["rank"].to_list()) == {0 if "rank0" in label else 3}
