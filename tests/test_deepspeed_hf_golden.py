"""Golden files for the DeepSpeed and HF Trainer fixtures: per-iteration table, long metrics
table and the summary document, one per line variant and run layout.

Regenerate with LOGANALYZER_UPDATE_GOLDENS=1 python -m pytest tests/test_deepspeed_hf_golden.py,
then review the diff.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.load import load_run
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES, ROOT, assert_golden

PLAIN_CONFIG = "fixtures/hf_trainer/plain/config.json"

# input (relative to fixtures/), the facts a user would pass
CASES = {
    "deepspeed/info_level.log": ["--gpu", "h100-sxm"],
    "deepspeed/warning_level.log": [],
    "deepspeed/pipeline_restart": ["--gpu", "v100-sxm2", "--seq-length", "1024"],
    "hf_trainer/plain": ["--gpu", "h100-sxm"],
    "hf_trainer/plain/trainer_state.json": ["--gpu", "h100-sxm", "--num-gpus", "1"],
    "hf_trainer/lora": ["--gpu", "h100-sxm"],
    "hf_trainer/lora/train.log": ["--gpu", "h100-sxm", "--model", PLAIN_CONFIG],
    "hf_trainer/variants/train.log": ["--gpu", "a100-sxm4-80gb"],
    "hf_trainer/resumed/train.log": ["--gpu", "a100-sxm4-80gb", "--model", "gpt2"],
    "hf_trainer/real/hef1023_seq2seq.log": [],
}


def _golden(case: str) -> str:
    parser, _, rest = case.partition("/")
    return f"{parser}/{rest.replace('/', '__')}"


@pytest.mark.parametrize("case", list(CASES))
def test_tables_match_golden(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    run = load_run([f"fixtures/{case}"], load_registry()).run
    assert_golden(_golden(case) + ".table.csv", run.table.write_csv())
    assert_golden(_golden(case) + ".metrics.csv", run.metrics.write_csv())


@pytest.mark.parametrize("case", list(CASES))
def test_summary_matches_golden(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    args = ["summary", "-q", f"fixtures/{case}", *CASES[case]]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    assert_golden(_golden(case) + ".json", result.stdout)
    text = CliRunner().invoke(main, args)
    assert_golden(_golden(case) + ".txt", text.stdout)


def test_cases_cover_every_fixture_folder() -> None:
    for parser in ("deepspeed", "hf_trainer"):
        folders = {p.name for p in (FIXTURES / parser).iterdir() if p.is_dir()}
        covered = {case.split("/")[1] for case in CASES if case.startswith(parser)}
        assert folders <= covered, f"{parser}: no golden for {sorted(folders - covered)}"


def _summary(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", *args])
    assert result.exit_code == 0, result.output
    document: dict[str, object] = json.loads(result.stdout)
    return document


def test_both_real_trainer_runs_give_mfu_and_lora_follows_the_frozen_rule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plain and LoRA runs differ only in the adapter: same shape, batch and sequence.
    The LoRA run's FLOPs are those of the plain run's shape with the frozen rule applied
    (`--lora --trainable-params 4096`, the count PEFT printed), with no flag but `--gpu`:
    the shape is the base model's config.json saved beside the adapter."""
    monkeypatch.chdir(ROOT)
    plain = _summary("fixtures/hf_trainer/plain", "--gpu", "h100-sxm")
    lora = _summary("fixtures/hf_trainer/lora", "--gpu", "h100-sxm")
    flops = {}
    for name, document in (("plain", plain), ("lora", lora)):
        figures = document["flops"]
        assert isinstance(figures, dict)
        assert figures["mfu"] is not None and figures["mfu"] > 0
        flops[name] = figures["per_iteration"]
    flags = _summary(
        "fixtures/hf_trainer/plain",
        *("--gpu", "h100-sxm", "--lora", "--trainable-params", "4096"),
    )["flops"]
    assert isinstance(flags, dict)
    assert flops["lora"] == flags["per_iteration"]
    # B·s·(6W + A) against B·s·(4W + A + 6T), the adapters costing 6 FLOPs per parameter per
    # token as any trained weight does: 1,047,527,424 and 740,294,656 FLOPs.
    assert (flops["plain"], flops["lora"]) == (1047527424.0, 740294656.0)
    run = lora["run"]
    assert isinstance(run, dict)
    assert run["provenance"]["trainable_params"].startswith("fixtures/hf_trainer/lora/train.log:")
    assert run["provenance"]["num_layers"] == (
        "fixtures/hf_trainer/lora/config.json (the base model's, beside the adapter)"
    )


def test_unknown_gpu_and_shape_are_named_with_their_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    warnings = _summary("fixtures/deepspeed/warning_level.log")["warnings"]
    assert isinstance(warnings, list)
    assert any(
        w.startswith(
            "model shape unknown: num_layers, hidden_size, num_attention_heads,"
            " seq_length, vocab_size not in the run; pass --model"
        )
        for w in warnings
    )
    assert "GPU type unknown: pass --gpu (or --peak-tflops)" in warnings
    assert "global batch size unknown: pass --global-batch-size" in warnings
    stdout = _summary("fixtures/hf_trainer/lora/train.log", "--gpu", "h100-sxm")["warnings"]
    assert any("FLOPs unknown" in w and "--model" in w for w in stdout)  # type: ignore[union-attr]


def test_a_checkpoint_copy_fills_what_the_newest_state_lacks(tmp_path: Path) -> None:
    """An entry only an older checkpoint's trainer_state.json holds is kept, and said."""
    source = FIXTURES / "hf_trainer" / "plain"
    newest = json.loads((source / "trainer_state.json").read_text())
    newest["log_history"] = [e for e in newest["log_history"] if e["step"] != 10]
    (tmp_path / "checkpoint-20").mkdir()
    (tmp_path / "trainer_state.json").write_text(json.dumps(newest))
    older = (source / "checkpoint-20" / "trainer_state.json").read_text()
    (tmp_path / "checkpoint-20" / "trainer_state.json").write_text(older)
    run = load_run([str(tmp_path)], load_registry()).run
    assert run.table["iteration"].to_list() == [5, 10, 15, 20, 25, 30, 35, 40]
    assert any("1 log entries the newer state lacks" in w for w in run.warnings)


def test_lora_output_dir_in_a_real_subprocess() -> None:
    """The installed command on the LoRA run: JSON on stdout, the frozen rule applied."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "loganalyzer",
            "summary",
            "-q",
            "--json",
            "fixtures/hf_trainer/lora",
            "--gpu",
            "h100-sxm",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert "frozen:" in document["flops"]["derivation"]
    assert document["run"]["framework"] == "hf-trainer"


def test_adapter_base_model_named_like_a_preset_gives_the_shape(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PEFT output_dir without config.json, its base model in no local path or cache:
    `openai-community/gpt2` is the `gpt2` preset."""
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    source = FIXTURES / "hf_trainer" / "lora"
    for name in ("trainer_state.json", "all_results.json"):
        (tmp_path / name).write_text((source / name).read_text())
    adapter = json.loads((source / "adapter_config.json").read_text())
    adapter["base_model_name_or_path"] = "openai-community/gpt2"
    (tmp_path / "adapter_config.json").write_text(json.dumps(adapter))
    run = load_run([str(tmp_path)], load_registry()).run
    assert (run.get("num_layers"), run.get("hidden_size"), run.get("lora")) == (12, 768, True)
    where = str(run.config["num_layers"].provenance)
    assert where == "preset gpt2 (the adapter's base model openai-community/gpt2)"
    adapter["base_model_name_or_path"] = "someone/own-model-7b"
    (tmp_path / "adapter_config.json").write_text(json.dumps(adapter))
    assert load_run([str(tmp_path)], load_registry()).run.get("num_layers") is None
