"""The learned-template reading of iteration lines gives exactly what the general, field by
field, reading gives: on every Megatron fixture, and on lines whose key order changes."""

from __future__ import annotations

import math
from pathlib import Path

import polars as pl
import pytest

from loganalyzer.parsers.megatron import MegatronParser, template
from tests.conftest import FIXTURES

LOGS = sorted(
    path
    for folder in ("megatron", "megatron_deepspeed")
    for path in (FIXTURES / folder).rglob("*")
    if path.is_file()
)


def _same_run(path: Path, monkeypatch: pytest.MonkeyPatch, templates: int) -> None:
    learned = MegatronParser().parse(path)
    monkeypatch.setattr(template, "MAX_TEMPLATES", templates)
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
