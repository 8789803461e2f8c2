"""How a run ended (`outcome`, summary 1.2): the corpus of real endings read by hand
(fixtures/endings/), each kind and reason on real lines, and the ending in every output."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.analysis.outcome import Progress, decide
from loganalyzer.cli import main
from loganalyzer.endings import candidates, read_endings, read_line
from loganalyzer.model import EndingFact, Endings
from tests.conftest import ROOT, assert_golden

ENDINGS = ROOT / "fixtures" / "endings"
TRUTHS = sorted(ENDINGS.glob("*/*.json"))

# Excerpts whose truth the tool does not read right yet, and why (strict: a fix shows).
NOT_YET = {
    "nccl_timeout/vlmr1_257_heartbeat_stuck_wrapped": (
        "the heartbeat record is wrapped at the terminal's width inside `ProcessGroupNCCL's`:"
        " its labelled head (rank 6, line 1) is not rejoined to `watchdog got stuck`"
    ),
    "node_failure/m4_tr141_node_failure_batch_host_differs": (
        "last_iteration: m4's `iteration:  2500/500000` lines are no format the tool reads"
    ),
}


def _summary(*args: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(main, ["summary", *args, "--json", "-q"])
    assert result.exit_code in (0, 4), result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return result.exit_code, document


def _compared(outcome: dict[str, Any], expected: dict[str, Any]) -> dict[str, Any]:
    """The outcome in the corpus's terms: the deciding line, the first traceback line, the
    collective's op, sequence and timeout."""
    evidence = outcome["evidence"]
    read = dict(outcome)
    read["evidence_line"] = evidence[0]["line"] if evidence else None
    tracebacks = [e["line"] for e in evidence if e["role"] == "traceback"]
    read["first_traceback_line"] = tracebacks[0] if tracebacks else None
    if read.get("collective"):
        read["collective"] = {
            k: v for k, v in read["collective"].items() if k in ("op", "seq", "timeout_ms")
        }
    return {key: read.get(key) for key in expected}


def _slug(truth: Path) -> str:
    return truth.relative_to(ENDINGS).with_suffix("").as_posix()


@pytest.mark.parametrize(
    "truth",
    [
        pytest.param(
            t,
            id=_slug(t),
            marks=[pytest.mark.xfail(strict=True, reason=NOT_YET[_slug(t)])]
            if _slug(t) in NOT_YET
            else [],
        )
        for t in TRUTHS
    ],
)
def test_corpus_ending_is_read_as_its_truth(truth: Path) -> None:
    expected = json.loads(truth.read_text())["expect"]["outcome"]
    _, document = _summary(str(truth.with_suffix(".log")))
    assert _compared(document["outcome"], expected) == expected


def test_the_corpus_is_here() -> None:
    assert len(TRUTHS) >= 40
    assert set(NOT_YET) <= {_slug(t) for t in TRUTHS}


LAUNCHER_FIXTURES = sorted((ROOT / "fixtures" / "launcher").glob("*.log"))


@pytest.mark.parametrize("path", LAUNCHER_FIXTURES, ids=[p.name for p in LAUNCHER_FIXTURES])
def test_launcher_fixture_summary_matches_golden(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(
        main, ["summary", str(path.relative_to(ROOT)), "--json", "-q", "--format", "launcher"]
    )
    assert result.exit_code == 0, result.output
    assert_golden(f"launcher/{path.stem}.json", result.stdout)


# --- each kind of line, as the frameworks print it ------------------------------------------


def _read(text: str) -> EndingFact:
    fact = read_line(text, "run.log", 7)
    assert fact is not None, text
    return fact


def test_torch_oom_on_a_labelled_rank() -> None:
    # https://github.com/modelscope/ms-swift/issues/7826
    fact = _read(
        "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3"
        " has a total capacity of 79.10 GiB of which 6.00 MiB is free."
    )
    assert (fact.kind, fact.rank, fact.detail["exception"]) == ("exception", 3, "OutOfMemoryError")


def test_nccl_watchdog_in_the_torch_2_wording() -> None:
    # https://github.com/XPixelGroup/BasicSR/issues/737
    fact = _read(
        "[rank0]:[E626 06:24:44.159932949 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught"
        " collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE, NumelIn=9801523,"
        " NumelOut=9801523, Timeout(ms)=600000) ran for 600030 milliseconds before timing out."
    )
    assert fact.kind == "nccl" and fact.rank == 0
    assert {k: fact.detail[k] for k in ("op", "seq", "timeout_ms", "ran_ms", "clock")} == {
        "op": "ALLREDUCE",
        "seq": 808,
        "timeout_ms": 600000,
        "ran_ms": 600030,
        "clock": "0626 06:24:44.159932949",
    }


def test_nccl_watchdog_glued_to_a_progress_bar_in_the_torch_1_wording() -> None:
    # https://github.com/pytorch/pytorch/issues/118369 (the glued line as the issue quotes it)
    fact = _read(
        " 6%|▋         | 32040/500150 [6:28:43<94:13:01,  1.38it/s][E ProcessGroupNCCL.cpp:458]"
        " [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=2883,"
        " OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 25624887 milliseconds before timing out."
    )
    assert (fact.kind, fact.rank, fact.detail["ran_ms"]) == ("nccl", 0, 25624887)


def test_megatron_nan_assertion() -> None:
    # https://github.com/alibaba/Pai-Megatron-Patch/issues/366
    fact = _read(
        "AssertionError: Rank 11: found NaN in local grad norm in backward pass before"
        " data-parallel communication collective. Device: 3"
    )
    assert (fact.kind, fact.rank, fact.detail["exception"]) == ("exception", 11, "AssertionError")


def test_rerun_state_machine_nan_names_rank_and_node() -> None:
    # https://github.com/NVIDIA-NeMo/Speech/issues/14348 (NeMo-Run's and torchrun's labels)
    fact = _read(
        "i.pretrain/0 [default2]:[rank2]: RuntimeError: Rank 2, node dcfai-xe9680-01, device 2,"
        " iteration -1: Unexpected result nan (message='found NaN in local grad norm for bucket"
        " #0 in backward pass before data-parallel communication collective')"
    )
    assert (fact.kind, fact.rank, fact.host) == ("exception", 2, "dcfai-xe9680-01")


def test_slurm_lines_keep_the_batch_host_apart() -> None:
    # https://github.com/SystemsGenetics/GEMmaker/pull/242
    fact = _read(
        "slurmstepd: error: *** JOB 32391783 ON cn119 CANCELLED AT 2021-06-18T13:05:36 DUE TO"
        " PREEMPTION ***"
    )
    assert (fact.kind, fact.host, fact.detail["reason"]) == ("scheduler", None, "PREEMPTION")
    assert fact.detail["batch_host"] == "cn119" and fact.at is not None
    # bigscience-workshop/bigscience: experiments/gpt2-meg/meg_gpt2_base_n8_dp1_tp4_pp8-1809562.out
    scancel = _read(
        "slurmstepd: error: *** STEP 1809562.0 ON r6i5n1 CANCELLED AT 2021-05-23T08:29:53 ***"
    )
    assert "reason" not in scancel.detail


def test_deepspeed_launcher_echo_names_no_rank() -> None:
    # https://github.com/deepspeedai/DeepSpeed/issues/5302
    fact = _read(
        "[2024-03-20 20:31:29,269] [ERROR] [launch.py:321:sigkill_handler] ['/data/anaconda3/"
        "envs/llama/bin/python', '-u', 'src/train_bash.py', '--local_rank=4', '--stage', 'sft']"
        " exits with return code = 1"
    )
    assert (fact.kind, fact.rank, fact.detail["code"]) == ("exit", None, 1)


def test_megatron_clean_exits_and_end() -> None:
    # Megatron-LM megatron/training/training.py: print_datetime('exiting program after {}
    # minutes'), ('exiting program at iteration {}'), ('exiting program after receiving
    # SIGTERM.'), ('after training is done'), printed as '[' + string + '] datetime: {} '
    hows = [
        _read(f"[{said}] datetime: 2021-08-08 01:00:51 ").detail.get("how")
        for said in (
            "exiting program after 1190.0357275923093 minutes",
            "exiting program at iteration 500",
            "exiting program after receiving SIGTERM.",
        )
    ]
    assert hows == ["exit_duration", "exit_interval", "exit_signal"]
    assert _read("[after training is done] datetime: 2026-04-20 03:17:08").kind == "done"


def test_benign_lines_are_no_ending() -> None:
    # torch 2.4's ProcessGroupNCCL destructor warning after completion,
    # https://github.com/ByteDance-Seed/Bagel/issues/86
    warning = (
        "[rank0]:[W529 07:39:12.617444815 ProcessGroupNCCL.cpp:1250] Warning: WARNING: pr"
        "ocess group has NOT been destroyed before we destruct ProcessGroupNCCL. On norma"
        "l program exit, the application should call destroy_process_group to ensure that"
        " any pending NCCL operations have finished in this process. In rare cases this p"
        "rocess can exit before this point and block the progress of another member of th"
        "e process group. This constraint has always been present,  but this warning has "
        "only been added since PyTorch 2.4 (function operator())"
    )
    assert read_line(warning, "run.log", 1) is None
    # bigscience tr1's "Killing subprocess" after a cancel: the launcher echoing, no signal
    assert read_line("Killing subprocess 8189", "run.log", 1) is None


# --- the analysis: which line decides ----------------------------------------------------


def _progress(last: int | None = 900, total: int | None = 1000, line: int = 10) -> Progress:
    return Progress(last, total, None, {"run.log": line} if last else {}, 1.0, None)


def _facts(*lines: str) -> Endings:
    facts = [read_line(text, "run.log", 100 + n) for n, text in enumerate(lines)]
    return Endings(tuple(f for f in facts if f is not None), {})


def test_first_rank_decides_and_the_others_are_counted() -> None:
    # https://github.com/modelscope/ms-swift/issues/7826 (the OOM), then the NCCL timeouts
    # other ranks print when it died (the torch 2.x wording of XPixelGroup/BasicSR#737)
    outcome = decide(
        _facts(
            "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.",
            "[rank0]:[E626 06:24:44.159932949 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught"
            " collective operation timeout: WorkNCCL(SeqNum=808, OpType=ALLREDUCE,"
            " Timeout(ms)=600000) ran for 600030 milliseconds before timing out.",
        ),
        _progress(),
        ["run.log"],
    )
    assert (outcome.status, outcome.reason, outcome.rank) == ("crashed", "oom", 3)
    assert (outcome.other_ranks, outcome.failure_lines) == ([0], 2)


def test_a_kill_decides_over_the_errors_it_caused() -> None:
    # bigscience tr1 (shared logs): the time limit, then the launcher's SIGTERM lines
    outcome = decide(
        _facts(
            "slurmstepd: error: *** JOB 1999618 ON r6i4n5 CANCELLED AT 2021-05-27T21:52:36 DUE TO"
            " TIME LIMIT ***",
            "Main process received SIGTERM, exiting",
        ),
        _progress(),
        ["run.log"],
    )
    assert (outcome.status, outcome.reason, outcome.host) == ("killed", "time_limit", None)


def test_the_kills_line_that_says_why_gives_the_reason() -> None:
    # https://github.com/facebookincubator/submitit/issues/1613: the step is cancelled with
    # no reason, the job DUE TO PREEMPTION after the grace time
    step = (
        "slurmstepd: error: *** STEP 37361369.0 ON learnfair5146 CANCELLED AT"
        " 2021-03-15T17:50:23 ***"
    )
    job = (
        "slurmstepd: error: *** JOB 37361369 ON learnfair5146 CANCELLED AT 2021-03-15T18:00:46"
        " DUE TO PREEMPTION ***"
    )
    error = "RuntimeError: Timed out initializing process group in store based barrier on rank: 0"
    outcome = decide(_facts(step, job), _progress(), ["run.log"])
    assert (outcome.status, outcome.reason, outcome.evidence[0].line) == (
        "killed",
        "preempted",
        101,
    )
    # the errors the kill caused, between its two lines, are still its consequences
    outcome = decide(_facts(step, error, job), _progress(), ["run.log"])
    assert (outcome.status, outcome.reason) == ("killed", "preempted")
    # another job's reason is not this kill's
    outcome = decide(_facts(step, job.replace("37361369", "37361370")), _progress(), ["run.log"])
    assert (outcome.reason, outcome.evidence[0].line) == ("cancelled", 100)


def test_before_the_progress_is_an_earlier_launchs_ending() -> None:
    outcome = decide(
        _facts("[rank3]: torch.OutOfMemoryError: CUDA out of memory."),
        _progress(line=500),  # the last record comes after the OOM
        ["run.log"],
    )
    assert (outcome.status, outcome.last_iteration) == ("unknown", 900)


def test_the_iteration_total_reached_is_a_completed_run() -> None:
    outcome = decide(Endings(), _progress(last=1000, total=1000), ["run.log"])
    assert (outcome.status, outcome.reason) == ("completed", "train_iters_reached")


def _read_lines(*lines: str) -> Endings:
    frame = pl.DataFrame({"line": range(101, 101 + len(lines)), "text": list(lines)})
    return read_endings([candidates(frame)], "run.log")


def test_a_bar_glued_to_an_error_is_the_step_it_came_after() -> None:
    # https://github.com/hiyouga/LlamaFactory/issues/2902 (comment by CaiJichang212): the
    # watchdog line starts on the tqdm bar's line; the last logged dict was step 10
    glued = (
        "  2%|\u258f         | 13/620 [01:07<50:20,  4.98s/it][rank0]:[E1123 00:52:57.664949121"
        " ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout:"
        " WorkNCCL(SeqNum=1516, OpType=ALLREDUCE, NumelIn=25427968, NumelOut=25427968,"
        " Timeout(ms)=600000) ran for 600017 milliseconds before timing out."
    )
    outcome = decide(_read_lines(glued), _progress(last=10, total=620, line=100), ["run.log"])
    assert (outcome.reason, outcome.last_iteration) == ("nccl_timeout", 13)
    # the bar alone, before the error, is no ending
    assert [f.kind for f in _read_lines(glued).facts] == ["progress", "nccl"]
    # an evaluation's bar (another total than the run's) is not the training loop's
    evaluating = glued.replace("13/620", "40/125")
    outcome = decide(_read_lines(evaluating), _progress(last=10, total=620, line=100), ["run.log"])
    assert outcome.last_iteration == 10
    # a bar behind the last record says nothing new
    outcome = decide(_read_lines(glued), _progress(last=20, total=620, line=100), ["run.log"])
    assert outcome.last_iteration == 20


# --- end to end ---------------------------------------------------------------------------


def test_a_run_that_died_before_its_first_iteration_is_summarised(tmp_path: Path) -> None:
    log = ENDINGS / "oom" / "bigscience_tr1_oom_before_first_iteration.log"
    code, document = _summary(str(log))
    outcome = document["outcome"]
    assert code == 0
    assert (outcome["status"], outcome["reason"], outcome["last_iteration"]) == (
        "crashed",
        "oom",
        None,
    )
    assert document["iterations"]["logged"] == 0 and document["flops"]["mfu"] is None
    failed = CliRunner().invoke(main, ["summary", str(log), "-q", "--fail-on-crash"])
    assert failed.exit_code == 4
    assert "Crashed before its first iteration: out of memory" in failed.output


def test_fail_on_crash_lets_completed_and_stopped_runs_through() -> None:
    for log in (
        ENDINGS / "completed" / "megatron_bridge_3427_after_training_done.log",
        ENDINGS / "stopped" / "bigscience_tr1_exit_duration_then_alerts.log",
    ):
        result = CliRunner().invoke(main, ["summary", str(log), "-q", "--fail-on-crash"])
        assert result.exit_code == 0, result.output


def test_a_log_that_just_stops_says_where() -> None:
    log = ENDINGS / "unknown" / "bigscience_megds_3d_log_stops.log"
    result = CliRunner().invoke(main, ["summary", str(log), "-q", "--fail-on-crash"])
    assert result.exit_code == 4
    first = result.stdout.splitlines()[0]
    assert first == (
        "Ending unknown: the log stops at iteration 62 of 1,000 with no line saying how the"
        " run ended"
    )


def test_a_hang_until_the_time_limit(tmp_path: Path) -> None:
    # Megatron-core's timestamped iteration line (NVIDIA-NeMo/Megatron-Bridge#3427) and
    # slurm's time-limit line (bigscience tr1), written with a 2 h gap between them
    line = (
        " [2026-04-20 {}] iteration {:>8}/    1000 | consumed samples:        25600 | elapsed"
        " time per iteration (ms): 9969.4 | learning rate: 4.500000E-06 | global batch size:"
        "   512 | lm loss: 4.791878E-03 |"
    )
    records = [line.format(f"03:{10 + n:02d}:00", 10 * (n + 1)) for n in range(5)]
    kill = (
        "slurmstepd: error: *** JOB 1999618 ON r6i4n5 CANCELLED AT 2026-04-20T05:14:00 DUE TO"
        " TIME LIMIT ***"
    )
    log = tmp_path / "run.log"
    log.write_text("\n".join([*records, kill]) + "\n")
    _, document = _summary(str(log), "--num-gpus", "64")
    outcome = document["outcome"]
    assert (outcome["status"], outcome["reason"]) == ("hung", "time_limit")
    assert (outcome["hang_s"], outcome["hang_bound"]) == (7200.0, "exact")
    assert outcome["hang_gpu_hours"] == pytest.approx(128.0)
    text = CliRunner().invoke(main, ["summary", str(log), "-q", "--num-gpus", "64"]).stdout
    assert text.startswith(
        "Hung at iteration 50 of 1,000 for 2.0 h until slurm's time limit (line 6): 128"
        " GPU-hours lost"
    )


def test_markdown_and_the_report_open_with_the_ending(tmp_path: Path) -> None:
    log = ENDINGS / "oom" / "msswift_7826_rank3_torch_oom.log"
    markdown = CliRunner().invoke(main, ["summary", str(log), "-q", "--markdown"]).stdout
    assert markdown.splitlines()[2].startswith("**Crashed before its first iteration: out of")
    out = tmp_path / "r.html"
    assert CliRunner().invoke(main, ["report", "-q", str(log), "-o", str(out)]).exit_code == 0
    page = out.read_text()
    assert 'id="ending"' in page
    assert page.index('id="ending"') < page.index('class="identity"')


def test_compare_shows_each_runs_ending() -> None:
    killed = ENDINGS / "time_limit" / "bigscience_megds_zero_step_then_job.log"
    stopped = ENDINGS / "unknown" / "bigscience_megds_3d_log_stops.log"
    result = CliRunner().invoke(main, ["compare", "-q", str(killed), str(stopped), "--json"])
    assert result.exit_code == 0, result.output
    endings = json.loads(result.stdout)["endings"]
    assert [e["status"] for e in endings] == ["killed", "unknown"]


def test_index_records_a_run_with_no_iteration_as_failed(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    for name, log in (
        ("died", ENDINGS / "oom" / "bigscience_tr1_oom_before_first_iteration.log"),
        ("ran", ENDINGS / "unknown" / "bigscience_megds_3d_log_stops.log"),
    ):
        (root / name).mkdir(parents=True)
        shutil.copy(log, root / name / "train.log")
    dataset = tmp_path / "index"
    result = CliRunner().invoke(
        main, ["index", str(root), "--out", str(dataset), "--jobs", "1", "--json", "-q"]
    )
    assert result.exit_code == 0, result.output
    failed = json.loads(result.stdout)["failed"]
    assert [f["run_id"].rsplit("/", 1)[-1] for f in failed] == ["died"]
    assert failed[0]["error"].startswith(
        "no iteration records: Crashed before its first iteration: out of memory"
    )
    fleet = CliRunner().invoke(main, ["fleet", str(dataset), "--json"])
    totals = json.loads(fleet.stdout)["totals"]
    # failed: the run that died; the one whose log just stops is no failure
    assert (totals["runs"], totals["no_iterations"], totals["failed"]) == (2, 1, 1)
