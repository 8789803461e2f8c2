"""A LoRA output_dir's base model shape, found offline: a config.json beside the adapter, the
local path `base_model_name_or_path` names, or the local Hugging Face cache; else a warning
naming the flag that supplies it.

The base config is the plain run's config.json (written by transformers' save_pretrained):
2 layers, hidden 64, 2 heads, vocabulary 1000, as `grep -E '"n_(layer|embd|head)"|vocab'`
on fixtures/hf_trainer/plain/config.json shows.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from loganalyzer.load import load_run
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES

LORA = FIXTURES / "hf_trainer" / "lora"
BASE_CONFIG = FIXTURES / "hf_trainer" / "plain" / "config.json"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _adapter_dir(tmp_path: Path, base: str | None, revision: str | None = None) -> Path:
    """The LoRA run's trainer_state.json and adapter, without the config.json beside it."""
    out = tmp_path / "out"
    out.mkdir()
    for name in ("trainer_state.json", "all_results.json"):
        shutil.copy(LORA / name, out / name)
    adapter = json.loads((LORA / "adapter_config.json").read_text())
    adapter["base_model_name_or_path"] = base
    adapter["revision"] = revision
    (out / "adapter_config.json").write_text(json.dumps(adapter))
    return out


def _shape(out: Path) -> tuple[object, object, object, str]:
    run = load_run([str(out)], load_registry()).run
    where = str(run.config["num_layers"].provenance) if "num_layers" in run.config else ""
    return run.get("num_layers"), run.get("hidden_size"), run.get("num_attention_heads"), where


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Never the machine's own cache: each test has its own."""
    cache = tmp_path / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    return cache


def test_fixture_config_beside_the_adapter() -> None:
    assert _shape(LORA) == (
        2,
        64,
        2,
        f"{LORA}/config.json (the base model's, beside the adapter)",
    )


def test_base_model_at_a_local_path(tmp_path: Path) -> None:
    base = tmp_path / "models" / "tiny-gpt2"
    base.mkdir(parents=True)
    shutil.copy(BASE_CONFIG, base / "config.json")
    out = _adapter_dir(tmp_path, str(base))
    assert _shape(out) == (
        2,
        64,
        2,
        f"{base}/config.json (the adapter's base model {base}, a local path)",
    )


def test_base_model_in_the_hugging_face_cache(tmp_path: Path, _empty_cache: Path) -> None:
    """`huggingface_hub`'s layout: refs/main holds the commit of snapshots/<commit>/."""
    repo = _empty_cache / "models--someone--tiny-gpt2"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    shutil.copy(BASE_CONFIG, snapshot / "config.json")
    out = _adapter_dir(tmp_path, "someone/tiny-gpt2")
    where = "the adapter's base model someone/tiny-gpt2, from the Hugging Face cache"
    assert _shape(out) == (2, 64, 2, f"{snapshot}/config.json ({where})")


def test_hf_home_and_a_pinned_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without HF_HUB_CACHE the cache is $HF_HOME/hub; a revision given as a commit is used
    as it is (no refs/ needed)."""
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    snapshot = tmp_path / "hf" / "hub" / "models--tiny-gpt2" / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    shutil.copy(BASE_CONFIG, snapshot / "config.json")
    assert _shape(_adapter_dir(tmp_path, "tiny-gpt2", revision=COMMIT))[:3] == (2, 64, 2)


def test_a_base_model_found_nowhere_names_the_flag(tmp_path: Path, _empty_cache: Path) -> None:
    run = load_run([str(_adapter_dir(tmp_path, "someone/own-model-7b"))], load_registry()).run
    assert run.get("num_layers") is None
    folder = _empty_cache / "models--someone--own-model-7b"
    assert any(
        "the LoRA adapter's base model someone/own-model-7b: no config.json at"
        f" someone/own-model-7b nor in the Hugging Face cache {folder}, and it is not a"
        " preset; pass --model with its config.json (or a preset)" in w
        for w in run.warnings
    )


def test_no_base_model_named_says_which_flag(tmp_path: Path) -> None:
    run = load_run([str(_adapter_dir(tmp_path, None))], load_registry()).run
    assert run.get("num_layers") is None
    assert any(
        "names no base model (base_model_name_or_path is null) and no config.json is beside"
        " it: the model shape is unknown; pass --model with the base model's config.json" in w
        for w in run.warnings
    )


def test_a_run_that_died_before_saving_keeps_its_checkpoint_adapter(tmp_path: Path) -> None:
    """Only checkpoint-20/ (trainer_state.json, adapter_config.json) and the base model's
    config.json: the adapter is the checkpoint's, and the FLOPs follow the frozen rule."""
    out = tmp_path / "out"
    shutil.copytree(LORA / "checkpoint-20", out / "checkpoint-20")
    shutil.copy(LORA / "config.json", out / "config.json")
    run = load_run([str(out)], load_registry()).run
    assert run.get("lora") is True
    assert run.get("lora_rank") == 8
    assert str(run.config["lora"].provenance) == f"{out}/checkpoint-20/adapter_config.json"
    assert run.table["iteration"].to_list() == [5, 10, 15, 20]
