"""Run identity: which sources and launches are one run, and what summary does with several."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.errors import SeveralRunsError
from loganalyzer.load import load_run, load_runs
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES

BIGSCIENCE_RUNS = 10  # the folder's 8 Megatron-family logs and 2 HF+DeepSpeed ones


def test_bigscience_folder_is_refused_with_its_runs_listed(shared_logs: Path) -> None:
    folder = shared_logs / "bigscience"
    result = CliRunner().invoke(main, ["summary", "-q", str(folder), "--gpu", "v100-sxm2"])
    assert result.exit_code == 1
    assert f"holds {BIGSCIENCE_RUNS} different runs" in result.stderr
    assert "Pick one with --run N, or report each with --split-runs." in result.stderr
    assert (
        "meg_gpt2_base_n8_dp1_tp4_pp8-1809562.out: layers 48, hidden 7168, 32 GPUs, "
        "TP=4 PP=8 DP=1, iterations 10–200 of 1000 (20 records)"
    ) in result.stderr
    assert (
        "meg_ds_3d_gpt2_perf_n16-ds-off.out: layers 64, hidden 8192, 64 GPUs, TP=4 PP=16 DP=1, "
        "iterations 1–62 of 1000 (62 records)"
    ) in result.stderr
    assert result.stdout == ""


def test_bigscience_folder_split_gives_one_correct_summary_per_run(shared_logs: Path) -> None:
    folder = shared_logs / "bigscience"
    args = ["summary", "-q", "--json", "--split-runs", str(folder), "--gpu", "v100-sxm2"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    docs = json.loads(result.stdout)
    assert len(docs) == BIGSCIENCE_RUNS
    for doc in docs:
        assert len(doc["sources"]) == 1  # every file is a run of its own (each counts from 1)
        assert doc["iterations"]["segments"] == 1
        assert doc["restarts"] == []
        assert not any("differs from" in w for w in doc["warnings"])
    by_file = {Path(doc["sources"][0]["path"]).name: doc for doc in docs}
    small = by_file["meg_gpt2_base_n8_dp1_tp4_pp8-1809562.out"]
    assert small["run"]["num_gpus"] == 32
    assert small["run"]["model"]["hidden_size"] == 7168
    assert small["flops"]["mfu"] == pytest.approx(0.1152, abs=5e-4)  # the single-file figure
    large = by_file["meg_ds_3d_gpt2_perf_n16-ds-off.out"]
    assert large["run"]["num_gpus"] == 64
    assert large["run"]["model"]["hidden_size"] == 8192
    assert large["iterations"]["logged"] == 62


def test_split_text_heads_each_run(shared_logs: Path) -> None:
    args = ["summary", "-q", "--split-runs", str(shared_logs / "bigscience/gpt2-meg")]
    result = CliRunner().invoke(main, [*args, "--gpu", "v100-sxm2"])
    assert result.exit_code == 0, result.output
    headings = [
        line for line in result.stdout.splitlines() if line.startswith("Run ") and " of " in line
    ]
    assert [h.split(":")[0] for h in headings] == ["Run 1 of 3", "Run 2 of 3", "Run 3 of 3"]
    assert headings[2].endswith(
        "meg_gpt2_base_n8_dp1_tp4_pp8-1809562.out: layers 48, hidden 7168, 32 GPUs, "
        "TP=4 PP=8 DP=1, iterations 10–200 of 1000 (20 records)"
    )


def test_run_n_picks_one_run(shared_logs: Path) -> None:
    folder = str(shared_logs / "bigscience/gpt2-meg")
    listed = CliRunner().invoke(main, ["summary", "-q", folder])
    third = next(line for line in listed.stderr.splitlines() if "run 3:" in line)
    result = CliRunner().invoke(main, ["summary", "-q", "--json", "--run", "3", folder])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["sources"][0]["path"] in third
    too_far = CliRunner().invoke(main, ["summary", "-q", "--run", "4", folder])
    assert too_far.exit_code == 2
    assert "the sources hold 3 runs" in too_far.stderr


def test_six_benchmarks_in_one_file_are_six_runs(shared_logs: Path) -> None:
    """megatron_deepspeed_3: fp16 and bf16, each 20B on 8 GPUs, 200B on 80, 200B on 160;
    every benchmark logs iteration 2 from a fresh start."""
    path = str(shared_logs / "excerpts/megatron_deepspeed_3.txt")
    refused = CliRunner().invoke(main, ["summary", "-q", path])
    assert refused.exit_code == 1
    assert "holds 6 different runs" in refused.stderr
    assert "megatron_deepspeed_3.txt line 12:" in refused.stderr
    result = CliRunner().invoke(main, ["summary", "-q", "--json", "--split-runs", path])
    assert result.exit_code == 0, result.output
    docs = json.loads(result.stdout)
    steps = [doc["step_time_s"]["median"] for doc in docs]
    assert steps == [769.99, 844.81, 430.21, 777.09, 853.81, 434.14]
    assert [doc["reported"]["tflops_per_gpu"] for doc in docs] == [
        108.47,
        98.87,
        97.07,
        107.48,
        97.82,
        96.19,
    ]
    for doc in docs:
        assert doc["restarts"] == [] and doc["iterations"]["segments"] == 1
        assert doc["confidence"] == "low"


@pytest.mark.parametrize("case", ["restart_dir", "quirks/restart_in_file.log"])
def test_a_resumed_run_stays_one_run_with_its_restart(case: str) -> None:
    loaded = load_runs([str(FIXTURES / "megatron" / case)], load_registry())
    assert len(loaded) == 1
    result = CliRunner().invoke(
        main, ["summary", "-q", "--json", str(FIXTURES / "megatron" / case)]
    )
    assert result.exit_code == 0, result.output
    (restart,) = json.loads(result.stdout)["restarts"]
    assert restart["lost_iterations"] > 0


def test_load_run_refuses_several_runs_with_the_listing(shared_logs: Path) -> None:
    with pytest.raises(SeveralRunsError) as caught:
        load_run([str(shared_logs / "bigscience/gpt2-meg")], load_registry())
    assert len(caught.value.runs) == 3
    assert caught.value.exit_code == 1


def _copy_with(source: Path, target: Path, old: str, new: str) -> None:
    target.write_text(source.read_text().replace(old, new))


def test_another_shape_resuming_is_another_run(tmp_path: Path) -> None:
    """Same counter, different model: not a restart."""
    first, second = sorted((FIXTURES / "megatron" / "restart_dir").iterdir())
    (tmp_path / first.name).write_text(first.read_text())
    hidden = "  hidden_size ..................................... 256"
    _copy_with(second, tmp_path / second.name, hidden, hidden.replace("256", "512"))
    runs = load_runs([str(tmp_path)], load_registry())
    assert [r.run.get("hidden_size") for r in runs] == [256, 512]


def test_conflicting_facts_inside_one_run_are_in_the_output(tmp_path: Path) -> None:
    """A resume with another batch size is the same run; the conflict is said in stdout."""
    first, second = sorted((FIXTURES / "megatron" / "restart_dir").iterdir())
    (tmp_path / first.name).write_text(first.read_text())
    batch = "  global_batch_size ............................... 8"
    _copy_with(second, tmp_path / second.name, batch, batch.replace(" 8", " 16"))
    result = CliRunner().invoke(main, ["summary", "-q", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "global_batch_size = 16 differs from 8" in result.stdout.split("Warnings")[1]


def test_refusal_through_a_real_process(shared_logs: Path) -> None:
    folder = str(shared_logs / "bigscience/gpt2-meg")
    done = subprocess.run(
        [sys.executable, "-m", "loganalyzer", "summary", "-q", folder],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "holds 3 different runs" in done.stderr
    assert "Traceback" not in done.stderr


RESTART_IN_FILE = FIXTURES / "megatron" / "quirks" / "restart_in_file.log"


def _second_launch_with(tmp_path: Path, old: str, new: str) -> Path:
    """restart_in_file.log with one argument of its second launch (from line 29) changed."""
    lines = RESTART_IN_FILE.read_text().splitlines(keepends=True)
    changed = [line.replace(old, new) if number >= 29 else line for number, line in
               enumerate(lines, 1)]  # fmt: skip
    path = tmp_path / "launches.log"
    path.write_text("".join(changed))
    return path


def test_a_later_launch_of_another_shape_in_one_file_is_another_run(tmp_path: Path) -> None:
    hidden = "  hidden_size ..................................... 256"
    path = _second_launch_with(tmp_path, hidden, hidden.replace("256", "512"))
    runs = load_runs([str(path)], load_registry())
    assert [r.run.get("hidden_size") for r in runs] == [256, 512]
    assert [r.run.table["iteration"].to_list() for r in runs] == [
        [10, 20, 30, 40, 50, 60],
        [50, 60, 70, 80],
    ]
    assert runs[1].run.config["hidden_size"].provenance.line == 33
    assert all(r.run.table["segment"].to_list() == [0] * r.run.table.height for r in runs)


def test_a_resumed_launch_with_another_batch_is_one_run_with_a_warning(tmp_path: Path) -> None:
    batch = "  global_batch_size ............................... 8"
    path = _second_launch_with(tmp_path, batch, batch.replace(" 8", " 16"))
    (loaded,) = load_runs([str(path)], load_registry())
    assert loaded.run.table["segment"].n_unique() == 2
    assert loaded.run.get("global_batch_size") == 8
    assert f"{path}:32: global_batch_size = 16 differs from 8 ({path}:5); the first is used" in (
        loaded.run.warnings
    )


def test_the_gate_names_the_run_that_fails_it(shared_logs: Path) -> None:
    folder = str(shared_logs / "bigscience/gpt2-meg")
    args = ["summary", "-q", "--split-runs", folder, "--gpu", "v100-sxm2"]
    result = CliRunner().invoke(main, [*args, "--fail-under-mfu", "0.2"])
    assert result.exit_code == 4
    assert result.stderr.startswith("Error: run ")
    assert "steady-state MFU 11.5 % is below 20.0 %" in result.stderr
