"""Hostile inputs and outputs: JSON nested past any framework's, an output device that is
full or closed, values too long to show, names that would act on the terminal, and W&B
references that would leave the cache."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer import jsontext
from loganalyzer.cli import main
from tests.conftest import FIXTURES

PLAIN = FIXTURES / "hf_trainer" / "plain"
DEEP = "[" * 100_000 + "]" * 100_000


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_json_depth_is_bounded() -> None:
    assert jsontext.loads(_nested(jsontext.MAX_DEPTH)) is not None
    for levels in (jsontext.MAX_DEPTH + 1, 100_000):
        with pytest.raises(jsontext.TooDeepError):
            jsontext.loads(_nested(levels))
    assert jsontext.depth({"a": [1, {"b": []}], "c": 2}) == 4
    assert jsontext.depth(7) == 0


@pytest.mark.parametrize("name", ["trainer_state.json", "config.json", "all_results.json"])
def test_an_output_dir_file_nested_100000_deep_is_a_one_line_error(
    tmp_path: Path, name: str
) -> None:
    root = tmp_path / "out"
    shutil.copytree(PLAIN, root)
    path = root / name
    if name == "trainer_state.json":
        path.write_text('{"global_step": 40, "log_history": ' + DEEP + "}")
    else:
        path.write_text('{"a": ' + DEEP + "}")
    result = CliRunner().invoke(main, ["summary", str(root / "trainer_state.json"), "--quiet"])
    assert result.exit_code == 1, result.output
    assert result.stderr == f"Error: {path}: JSON nested deeper than 100 levels; not read\n"


def test_a_deepspeed_config_nested_100000_deep_is_a_warning(tmp_path: Path) -> None:
    log = next((FIXTURES / "deepspeed").glob("*.log"))
    shutil.copy(log, tmp_path / log.name)
    (tmp_path / "ds_config.json").write_text('{"a": ' + DEEP + "}")
    result = CliRunner().invoke(main, ["summary", str(tmp_path / log.name), "--json"])
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert any("ds_config.json: not read (JSON nested deeper than 100" in w for w in warnings)


def test_a_wandb_value_nested_100000_deep_is_kept_as_its_text() -> None:
    from loganalyzer.parsers.wandb.records import loads

    assert loads(DEEP) == DEEP
