"""Timestamps printed without a time zone (Megatron's `[2024-04-06 02:55:45] iteration`,
DeepSpeed's logger `[2025-11-10 09:43:39,573] [INFO]`) are read as UTC by both parsers
alike, and the summary states that assumption once, whichever parser read them; event files
(epoch seconds) need none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.clock import ZONELESS_TIMESTAMPS
from tests.conftest import FIXTURES


def _warnings(*sources: str) -> list[str]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", *sources])
    assert result.exit_code == 0, result.output
    warnings: list[str] = json.loads(result.stdout)["warnings"]
    return warnings


@pytest.mark.parametrize(
    "name", ["excerpts/megatron_3.txt", "excerpts/deepspeed_2.txt", "excerpts/deepspeed_4.txt"]
)
def test_printed_timestamps_state_the_assumption_once(shared_logs: Path, name: str) -> None:
    warnings = _warnings(str(shared_logs / name))
    assert warnings.count(ZONELESS_TIMESTAMPS) == 1
    assert not any("time zone" in w for w in warnings if w != ZONELESS_TIMESTAMPS)


def test_event_file_times_need_no_assumption() -> None:
    warnings = _warnings(str(FIXTURES / "tensorboard" / "megatron"))
    assert ZONELESS_TIMESTAMPS not in warnings
