"""The wall clock reaches the ending: a hang before a kill is a line of the goodput budget
(`goodput.held_after`), the waterfall's last step includes it, the invariants hold."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from loganalyzer.analysis.goodput import HANG, held_after
from loganalyzer.analysis.outcome import Outcome
from loganalyzer.cli import main
from loganalyzer.render.wording import hang_note

ENDINGS = Path(__file__).parent.parent / "fixtures" / "endings"

# The arguments block as Megatron prints it (fixtures/endings/time_limit/
# bigscience_megatron_job_then_step.log, from bigscience-workshop/bigscience:experiments/
# gpt2-meg/meg_gpt2_perf_n16-1999618.out@6980df2d), on 64 GPUs (TP4 PP16).
ARGUMENTS = """\
using world size: 64, data-parallel-size: 1, tensor-model-parallel size: 4, \
pipeline-model-parallel size: 16
------------------------ arguments ------------------------
  bf16 ............................................ True
  global_batch_size ............................... 1024
  hidden_size ..................................... 8192
  log_interval .................................... 10
  micro_batch_size ................................ 4
  num_attention_heads ............................. 32
  num_layers ...................................... 64
  pipeline_model_parallel_size .................... 16
  seq_length ...................................... 1024
  tensor_model_parallel_size ...................... 4
  train_iters ..................................... 1000
  world_size ...................................... 64
-------------------- end of arguments ---------------------
training ...
"""
# Megatron-core's training_log: log_string = f" [{datetime.now().strftime('%Y-%m-%d %H:%M:%S')}]"
# then " iteration {:8d}/{:8d} |" (core_v0.6..v0.14; /work/shared/logs/FORMATS.md), the
# fields as fixtures/corpus/megatron/core_2024_dense_baseline_throughput.log prints them.
ITERATION = (
    " [{at}] iteration {it:8d}/    1000 | consumed samples: {samples:12d} | elapsed time per "
    "iteration (ms): {ms:.1f} | learning rate: 1.200000E-05 | global batch size:  1024 | "
    "lm loss: {loss:.6E} | loss scale: 1.0 | grad norm: 1.000 | number of skipped "
    "iterations:   0 | number of nan iterations:   0 |"
)
# slurm's lines as bigscience_megatron_job_then_step.log has them, the job and host of the
# issue's example.
SLURM = """\
srun: Job step aborted: Waiting up to 62 seconds for job step to finish.
slurmstepd: error: *** JOB 81236 ON node-001 CANCELLED AT 2026-03-02T18:00:03 DUE TO TIME LIMIT ***
slurmstepd: error: *** STEP 81236.0 ON node-001 CANCELLED AT 2026-03-02T18:00:03 DUE TO TIME LIMIT ***
"""  # noqa: E501


def _log(tmp_path: Path, ending: str) -> Path:
    """90 records of 10 iterations at 12.7 s each, the last (iteration 900) at 10:15:00."""
    last = datetime(2026, 3, 2, 10, 15, 0)
    lines = [ARGUMENTS]
    for k in range(1, 91):
        at = last - timedelta(seconds=127 * (90 - k))
        lines.append(
            ITERATION.format(
                at=at.strftime("%Y-%m-%d %H:%M:%S"),
                it=10 * k,
                samples=10240 * k,
                ms=12700.0 + (k % 3),
                loss=3.0 - k / 100,
            )
            + "\n"
        )
    path = tmp_path / "train.log"
    path.write_text("".join(lines) + ending)
    return path


# the model and GPU, for the MFU waterfall (64 H100s, as the example)
MODEL = ["--gpu", "h100-sxm", "--vocab-size", "50257"]


def _summary(path: Path) -> dict:
    result = CliRunner().invoke(main, ["summary", str(path), "--json", *MODEL])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _lines(doc: dict) -> dict[str, float]:
    return {line["name"]: line["seconds"] for line in doc["goodput"]["lines"]}


def test_hang_until_the_time_limit_is_a_budget_line(tmp_path: Path) -> None:
    """The issue's example: last iteration at 10:15, slurm's time limit at 18:00:03."""
    (tmp_path / "done").mkdir()
    done = _summary(_log(tmp_path / "done", ""))
    hung = _summary(_log(tmp_path, SLURM))
    outcome = hung["outcome"]
    assert (outcome["status"], outcome["reason"]) == ("hung", "time_limit")
    hang = 7 * 3600 + 45 * 60 + 3  # 10:15:00 -> 18:00:03
    assert outcome["hang_s"] == hang
    assert round(outcome["hang_gpu_hours"]) == 496
    lines = _lines(hung)
    # one log interval at the pace (10 x 12.7 s) was the next record still to come
    assert abs(lines[HANG] - (hang - 127.0)) < 1
    # the wall clock reaches the ending: the log's 190.5 min (89 gaps of 127 s between the
    # stamps, the first record's 127 s) plus the hang
    assert abs(hung["goodput"]["wall_s"] - (done["goodput"]["wall_s"] + hang)) < 1e-6
    assert abs(sum(lines.values()) - hung["goodput"]["wall_s"]) < 1e-6
    assert hung["goodput"]["hang"]["bound"] == "exact"
    # goodput falls by the clock's ratio
    ratio = done["goodput"]["wall_s"] / hung["goodput"]["wall_s"]
    assert abs(hung["goodput"]["goodput"] - done["goodput"]["goodput"] * ratio) < 1e-9
    assert hung["goodput"]["goodput"] < 0.3 < 0.99 < done["goodput"]["goodput"]
    assert not [v for v in hung["verdicts"] if v["code"].startswith("INVARIANT")]
    assert "hang before the ending" in hung["goodput"]["summary"]
    # the waterfall's last step ends at the goodput MFU, the hang named in it
    last = hung["waterfall"]["steps"][-1]
    assert "hang before the ending" in last["name"]
    assert abs(last["value_after"] - hung["flops"]["mfu_goodput"]) < 1e-12
    log = str(tmp_path / "train.log")
    text = CliRunner().invoke(main, ["summary", log, *MODEL]).stdout
    assert "hang before the ending" in text
    markdown = CliRunner().invoke(main, ["summary", log, "--markdown", *MODEL]).stdout
    assert "| hang before the ending |" in markdown


def test_a_completed_run_has_no_hang_line(tmp_path: Path) -> None:
    doc = _summary(_log(tmp_path, ""))
    assert doc["goodput"]["hang"] is None
    assert _lines(doc)[HANG] == 0.0


def test_a_hang_of_unknown_length_is_a_note_not_a_line() -> None:
    """Megatron's iteration lines carry no time and nothing after them has one: slurm's time
    limit at 21:52:36 ends the run, how long after iteration 4 is unknown."""
    doc = _summary(ENDINGS / "time_limit" / "bigscience_megatron_job_then_step.log")
    assert (doc["outcome"]["status"], doc["outcome"]["hang_s"]) == ("killed", None)
    assert _lines(doc)[HANG] == 0.0
    hang = doc["goodput"]["hang"]
    assert hang["seconds"] is None and "unknown" in hang["note"]
    assert "hang before the ending" in doc["goodput"]["summary"]
    assert "unknown" in doc["goodput"]["summary"]


def test_a_hang_known_from_a_later_line_is_at_least() -> None:
    """A monitor's pulses span 2 h after the last iteration: the hang lasted at least that."""
    path = ENDINGS / "hung" / "bigscience_tr11_eval_hang_monitor_pulses.log"
    doc = _summary(path)
    assert doc["outcome"]["status"] == "hung"
    assert doc["goodput"]["hang"]["bound"] == "at_least"
    assert _lines(doc)[HANG] > 3600
    assert "at least" in doc["goodput"]["summary"]
    text = CliRunner().invoke(main, ["summary", str(path)]).output
    assert "at least" in text


def _outcome(**fields: object) -> Outcome:
    base = {"status": "crashed", "reason": "nccl_timeout", "last_iteration": 100}
    return Outcome(**(base | fields))  # type: ignore[arg-type]


def test_the_rule_counts_beyond_one_interval() -> None:
    """A crash within one log interval of the last record held nothing; an NCCL watchdog
    that fired 25,624,887 ms after its collective began held at least that, less the
    interval in flight."""
    assert held_after(_outcome(hang_s=50.0, hang_bound="exact"), 60.0) is None
    assert held_after(_outcome(status="completed", hang_s=5000.0), 60.0) is None
    assert held_after(_outcome(status="stopped", hang_s=5000.0), 60.0) is None
    watchdog = held_after(_outcome(collective={"op": "ALLREDUCE", "ran_ms": 25624887}), 60.0)
    assert watchdog is not None
    assert (watchdog.seconds, watchdog.bound, watchdog.extends_s) == (
        25624.887 - 60.0,
        "at_least",
        25624.887,
    )
    unknown = held_after(_outcome(status="killed", reason="time_limit"), 60.0)
    assert unknown is not None and unknown.seconds is None and hang_note(unknown)
    assert held_after(_outcome(reason="oom"), 60.0) is None


def test_an_nccl_watchdog_crash_held_at_least_its_collective() -> None:
    """A real watchdog line (LlamaFactory issue 2902, PyTorch 2.x): the ALLREDUCE ran for
    600,017 ms before the crash; the log's lines after the last record carry no date, so
    the collective's own time is the hang's lower bound, less the interval in flight."""
    path = ENDINGS / "nccl_timeout" / "llamafactory_2902_hf_bar_glued_torch2.log"
    doc = _summary(path)
    assert (doc["outcome"]["status"], doc["outcome"]["reason"]) == ("crashed", "nccl_timeout")
    hang = doc["goodput"]["hang"]
    assert hang["bound"] == "at_least" and hang["extends_s"] == 600.017
    assert 540 < _lines(doc)[HANG] < 600.017
    assert "hang before the ending at least" in doc["goodput"]["summary"]
    lines = _lines(doc)
    assert abs(sum(lines.values()) - doc["goodput"]["wall_s"]) < 1e-6
