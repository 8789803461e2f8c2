"""Files a parser reads as part of another source are listed as read, and how; those it
leaves unread on purpose say why; none is called unrecognised."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.conftest import ROOT


def test_output_dir_files_are_listed_as_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    run = "fixtures/hf_trainer/lora"
    result = CliRunner().invoke(main, ["summary", "--json", run, "--gpu", "h100-sxm"])
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    part = f"as part of the output_dir {run}"
    assert document["read_along"] == [
        {
            "path": f"{run}/adapter_config.json",
            "how": f"{part}: the PEFT adapter (LoRA rank, target modules, base model)",
        },
        {"path": f"{run}/all_results.json", "how": f"{part}: the final train metrics"},
        {"path": f"{run}/config.json", "how": f"{part}: the model's shape"},
        *(
            {
                "path": f"{run}/checkpoint-{step}/trainer_state.json",
                "how": f"{part}: an older trainer_state.json (nothing taken from it)",
            }
            for step in (20, 40)
        ),
    ]
    assert document["ignored"] == [
        {
            "path": f"{run}/train_results.json",
            "reason": f"{run}/all_results.json holds the same metrics and was read",
        },
        *(
            {
                "path": f"{run}/checkpoint-{step}/adapter_config.json",
                "reason": f"a checkpoint's copy of {run}/adapter_config.json, which was read",
            }
            for step in (20, 40)
        ),
    ]
    assert f"read {run}/config.json {part}: the model's shape\n" in result.stderr
    assert "no parser recognises" not in result.stderr


def test_a_ds_config_beside_the_log_is_listed_as_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    run = "fixtures/deepspeed/pipeline_restart"
    result = CliRunner().invoke(main, ["summary", "-q", "--json", run])
    document = json.loads(result.stdout)
    assert document["ignored"] == []
    assert document["read_along"] == [
        {
            "path": f"{run}/ds_config.json",
            "how": f"as part of {run}/train.log: the DeepSpeed settings beside it",
        }
    ]


def test_the_report_lists_them_as_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    out = f"{tmp_path}/report.html"
    args = ["report", "-q", "fixtures/hf_trainer/plain", "--gpu", "h100-sxm", "-o", out]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    html = Path(out).read_text(encoding="utf-8")
    assert "<summary>2 sources read (4 more files with them), 3 ignored</summary>" in html
    assert (
        "read as part of the output_dir fixtures/hf_trainer/plain: the final train metrics" in html
    )
