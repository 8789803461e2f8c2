"""Causes, goodput budget and MFU waterfall of every Megatron-family log under ../shared/logs.

The budget must sum to the logged wall clock, computed here record by record from the parsed
table (timestamps where a segment has them, else its step times; start-up timers; restart
gaps); the waterfall's steps must chain by multiplication to the achieved MFU.
"""

from __future__ import annotations

import json
import math
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.load import load_runs
from loganalyzer.model import Run
from loganalyzer.registry import load_registry
from tests.conftest import assert_golden
from tests.test_megatron_real_logs import REAL_LOGS


def _summaries(shared_logs: Path, name: str) -> list[dict[str, Any]]:
    """The summary of each run the log holds (a file of several benchmarks holds several)."""
    gpu = ["--gpu", "v100-sxm2"] if name.startswith("bigscience/") else []
    args = ["summary", "-q", "--json", "--split-runs", str(shared_logs / name), *gpu]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    docs: list[dict[str, Any]] = json.loads(result.stdout)
    return docs


def _summary(shared_logs: Path, name: str) -> dict[str, Any]:
    """The summary of the log's first run."""
    return _summaries(shared_logs, name)[0]


def _logged_wall_clocks(shared_logs: Path, name: str) -> list[float]:
    return [
        _logged_wall_clock(loaded.run)
        for loaded in load_runs([str(shared_logs / name)], load_registry())
    ]


def _logged_wall_clock(run: Run) -> float:
    """Start-up timers + each segment's clock + the gaps between segments, row by row."""
    setup = ("timer/model-and-optimizer-setup", "timer/train/valid/test-data-iterators-setup")
    startup = sum(
        row["value"] / 1000
        for row in run.metrics.iter_rows(named=True)
        if row["iteration"] is None and row["name"].removesuffix("/max") in setup
    )
    segments: dict[int, list[dict[str, Any]]] = {}
    for row in run.table.iter_rows(named=True):
        step = row["step_time_s"]
        if step is not None and math.isfinite(step) and step > 0:
            segments.setdefault(row["segment"] or 0, []).append(row)
    total, previous_end = startup, None
    for rows in segments.values():
        work = [r["step_time_s"] * (r["interval"] or 1) for r in rows]
        first, last = rows[0]["timestamp"], rows[-1]["timestamp"]
        if first is not None and last is not None:
            total += (last - first).total_seconds() + work[0]
            if previous_end is not None:
                total += max(0.0, (first - previous_end).total_seconds() - work[0])
        else:
            total += sum(work)
        previous_end = last
    return total


@pytest.mark.parametrize("name", REAL_LOGS, ids=[n.rsplit("/", 1)[-1] for n in REAL_LOGS])
def test_goodput_sums_to_the_logged_wall_clock(shared_logs: Path, name: str) -> None:
    docs = _summaries(shared_logs, name)
    walls = _logged_wall_clocks(shared_logs, name)
    assert len(docs) == len(walls)
    for doc, wall in zip(docs, walls, strict=True):
        goodput = doc["goodput"]
        total = sum(line["seconds"] for line in goodput["lines"])
        assert abs(total - wall) <= 1e-3 * wall
        assert goodput["wall_s"] == pytest.approx(wall, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("name", REAL_LOGS, ids=[n.rsplit("/", 1)[-1] for n in REAL_LOGS])
def test_waterfall_multiplies_to_the_achieved_mfu(shared_logs: Path, name: str) -> None:
    for doc in _summaries(shared_logs, name):
        _check_waterfall(doc["waterfall"])


def _check_waterfall(waterfall: dict[str, Any]) -> None:
    assert waterfall["combine"] == "multiply"
    steps = waterfall["steps"]
    if not steps:
        assert waterfall["achieved"] is None
        return
    assert steps[0]["value_before"] == 1.0
    for before, after in pairwise(steps):
        assert after["value_before"] == before["value_after"]
    for step in steps:
        assert step["value_after"] == pytest.approx(step["value_before"] * step["factor"])
    assert steps[-1]["value_after"] == waterfall["achieved"]
    assert math.prod(step["factor"] for step in steps) == pytest.approx(waterfall["achieved"])


@pytest.mark.parametrize("name", REAL_LOGS, ids=[n.rsplit("/", 1)[-1] for n in REAL_LOGS])
def test_why_matches_golden(shared_logs: Path, name: str) -> None:
    """Each log's causes (every slow step, stall, restart and save or validation line that
    cost time), its goodput budget and its waterfall, as a reader checks them."""
    doc = _summary(shared_logs, name)
    lines = []
    for kind, entries in (
        ("slow step", doc["slow_steps"]),
        ("stall", doc["stalls"]),
        ("restart", doc["restarts"]),
    ):
        for entry in entries:
            cause = entry["cause"]
            where = entry.get("iteration", entry.get("after_iteration"))
            lines.append(f"{kind} {where}: {cause['kind']}: {cause['evidence']}")
    lines += [f"attributed: {cost['evidence']}" for cost in doc["goodput"]["attributed"]]
    lines.append(f"goodput: {doc['goodput']['summary']} ({doc['goodput']['wall_clock']})")
    lines += [
        f"  {line['name']}: {line['seconds']:.3f} s"
        for line in doc["goodput"]["lines"]
        if line["seconds"]
    ]
    waterfall = doc["waterfall"]
    lines.append(f"waterfall to {waterfall['achieved']} ({waterfall['achieved_label']}):")
    lines += [
        f"  {step['name']}: x{step['factor']:.4f} -> {step['value_after']:.4f}"
        for step in waterfall["steps"]
    ]
    golden = "shared/" + name.replace("/", "__") + ".why.txt"
    assert_golden(golden, "\n".join(lines) + "\n")


def test_validation_line_explains_the_slower_record_after_it(shared_logs: Path) -> None:
    """bigscience tp4/pp8: `validation loss at iteration 100`, then iterations 101-110 at
    1773.4 ms against the 1617.2 ms pace (forward-compute doubled: evaluation runs the
    forward passes under the same timer): 10 × 156.2 ms of evaluation."""
    doc = _summary(shared_logs, "bigscience/gpt2-meg/meg_gpt2_base_n8_dp1_tp4_pp8-1809562.out")
    (step,) = doc["slow_steps"]  # the record of 10 iterations is a stall of its excess
    assert (step["first_iteration"], step["last_iteration"], step["kind"]) == (101, 110, "stall")
    assert step["cause"]["kind"] == "evaluation"
    assert "at iteration 100 (line 1528)" in step["cause"]["evidence"]
    assert step["lost_s"] == pytest.approx(10 * (1.7734 - 1.6172))
    evaluation = next(line for line in doc["goodput"]["lines"] if line["name"] == "evaluation")
    assert evaluation["seconds"] == pytest.approx(step["lost_s"])
