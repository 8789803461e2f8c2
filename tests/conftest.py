"""Shared test helpers: fixture paths, the shared reference logs, golden-file comparison."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GOLDEN = Path(__file__).resolve().parent / "golden"
SHARED = ROOT.parent / "shared"

# Regenerate every golden file: LOGANALYZER_UPDATE_GOLDENS=1 python -m pytest
UPDATE = os.environ.get("LOGANALYZER_UPDATE_GOLDENS") == "1"


def scrub(text: str) -> str:
    """Remove what legitimately changes between machines and releases."""
    text = re.sub(r'"tool_version": "[^"]*"', '"tool_version": "X"', text)
    text = re.sub(r"loganalyzer \d+\.\d+\.\d+\S*", "loganalyzer X", text)
    return text.replace(str(ROOT) + "/", "")


def assert_golden(name: str, actual: str) -> None:
    """Compare with tests/golden/NAME; on a mismatch write NAME.actual beside it for a diff."""
    path = GOLDEN / name
    actual = scrub(actual)
    if UPDATE or not path.exists():
        if not UPDATE:
            pytest.fail(f"no golden {path}; run with LOGANALYZER_UPDATE_GOLDENS=1 to create it")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual)
        return
    expected = path.read_text()
    failed = path.with_name(path.name + ".actual")
    if actual != expected:
        failed.write_text(actual)
        pytest.fail(f"{name} differs from its golden; see `diff {path} {failed}`")
    failed.unlink(missing_ok=True)


@pytest.fixture(scope="session")
def shared_logs() -> Path:
    """The shared reference logs, which CI places beside the checkout."""
    logs = SHARED / "logs"
    assert logs.is_dir(), f"{logs} missing: the shared reference material must sit beside the repo"
    return logs
