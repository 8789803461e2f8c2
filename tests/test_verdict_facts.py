"""Verdicts that agree with the causes, one per loss, with advice the run's facts allow, and
an unknown MFU that says what is missing: end to end through the CLI on the bundled example
and the shared BigScience logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.render.numbers import listing

EXAMPLE = "fixtures/megatron/bigscience_gpt2_tp4_pp8.out"


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, ["summary", "-q", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


def _doc(*args: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(_run("--json", *args))
    return document


def test_the_example_says_its_evaluation_once_and_no_smaller_micro_batch() -> None:
    """Iterations 101-110 paid for the evaluation after iteration 100 (2 s): one verdict,
    EVALUATION_COST, not also SLOW_STEPS 'one iteration that stalled'. Its micro-batch is
    already 1 (4 micro-batches at global batch 4, DP=1): the bubble's lever is a larger
    global batch, not a smaller micro-batch."""
    doc = _doc(EXAMPLE, "--gpu", "v100-sxm2")
    codes = [v["code"] for v in doc["verdicts"]]
    assert "EVALUATION_COST" in codes and "SLOW_STEPS" not in codes
    (cause,) = [s["cause"] for s in doc["slow_steps"]]
    assert (cause["kind"], cause["evidence_kind"]) == ("evaluation", "line")
    bubble = next(v for v in doc["verdicts"] if v["code"] == "PIPELINE_BUBBLE")
    assert "micro-batch-size" not in bubble["message"]
    assert "smaller micro-batch" not in bubble["message"]
    assert "a larger global batch" in bubble["message"]
    assert bubble["lost_s"] > 0


def test_a_2021_megatron_deepspeed_run_with_dp_1_gets_no_flags_it_never_had(
    shared_logs: Path,
) -> None:
    """BigScience's Megatron-DeepSpeed of 2021 (PP=16, DP=1) prints an arguments dump
    without overlap_grad_reduce, overlap_param_gather or overlap_p2p_comm: none is named, and
    with one data-parallel rank there are no data-parallel reductions to overlap."""
    log = shared_logs / "bigscience/gpt2-meg-ds-3d/meg_ds_3d_gpt2_perf_n16-ds-off.out"
    doc = _doc(str(log), "--gpu", "v100-sxm2")
    (verdict,) = [v for v in doc["verdicts"] if v["code"] == "EXPOSED_COMMUNICATION"]
    assert "--overlap" not in verdict["message"]
    assert "data-parallel" not in verdict["message"]
    assert "overlapping the pipeline sends with compute" in verdict["message"]


def test_an_unknown_mfu_says_what_is_missing_although_the_gpu_was_given(
    shared_logs: Path, tmp_path: Path
) -> None:
    """The BigScience HF+DeepSpeed log prints no sequence length: with `--gpu v100-sxm2` the
    MFU is unknown for want of --seq-length, not of --gpu, and a verdict says so."""
    log = str(shared_logs / "bigscience/gpt2-hf-ds/hf_ds_gpt2_base_n8-1832573.out")
    doc = _doc(log, "--gpu", "v100-sxm2")
    assert doc["flops"]["mfu_missing"] == [{"input": "seq_length", "option": "--seq-length"}]
    (verdict,) = [v for v in doc["verdicts"] if v["code"] == "MFU_UNKNOWN"]
    assert verdict["message"] == (
        "MFU unknown: the run does not give its sequence length; pass --seq-length"
    )
    markdown = _run(log, "--gpu", "v100-sxm2", "--markdown")
    assert "| MFU (steady) | unknown: pass --seq-length |" in markdown
    assert "pass --gpu" not in markdown
    assert "MFU                  unknown: pass --seq-length" in _run(log, "--gpu", "v100-sxm2")
    page = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", "-q", log, "--gpu", "v100-sxm2", "-o", str(page)])
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "unknown: pass --seq-length" in html and "pass --gpu" not in html
    doc = _doc(log, "--gpu", "v100-sxm2", "--seq-length", "1024")
    assert doc["flops"]["mfu"] is not None and doc["flops"]["mfu_missing"] == []
    assert "MFU_UNKNOWN" not in [v["code"] for v in doc["verdicts"]]


def test_hf_eval_runtime_splits_a_save_and_an_evaluation_at_one_step(shared_logs: Path) -> None:
    """generated/hf_run: at step 20 the Trainer logs, evaluates (`eval_runtime` 1.1908 s in
    trainer_state.json's log_history) and saves (checkpoint-20/), all before the record of
    steps 21-25, which lost 4.6 s: the evaluation gets its 1.19 s, the save the rest; the slow
    record of steps 16-20 before them is not the same events again."""
    doc = _doc(str(shared_logs / "generated/hf_run/out"))
    slow = {s["first_iteration"]: s["cause"] for s in doc["slow_steps"]}
    shares = {s["kind"]: s["seconds"] for s in slow[21]["shares"]}
    assert abs(shares["evaluation"] - 1.1908) < 1e-6
    assert abs(shares["evaluation"] + shares["checkpoint_save"] - 4.5865) < 1e-3
    assert slow[16]["kind"] == "unknown"
    lines = {line["name"]: line["seconds"] for line in doc["goodput"]["lines"]}
    assert abs(lines["evaluation"] - 1.1908) < 1e-6


def test_the_options_an_unknown_mfu_needs_read_as_a_list() -> None:
    """ALCF's Megatron-DeepSpeed log gives neither its shape nor its GPUs: three options, said
    as a sentence lists them in the verdict and in the MFU row alike."""
    log = "fixtures/megatron_deepspeed/alcf_tgs.txt"
    (verdict,) = [v for v in _doc(log)["verdicts"] if v["code"] == "MFU_UNKNOWN"]
    assert verdict["message"].endswith("; pass --model, --gpu and --num-gpus")
    assert "MFU                  unknown: pass --model, --gpu and --num-gpus" in _run(log)


@pytest.mark.parametrize(
    ("items", "said"),
    [((), ""), (("--gpu",), "--gpu"), (("a", "b"), "a and b"), (("a", "b", "c"), "a, b and c")],
)
def test_listing_reads_as_a_sentence(items: tuple[str, ...], said: str) -> None:
    assert listing(items) == said
