"""W&B offline run folders written by wandb itself, read back value for value."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.parsers.wandb import WandbParser
from loganalyzer.parsers.wandb.transaction_log import BLOCK, read_log
from tests.conftest import FIXTURES, ROOT, assert_golden
from tests.wandb_offline import write_offline_run

SCRIPT = """
import wandb
run = wandb.init(project="p", config={"num_layers": 3, "hidden_size": 32, "fp16": True})
for step in range(1, 2001):
    wandb.log({"train/loss": 9 - step / 1000, "train/learning_rate": step * 1e-7,
               "train/global_step": step * 5, "text": "x" * (step % 3)}, step=step)
run.finish()
"""


@pytest.fixture(scope="module")
def offline_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_offline_run(SCRIPT, tmp_path_factory.mktemp("wandb"))


def test_current_wandb_offline_run_is_read_back_exactly(offline_run: Path) -> None:
    run = WandbParser().parse(offline_run)
    steps = np.arange(1, 2001)
    assert run.table["iteration"].to_list() == (steps * 5).tolist()
    assert run.table["loss"].to_list() == (9 - steps / 1000).tolist()
    assert run.table["lr"].to_list() == (steps * 1e-7).tolist()
    assert run.get("num_layers") == 3
    assert run.get("dtype") == "fp16"
    assert run.get("iteration_source") == "train/global_step"
    assert run.framework == "hf-trainer"
    assert any("2000 history values are not numbers" in w for w in run.warnings)


def test_a_truncated_log_keeps_every_record_before_the_cut(
    offline_run: Path, tmp_path: Path
) -> None:
    data = offline_run.read_bytes()
    whole = read_log(np.frombuffer(data, dtype=np.uint8))
    cut = whole.offsets[-3] + 10
    short = tmp_path / offline_run.name
    short.write_bytes(data[:cut])
    log = read_log(np.frombuffer(short.read_bytes(), dtype=np.uint8))
    assert log.records == whole.records[: len(whole.records) - 3]
    run = WandbParser().parse(short)
    assert any(f"ends inside a record at byte {whole.offsets[-3]}" in w for w in run.warnings)


@pytest.mark.parametrize("at", [100, BLOCK + 100, 2 * BLOCK + 3000])
def test_damage_costs_only_the_record_it_touched(offline_run: Path, at: int) -> None:
    data = bytearray(offline_run.read_bytes())
    whole = read_log(np.frombuffer(bytes(data), dtype=np.uint8))
    assert len(data) > 3 * BLOCK
    data[at] ^= 0xFF
    log = read_log(np.frombuffer(bytes(data), dtype=np.uint8))
    lost = {i for i, r in enumerate(whole.records) if r not in log.records}
    ends = [*whole.offsets[1:], len(data)]
    touched = {
        i
        for i, (start, end) in enumerate(zip(whole.offsets, ends, strict=True))
        if start <= at < end
    }
    assert lost == touched
    (hurt,) = log.damage
    assert hurt.start <= at < hurt.end
    assert hurt.records_after == sum(1 for offset in log.offsets if offset >= hurt.end)


def test_wandb_0_16_run_folder(monkeypatch: pytest.MonkeyPatch) -> None:
    (path,) = (FIXTURES / "wandb" / "v0_16_6").glob("wandb/offline-run-*/run-*.wandb")
    run = WandbParser().parse(path)
    iterations = list(range(1, 21))
    assert run.table["iteration"].to_list() == iterations
    assert run.table["loss"].to_list() == [10.0 - i / 4 for i in iterations]
    assert run.table["step_time_s"].to_list() == [0.5 + (i % 3) / 100 for i in iterations]
    assert run.get("num_layers") == 2


FIXTURE_CASES = sorted(p for p in (FIXTURES / "wandb").iterdir() if p.is_dir())


@pytest.mark.parametrize("folder", FIXTURE_CASES, ids=[p.name for p in FIXTURE_CASES])
def test_fixture_summaries_match_golden(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    args = ["summary", "-q", str(folder.relative_to(ROOT)), "--gpu", "h100-sxm", "--json"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["iterations"]["logged"] == 20
    assert_golden(f"wandb/{folder.name}.json", result.stdout)


def _old_run_with_metadata(tmp_path: Path) -> Path:
    """A copy of the wandb 0.16.6 run folder with a `files/wandb-metadata.json` naming its GPUs
    (older wandb writes them there rather than in the run's records)."""
    (source,) = (FIXTURES / "wandb" / "v0_16_6").glob("wandb/offline-run-*")
    folder = tmp_path / source.name
    shutil.copytree(source, folder)
    (folder / "files").mkdir()
    (folder / "files" / "wandb-metadata.json").write_text(
        json.dumps({"gpu": "NVIDIA A100-SXM4-80GB", "gpu_count": 4})
    )
    return folder


def test_an_old_run_folder_takes_its_gpu_from_wandb_metadata_json(tmp_path: Path) -> None:
    folder = _old_run_with_metadata(tmp_path)
    run = WandbParser().parse(next(folder.glob("run-*.wandb")))
    assert run.get("gpu_name") == "NVIDIA A100-SXM4-80GB"
    assert run.get("num_gpus") == 4
    assert str(run.config["gpu_name"].provenance) == "wandb metadata"


def test_a_gpu_from_wandb_metadata_says_so_in_json_and_text(tmp_path: Path) -> None:
    folder = _old_run_with_metadata(tmp_path)
    as_json = CliRunner().invoke(main, ["summary", "-q", "--json", str(folder)])
    assert as_json.exit_code == 0, as_json.output
    gpu = json.loads(as_json.stdout)["run"]["gpu"]
    assert (gpu["key"], gpu["source"]) == ("a100-sxm4-80gb", "wandb metadata")
    as_text = CliRunner().invoke(main, ["summary", "-q", str(folder)])
    assert as_text.exit_code == 0, as_text.output
    (line,) = [line for line in as_text.stdout.splitlines() if line.strip().startswith("GPUs")]
    assert line.endswith("GPUs         4 × A100 SXM4 80GB (from wandb metadata)")
