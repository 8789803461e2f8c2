"""The precision a run trained in: stated, proved by a dynamic loss scale, or assumed, and
never bf16 on a device that has none (a V100)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from loganalyzer.cli import main
from tests.conftest import FIXTURES, SHARED

# Megatron-LM's iteration lines of an fp16 run on V100s, its loss scale halving after each
# overflow: bigscience-workshop/bigscience, the run's stdout as shared in
# ../shared/logs/bigscience/gpt2-meg/meg_gpt2_perf_n16.out, lines 341-345 (without the
# arguments dump, which states fp16).
FP16_LINES = (
    (SHARED / "logs" / "bigscience" / "gpt2-meg" / "meg_gpt2_perf_n16.out")
    .read_text(encoding="utf-8", errors="replace")
    .splitlines()[340:345:2]
)


def _summary(*args: str) -> tuple[int, dict[str, Any] | None, str]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", *args])
    doc = json.loads(result.stdout) if result.exit_code == 0 else None
    return result.exit_code, doc, result.output


def test_a_dynamic_loss_scale_proves_fp16(tmp_path: Path) -> None:
    log = tmp_path / "iterations.log"
    log.write_text("\n".join(FP16_LINES) + "\n", encoding="utf-8")
    assert "loss scale: 4294967296.0" in FP16_LINES[0]
    code, doc, output = _summary(str(log))
    assert code == 0, output
    assert doc is not None
    assert (doc["run"]["dtype"], doc["run"]["dtype_assumed"]) == ("fp16", False)
    assert f"precision: fp16, from the dynamic loss scale at {log}:1" in doc["warnings"]
    assert doc["run"]["provenance"]["dtype"] == f"derived: the dynamic loss scale at {log}:1"


def test_a_loss_scale_of_one_proves_nothing() -> None:
    """Megatron prints `loss scale: 1.0` for bf16 runs: the precision stays assumed."""
    path = FIXTURES / "bad" / "lone_cr.log"
    assert "loss scale: 1.0" in path.read_text(encoding="utf-8")
    code, doc, output = _summary(str(path))
    assert code == 0, output
    assert doc is not None
    assert doc["run"]["dtype_assumed"] is True
    assert not any(w.startswith("precision: fp16") for w in doc["warnings"])


def test_a_single_power_of_two_loss_scale_proves_fp16() -> None:
    """A 2022 BERT log (fixtures/megatron/bert_2022_timers.txt) states no precision; its one
    iteration line prints `loss scale: 8388608.0` (2^23)."""
    code, doc, output = _summary(str(FIXTURES / "megatron" / "bert_2022_timers.txt"))
    assert code == 0, output
    assert doc is not None
    assert (doc["run"]["dtype"], doc["run"]["dtype_assumed"]) == ("fp16", False)


def test_a_device_without_bf16_is_assumed_to_run_fp16() -> None:
    code, doc, output = _summary(str(FIXTURES / "bad" / "lone_cr.log"), "--gpu", "v100-sxm2")
    assert code == 0, output
    assert doc is not None
    assert (doc["run"]["dtype"], doc["run"]["dtype_assumed"]) == ("fp16", True)
    assert doc["peak"]["dtype"] == "fp16"
    assert doc["peak"]["tflops_per_gpu"] == 125.0
    assert (
        "precision unknown: fp16 assumed (Tesla V100 SXM2 (16/32GB) has no bf16); pass --dtype"
        in doc["warnings"]
    )


def test_bf16_on_a_device_without_it_is_refused() -> None:
    code, _, output = _summary(
        str(FIXTURES / "bad" / "lone_cr.log"), "--gpu", "v100-sxm2", "--dtype", "bf16"
    )
    assert code == 2
    assert output.count("\n") == 1
    assert output.startswith("Error: --dtype bf16: Tesla V100 SXM2 (16/32GB) has no bf16")
    assert "pass --dtype fp16" in output
