"""The fast paths give exactly what the general, field by field, reading gives: report lines
read whole in one split (`templated.py`) and fields read by learned templates (`template.py`),
on every Megatron fixture, on lines whose key order changes, and on generated lines of every
shape the general path must handle (labels, colour codes, glued records, odd values)."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loganalyzer.parsers.megatron import MegatronParser, scan, template, templated
from tests.conftest import FIXTURES

LOGS = sorted(
    path
    for folder in ("megatron", "megatron_deepspeed")
    for path in (FIXTURES / folder).rglob("*")
    if path.is_file()
)


def _nothing_taken(frame: pl.DataFrame) -> templated.Taken:
    return templated.take_reports(frame.clear())


def _same_run(path: Path, monkeypatch: pytest.MonkeyPatch, templates: int) -> None:
    """The run read with every fast path, and read with no report line taken whole and at
    most `templates` templates per chunk."""
    learned = MegatronParser().parse(path)
    with monkeypatch.context() as patched:
        patched.setattr(template, "MAX_TEMPLATES", templates)
        patched.setattr(scan, "take_reports", _nothing_taken)
        general = MegatronParser().parse(path)
    assert learned.table.equals(general.table)
    assert learned.metrics.equals(general.metrics)
    assert learned.framework == general.framework
    assert learned.warnings == general.warnings


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_fixture_read_the_same_without_templates(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _same_run(path, monkeypatch, templates=0)


# Iteration lines whose keys change order, with values a cast cannot read, a field without
# a colon, a missing space before `|` and a field with two colons.
FIELDS = [
    [
        "consumed samples: 4",
        "elapsed time per iteration (ms): 1614.3",
        "learning rate: 1.0E-04",
        "lm loss: 7.9E+00",
    ],
    [
        "elapsed time per iteration (ms): 1616.6",
        "consumed samples: 8",
        "lm loss: 7.8E+00",
        "learning rate: 1.0E-04",
    ],
    [
        "consumed samples: 12",
        "elapsed time per iteration (ms): 1,618.3",
        "learning rate: 1.0E-04",
        "lm loss: nan",
        "loss: 3.0",
    ],
    [
        "consumed samples: 16",
        "elapsed time per iteration (ms): 1620.0",
        "odd field",
        "learning rate: x",
        "lm loss: 7.7E+00",
    ],
    [
        "consumed samples: 20",
        "elapsed time per iteration (ms): 1621.0|learning rate: 1.0E-04",
        "a: b: c",
        "lm loss: 7.6E+00",
    ],
]
MIXED = "".join(
    f" iteration {i:8d}/     100 | " + " | ".join(fields) + " |\n"
    for i, fields in enumerate(FIELDS, start=1)
)


@pytest.mark.parametrize("templates", [0, 1, 2])
def test_lines_with_other_key_orders(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, templates: int
) -> None:
    log = tmp_path / "mixed.log"
    log.write_text(MIXED)
    run = MegatronParser().parse(log)
    assert run.table["step_time_s"].to_list() == pytest.approx(
        [1.6143, 1.6166, 1.6183, 1.62, 1.621]
    )
    assert run.table["loss"].to_list()[:2] == [7.9, 7.8]
    assert run.table["lr"].to_list()[3] is None  # "x" is no number
    _same_run(log, monkeypatch, templates)


# Timer and memory lines whose values are nan or inf (where the learned template tests each
# token's start), beside lines whose values are all finite (where it need not).
NON_FINITE = "".join(
    f" iteration {i:8d}/      10 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.0 |\n"
    f"time (ms) | forward-compute: {forward} | optimizer: {optimizer} |\n"
    f"[Rank 0] (after {i} iterations) memory (MB) | allocated: {allocated} | reserved: 3.0\n"
    for i, (forward, optimizer, allocated) in enumerate(
        [
            ("296.00", "45.00", "17697.36"),
            ("nan", "inf", "-inf"),
            ("297.00", "NaN", "1.5"),
            ("298.00", "44.00", "17698.36"),
        ],
        start=1,
    )
)


@pytest.mark.parametrize("templates", [0, 1, 2])
def test_non_finite_timer_and_memory_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, templates: int
) -> None:
    log = tmp_path / "non_finite.log"
    log.write_text(NON_FINITE)
    run = MegatronParser().parse(log)
    values = {
        name: run.metrics.filter(pl.col("name").cast(pl.String) == name)["value"].to_list()
        for name in ("timer/forward-compute", "timer/optimizer", "memory/allocated_mb")
    }
    assert values["timer/forward-compute"][0] == 296.0
    assert math.isnan(values["timer/forward-compute"][1])
    assert values["timer/optimizer"][1] == math.inf
    assert math.isnan(values["timer/optimizer"][2])
    assert values["memory/allocated_mb"][1] == -math.inf
    assert values["memory/allocated_mb"][3] == 17698.36
    _same_run(log, monkeypatch, templates)


LABELS = [
    "",
    "7: ",
    "12:  ",
    "[rank3]:",
    "[default0]:",
    "[host-1:3]:",
    "2026-02-05T16:03:52.889Z 4: ",
]
ODD_VALUES = ["nan", "inf", "1,234.5", "x", "3.4K", "-2.0", "7"]
ANSI_CODES = ["\x1b[32m", "\x1b[0m", "[33m"]


@st.composite
def report_line(draw: st.DrawFn, iteration: int) -> str:
    """One line in one of the shapes Megatron-LM prints reports in, sometimes damaged."""
    label = draw(st.sampled_from(LABELS))
    kind = draw(st.sampled_from(["iteration", "iteration", "memory", "timers", "block", "noise"]))
    value = draw(
        st.one_of(st.floats(0, 1e6, allow_nan=False).map(str), st.sampled_from(ODD_VALUES))
    )
    if kind == "iteration":
        stamp = draw(
            st.sampled_from(["", " [2025-01-02 03:04:05.123456]", " [2025-01-02T03:04:05+02:00]"])
        )
        fields = [
            f"consumed samples: {iteration * 4:12d}",
            f"elapsed time per iteration (ms): {value}",
            "learning rate: 1.000000E-04",
            f"lm loss: {draw(st.sampled_from(['2.0E+00', '7.5', 'nan']))}",
        ]
        if draw(st.booleans()):
            fields.append(f"mtp_1 loss: {draw(st.sampled_from(['1.5', 'x']))}")
        line = f"{stamp} iteration {iteration:8d}/    1000 | " + " | ".join(fields) + " |"
    elif kind == "memory":
        rank = draw(st.sampled_from(["[Rank 3] ", "[Rank 0] ", ""]))
        line = (
            f"{rank}(after {iteration} iterations) memory (MB) | allocated: {value} | reserved: 3.0"
        )
    elif kind == "timers":
        line = f"time (ms) | forward-compute: {value} | optimizer: 45.00"
    elif kind == "block":
        line = f"    forward-backward ...............................: ({value}, 6013.20)"
    else:
        line = draw(
            st.sampled_from(
                ["UserWarning: barrier() is slow", "saving checkpoint at iteration 5", "x | y: 1 |"]
            )
        )
    line = label + line
    damage = draw(st.sampled_from(["none", "none", "none", "ansi", "cr", "validation"]))
    if damage == "ansi":
        at = draw(st.integers(0, len(line)))
        line = line[:at] + draw(st.sampled_from(ANSI_CODES)) + line[at:]
    elif damage == "cr":
        at = draw(st.integers(0, len(line)))
        line = line[:at] + "\r" + line[at:]
    elif damage == "validation":
        line += " validation"
    return line


@st.composite
def report_log(draw: st.DrawFn) -> str:
    first = " iteration        1/    1000 | elapsed time per iteration (ms): 1000.0 |"
    lines = [first, *(draw(report_line(i)) for i in range(2, draw(st.integers(2, 30))))]
    if len(lines) > 1 and draw(st.booleans()):  # two reports glued on one line
        at = draw(st.integers(0, len(lines) - 2))
        lines[at : at + 2] = [lines[at] + lines[at + 1]]
    return "\n".join(lines) + "\n"


@settings(
    max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(log=report_log())
def test_report_lines_read_whole_as_the_general_path_reads_them(
    log: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "reports.log"
    path.write_text(log)
    _same_run(path, monkeypatch, templates=template.MAX_TEMPLATES)


def test_a_chunks_counts_are_integers_whichever_path_read_it() -> None:
    """A chunk whose iteration lines are all read whole leaves the general path nothing: its
    empty columns must not turn the chunk's counts into floats (a copy of each count column
    per chunk, and another back to integers when the table is built)."""
    line = (
        " iteration        1/     100 | consumed samples:            8 | elapsed time per"
        " iteration (ms): 1000.0 | global batch size:     8 | lm loss: 2.0 |"
        " number of skipped iterations:   0 | number of nan iterations:   0 |"
    )
    frame = pl.DataFrame({"line": [1], "text": [line]}).with_columns(
        launch=pl.lit(0, dtype=pl.Int32), in_args=pl.lit(False)
    )
    assert templated.take_reports(frame).records.height == 1  # read whole
    records = scan.scan_chunk(frame).records
    counts = ["global_batch_size", "skipped_iterations", "nan_iterations"]
    assert {name: records.schema[name] for name in counts} == dict.fromkeys(counts, pl.Int64)
    assert records.row(0, named=True)["global_batch_size"] == 8
