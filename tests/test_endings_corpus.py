"""The endings corpus (fixtures/endings/) is well formed: each real excerpt has its truth beside it.

Only the corpus's shape is checked here (the format is fixtures/endings/README.md); whether the
tool reads each ending right is the outcome tests' business.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import FIXTURES

ENDINGS = FIXTURES / "endings"
KINDS = {
    "completed",
    "stopped",
    "oom",
    "nccl_timeout",
    "nan",
    "cuda_error",
    "exception",
    "signal",
    "time_limit",
    "preempted",
    "node_failure",
    "cancelled",
    "hung",
    "unknown",
}
STATUSES = {"completed", "stopped", "crashed", "hung", "killed", "unknown"}
REASONS = {
    "oom",
    "nccl_timeout",
    "nan",
    "cuda_error",
    "exception",
    "signal",
    "time_limit",
    "preempted",
    "node_failure",
    "cancelled",
    "exit_duration",
    "exit_interval",
    "exit_signal",
    "train_iters_reached",
    None,
}
OUTCOME_KEYS = {
    "status",
    "reason",
    "exception",
    "rank",
    "host",
    "collective",
    "last_iteration",
    "evidence_line",
    "first_traceback_line",
}
MAX_LINES = 150
MAX_TOTAL_BYTES = 1_000_000

LOGS = sorted(ENDINGS.rglob("*.log"))


def _lines(log: Path) -> list[str]:
    """The lines as the corpus numbers them: split at "\\n" only (a bar's "\\r" stays inside)."""
    return log.read_bytes().decode("utf-8").removesuffix("\n").split("\n")


def _truth(log: Path) -> dict[str, Any]:
    truth: dict[str, Any] = json.loads(log.with_suffix(".json").read_text(encoding="utf-8"))
    return truth


def test_the_corpus_has_every_kind() -> None:
    assert {log.parent.name for log in LOGS} == KINDS


def test_every_log_has_its_truth_and_every_truth_its_log() -> None:
    truths = {p.with_suffix("") for p in ENDINGS.rglob("*.json")}
    assert truths == {log.with_suffix("") for log in LOGS}


def test_the_corpus_stays_small() -> None:
    assert sum(log.stat().st_size for log in LOGS) < MAX_TOTAL_BYTES
    assert [log.name for log in LOGS if len(_lines(log)) > MAX_LINES] == []


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_truth_is_well_formed(log: Path) -> None:
    truth = _truth(log)
    assert log.parent.name in KINDS
    assert truth["source"] and truth["what"] and truth["framework"] and truth["launcher"]
    outcome = truth["expect"]["outcome"]
    assert set(outcome) <= OUTCOME_KEYS
    assert outcome["status"] in STATUSES
    assert outcome.get("reason") in REASONS
    count = len(_lines(log))
    assert 1 <= outcome["evidence_line"] <= count
    assert 1 <= outcome.get("first_traceback_line", 1) <= count
    if outcome.get("collective") is not None:
        assert set(outcome["collective"]) == {"op", "seq", "timeout_ms"}
    if outcome.get("exception"):
        assert outcome["exception"] in log.read_text(encoding="utf-8")
    assert all(isinstance(b, str) and b for b in truth["expect"].get("benign", []))


def test_the_readme_lists_every_excerpt_with_its_source() -> None:
    readme = (ENDINGS / "README.md").read_text(encoding="utf-8")
    missing = [
        log.stem
        for log in LOGS
        if f"`{log.stem}`" not in readme or _truth(log)["source"] not in readme
    ]
    assert missing == []
