"""An HF output_dir's trainer_state.json copies merged by step: a resumed run whose newest
state logs one more key per entry than the checkpoint it resumed from holds the same steps,
not a second pass over them.

The fixture is `fixtures/hf_trainer/plain` (a real Trainer run, see fixtures/README.md); the
extra key is what a resumed run with another callback or a newer transformers adds (e.g.
`grad_norm`, added to the Trainer's log in transformers 4.38)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.conftest import FIXTURES

PLAIN = FIXTURES / "hf_trainer" / "plain"


def _output_dir(tmp_path: Path, every_entry: bool, tokens_seen: bool) -> Path:
    """The plain run with the top-level state's training entries (or every entry) given a
    key the checkpoints' copies lack; `tokens_seen` False drops num_input_tokens_seen."""
    root = tmp_path / "out"
    shutil.copytree(PLAIN, root)
    for path in root.glob("**/trainer_state.json"):
        state = json.loads(path.read_text())
        for entry in state["log_history"]:
            if not tokens_seen:
                entry.pop("num_input_tokens_seen", None)
            if path.parent == root and (every_entry or "loss" in entry):
                entry["grad_scale"] = 1.0
        path.write_text(json.dumps(state))
    return root / "trainer_state.json"


@pytest.mark.parametrize(
    ("every_entry", "tokens_seen"), [(False, False), (False, True), (True, True)]
)
def test_a_key_the_checkpoints_lack_adds_no_entries(
    tmp_path: Path, every_entry: bool, tokens_seen: bool
) -> None:
    state = _output_dir(tmp_path, every_entry, tokens_seen)
    result = CliRunner().invoke(main, ["summary", str(state), "--json", "--quiet"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["sources"][0]["records"] == 8
    assert document["restarts"] == []
    assert document["time"]["logged_s"] == pytest.approx(91.6777, abs=0.01)
