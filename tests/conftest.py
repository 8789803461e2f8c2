"""Shared test helpers: fixture paths, the shared reference logs, golden-file comparison, and
results computed once per test session whichever xdist worker needs them first."""

from __future__ import annotations

import compileall
import hashlib
import os
import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

try:
    import fcntl
except ImportError:  # Windows: each worker computes what it needs
    fcntl = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
GOLDEN = Path(__file__).resolve().parent / "golden"
SHARED = ROOT.parent / "shared"

# Regenerate every golden file: LOGANALYZER_UPDATE_GOLDENS=1 python -m pytest
UPDATE = os.environ.get("LOGANALYZER_UPDATE_GOLDENS") == "1"


def pytest_configure(config: pytest.Config) -> None:
    """Compile the package and the tests once, before any xdist worker starts: an environment
    that sets PYTHONDONTWRITEBYTECODE (as CI may) has every worker, and every `loganalyzer`
    process a test starts, compile them again (0.72 instead of 0.49 s of CPU for a summary
    of the bundled example; 20 % of the hostile-input tests' time). Bytecode already written
    is read whatever the variable says."""
    if hasattr(config, "workerinput"):
        return
    for folder in ("loganalyzer", "parsers", "tests"):
        compileall.compile_dir(ROOT / folder, quiet=1, workers=0)


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


T = TypeVar("T")


class SessionResults:
    """Values computed once per session and shared by the xdist workers through files in the
    folder they share (the session's base temporary folder): a worker that needs a value
    another computed reads it instead of computing it again. A lock per key makes a second
    worker wait for the first rather than compute beside it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, key: str, compute: Callable[[], T]) -> T:
        if fcntl is None:
            return compute()
        stem = self.folder / hashlib.sha256(key.encode()).hexdigest()[:32]
        done = stem.with_suffix(".pickle")
        with stem.with_suffix(".lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                if done.exists():
                    value: T = pickle.loads(done.read_bytes())
                    return value
                value = compute()
                partial = stem.with_suffix(".partial")
                partial.write_bytes(pickle.dumps(value))
                partial.replace(done)
                return value
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="session")
def session_results(tmp_path_factory: pytest.TempPathFactory) -> SessionResults:
    """Under xdist each worker's base folder is `<session>/popen-gwN`: the values go in a
    folder of `<session>`, which every worker of this session sees and no other session."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    folder = shared / "session-results"
    folder.mkdir(exist_ok=True)
    return SessionResults(folder)
