"""The fleet counts how runs ended: runs and GPU-hours by ending and reason, the hang's
GPU-hours, the ranks and hosts that recur across failures, and the failed runs with their
error line, in `fleet` text, --json and HTML; a run with no iteration is a failed run, and a
dataset an older version wrote (no ending columns) still reads."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.fleet.document import NO_ITERATIONS, RUNS_SCHEMA, ending_columns, runs_frame
from loganalyzer.fleet.layout import RUNS
from tests.conftest import ROOT

# Error lines as the summary's outcome quotes them, cut from real logs:
# fixtures/endings/oom/msswift_7826_rank3_torch_oom.log (github.com/modelscope/ms-swift/issues/7826)
OOM = (
    "[rank3]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3"
    " has a total capacity of 79.10 GiB of which 6.00 MiB is free."
)
# fixtures/endings/nccl_timeout/ofa_271_torch1_eight_ranks.log (github.com/OFA-Sys/OFA/issues/271)
NCCL = (
    "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout:"
    " WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212"
    " milliseconds before timing out."
)
SLURM = "slurmstepd: error: *** JOB 81236 ON node-001 CANCELLED AT 2024-05-02T18:00:03 DUE TO TIME LIMIT ***"  # noqa: E501
SIGABRT = "exitcode  : -6 (pid: 2811)  error_file: <N/A>  traceback : Signal 6 (SIGABRT) received by PID 2811"  # noqa: E501


def _row(run_id: str, status: str = "ok", **fields: Any) -> dict[str, Any]:
    return {"run_id": run_id, "key": run_id, "status": status, **fields}


def _ended(
    status: str,
    reason: str | None,
    *,
    rank: int | None = None,
    host: str | None = None,
    message: str | None = None,
    last: int | None = 1200,
    gpus: int = 8,
    wall_h: float = 2.0,
    lost_h: float = 0.5,
    hang_s: float | None = None,
    lost_hang: float | None = 0.0,
    incidents: int = 0,
) -> dict[str, Any]:
    return {
        "outcome_status": status,
        "outcome_reason": reason,
        "outcome_rank": rank,
        "outcome_host": host,
        "outcome_message": message,
        "outcome_last_iteration": last,
        "num_gpus": gpus,
        "gpu_hours": gpus * wall_h,
        "lost_gpu_hours": gpus * lost_h,
        "hang_s": hang_s,
        "lost_hang_gpu_hours": lost_hang,
        "incidents": incidents,
    }


ROWS = [
    _row("a-oom", **_ended("crashed", "oom", rank=3, host="node-007", message=OOM)),
    _row("b-nccl", **_ended("crashed", "nccl_timeout", rank=17, host="node-007", message=NCCL)),
    # 64 GPUs hung 7 h 45 min before slurm's time limit: 496 GPU-hours, in its budget
    _row(
        "c-hung",
        **_ended(
            "hung",
            "time_limit",
            message=SLURM,
            gpus=64,
            hang_s=27900.0,
            lost_hang=496.0,
            last=900,
            wall_h=2.0 + 7.75,
            lost_h=0.5 + 7.75,
        ),
    ),
    _row("d-abort", **_ended("crashed", "signal", rank=17, host="node-012", message=SIGABRT)),
    _row("e-done", **_ended("completed", "train_iters_reached", incidents=2)),
    # died before its first iteration: a run, with no figures but its ending
    _row(
        "f-early",
        NO_ITERATIONS,
        error=f"no iteration records: Crashed before its first iteration: out of memory ({OOM})",
        **_ended(
            "crashed", "oom", rank=3, host="node-003", message=OOM, last=None, wall_h=0, lost_h=0
        ),
    ),
    _row("g-unread", "error", error="g-unread/train.log: no parser recognises this file"),
    # indexed before outcomes: no ending columns
    _row("h-old", num_gpus=8, gpu_hours=16.0, lost_gpu_hours=1.0),
    # hung, but no line after the last record has a time: the hang is unknown
    _row("i-hung-untimed", **_ended("hung", None, lost_hang=None)),
    _row("j-stops", **_ended("unknown", None, last=450)),
]


def _dataset(tmp_path: Path, rows: list[dict[str, Any]] = ROWS) -> Path:
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    runs_frame(rows).write_parquet(dataset / RUNS)
    return dataset


def _fleet(*args: str) -> Any:
    result = CliRunner().invoke(main, ["fleet", *args])
    assert result.exit_code == 0, result.output
    return result


def test_fleet_json_counts_runs_and_gpu_hours_by_ending_and_reason(tmp_path: Path) -> None:
    fleet = json.loads(_fleet(str(_dataset(tmp_path)), "--json").stdout)
    assert fleet["schema"] == "loganalyzer.fleet/3"
    endings = {(e["status"], e["reason"]): e for e in fleet["endings"]}
    # the unread run has no ending; the run indexed before outcomes has none recorded
    assert {k: e["runs"] for k, e in endings.items()} == {
        ("crashed", "oom"): 2,
        ("crashed", "nccl_timeout"): 1,
        ("crashed", "signal"): 1,
        ("hung", "time_limit"): 1,
        ("hung", None): 1,
        ("unknown", None): 1,
        ("completed", "train_iters_reached"): 1,
        (None, None): 1,
    }
    # worst first: the failures, then the clean endings, then the unrecorded
    assert [e["status"] for e in fleet["endings"]][:4] == ["crashed"] * 3 + ["hung"]
    assert fleet["endings"][-1]["status"] is None
    assert endings["crashed", "oom"]["gpu_hours"] == pytest.approx(16.0)  # 16 + 0 (no iteration)
    assert endings["crashed", "oom"]["lost_gpu_hours"] == pytest.approx(4.0)
    assert endings["hung", "time_limit"]["lost_hang_gpu_hours"] == pytest.approx(496.0)
    assert endings["hung", "time_limit"]["hang_unknown"] == 0
    assert endings["hung", None]["hang_unknown"] == 1
    assert fleet["totals"]["lost_hang_gpu_hours"] == pytest.approx(496.0)
    counts = {k: fleet["totals"][k] for k in ("runs", "analysed", "not_read", "no_iterations")}
    assert counts == {"runs": 10, "analysed": 8, "not_read": 1, "no_iterations": 1}
    # the hang is a line of the budget: in its lost GPU-hours
    assert fleet["totals"]["lost_gpu_hours"] == pytest.approx(6 * 4.0 + 528.0 + 1.0)


def test_recurring_ranks_and_hosts_are_those_of_two_failed_runs(tmp_path: Path) -> None:
    fleet = json.loads(_fleet(str(_dataset(tmp_path)), "--json").stdout)
    assert fleet["recurring"] == {
        "ranks": [
            {"rank": 3, "runs": 2, "run_ids": ["a-oom", "f-early"]},
            {"rank": 17, "runs": 2, "run_ids": ["b-nccl", "d-abort"]},
        ],
        "hosts": [{"host": "node-007", "runs": 2, "run_ids": ["a-oom", "b-nccl"]}],
    }


def test_failed_runs_are_listed_with_their_error_line(tmp_path: Path) -> None:
    fleet = json.loads(_fleet(str(_dataset(tmp_path)), "--json").stdout)
    failed = {r["run_id"]: r for r in fleet["failed"]}
    assert list(failed) == [
        "a-oom",
        "b-nccl",
        "c-hung",
        "d-abort",
        "f-early",
        "g-unread",
        "i-hung-untimed",
    ]
    # j-stops' log just stops: its ending is unknown, which is no failure
    assert fleet["totals"]["failed"] == 7
    assert failed["a-oom"]["error"] == OOM
    assert (failed["b-nccl"]["reason"], failed["b-nccl"]["rank"]) == ("nccl_timeout", 17)
    assert failed["f-early"]["status"] == NO_ITERATIONS
    assert failed["f-early"]["error"] == OOM  # the error line, not the sentence around it
    assert failed["g-unread"]["error"].endswith("no parser recognises this file")
    # worst first: the unread run, then the failed endings, then the rest
    order = [r["run_id"] for r in fleet["runs"]]
    assert order[:2] == ["f-early", "g-unread"] or order[:2] == ["g-unread", "f-early"]
    assert set(order[-3:]) == {"e-done", "h-old", "j-stops"}


def test_fleet_text_says_endings_gpu_hours_recurring_ranks_and_failures(tmp_path: Path) -> None:
    text = _fleet(str(_dataset(tmp_path))).stdout
    assert (
        "Fleet of 10 runs (8 analysed, 1 with no iteration, 1 not read, 7 failed):"
        " 736.0 GPU-hours, 553.0 lost (496.0 of it hung before the ending)"
    ) in text
    lines = text.splitlines()
    [hung] = [line for line in lines if line.lstrip().startswith("hung (time limit)")]
    assert hung.split() == ["hung", "(time", "limit)", "1", "624.0", "528.0", "496.0"]
    [untimed] = [line for line in lines if line.split()[:2] == ["hung", "1"]]
    assert untimed.split() == ["hung", "1", "16.0", "4.0", "unknown"]
    assert "  rank 17: 2 failed runs (b-nccl, d-abort)" in lines
    assert "  host node-007: 2 failed runs (a-oom, b-nccl)" in lines
    assert f"  a-oom: crashed (oom) at iteration 1,200 on rank 3 on node-007: {OOM}" in lines
    assert (
        f"  f-early: crashed (oom) before its first iteration on rank 3 on node-003: {OOM}"
    ) in lines
    assert f"  c-hung: hung (time limit) at iteration 900 for 7.8 h: {SLURM}" in lines
    assert "  j-stops: unknown at iteration 450" not in lines  # no failure
    assert "  i-hung-untimed: hung at iteration 1,200 for an unknown time" in lines
    assert "not recorded (indexed before outcomes)" in text


def test_fleet_html_has_the_endings_recurring_ranks_and_failed_runs(tmp_path: Path) -> None:
    out = tmp_path / "fleet.html"
    _fleet(str(_dataset(tmp_path)), "-o", str(out))
    page = out.read_text(encoding="utf-8")
    assert "<h2>How the runs ended</h2>" in page
    assert '<td data-sort="hung (time limit)" class="status-bad">hung (time limit)</td>' in page
    assert '<td data-sort="496.0" class="num">496.0</td>' in page
    assert "<h3>Failures recur on</h3>" in page
    assert '<td data-sort="rank 17">rank 17</td>' in page
    assert "<h2>Failed runs</h2>" in page
    # the error line escaped, never raw markup
    assert "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000)" in page
    assert "Hung before the ending: of the GPU-hours lost" in page


def test_a_dataset_written_before_endings_reads_with_null_ending_columns(tmp_path: Path) -> None:
    new = [c for c in RUNS_SCHEMA if c.startswith("outcome_")] + [
        "hang_s",
        "lost_hang_gpu_hours",
        "incidents",
    ]
    rows = [_row("old-1", num_gpus=8, gpu_hours=16.0, lost_gpu_hours=1.0)]
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    runs_frame(rows).drop(new).write_parquet(dataset / RUNS)
    assert not set(new) & set(pl.read_parquet_schema(dataset / RUNS))
    fleet = json.loads(_fleet(str(dataset), "--json").stdout)
    assert fleet["endings"] == [
        {
            "status": None,
            "reason": None,
            "runs": 1,
            "gpu_hours": 16.0,
            "lost_gpu_hours": 1.0,
            "lost_hang_gpu_hours": 0.0,
            "hang_unknown": 0,
        }
    ]
    assert (fleet["failed"], fleet["recurring"]) == ([], {"ranks": [], "hosts": []})
    assert fleet["runs"][0]["outcome_status"] is None


HUNG = {
    "status": "hung",
    "reason": "time_limit",
    "exception": None,
    "message": SLURM,
    "rank": None,
    "host": "node-001",
    "last_iteration": 900,
    "hang_s": 27900.0,
    "hang_gpu_hours": 496.0,
}


def test_ending_columns_read_the_outcome_and_count_incidents() -> None:
    columns = ending_columns({"outcome": HUNG, "incidents": [{"kind": "loss_spike"}] * 3})
    assert columns["outcome_status"] == "hung"
    assert columns["outcome_host"] == "node-001"
    assert columns["outcome_message"] == SLURM
    assert columns["hang_s"] == 27900.0
    assert columns["incidents"] == 3
    assert ending_columns({"outcome": HUNG, "incidents": []})["incidents"] == 0
    # an older document: no outcome, no incidents
    assert ending_columns({}) == {"incidents": None}
    assert set(ending_columns({"outcome": HUNG})) <= set(RUNS_SCHEMA)


# End to end: `index` over a root of runs cut from fixtures/endings/ (each folder one run,
# their provenance in fixtures/endings/README.md), then `fleet`.
ENDINGS = ROOT / "fixtures" / "endings"
RUNS_OF = {
    # died before its first iteration: arguments, then an OOM traceback
    "early-oom": "oom/bigscience_tr1_oom_before_first_iteration.log",
    # NCCL watchdog timeouts naming rank 0: on an HF progress bar at iteration 13, and
    # a NeMo run's watchdog stuck for hours
    "nccl-hf": "nccl_timeout/llamafactory_2902_hf_bar_glued_torch2.log",
    "nccl-nemo": "nccl_timeout/pytorch_118369_bar_glued_watchdog_hours.log",
    # torchrun's root cause: rank 0 on host neptun.informatik.uni-kl.de, SIGABRT; the same
    # excerpt twice, as a job that fails again on the same node
    "abort-1": "signal/mmseg_3106_root_cause_listed_last.log",
    "abort-2": "signal/mmseg_3106_root_cause_listed_last.log",
    # BLOOM-176B stuck in evaluation after iteration 45,000: at least 7,207 s
    "hung": "hung/bigscience_tr11_eval_hang_monitor_pulses.log",
    "done": "completed/megatron_bridge_3427_after_training_done.log",
}
HOST = "neptun.informatik.uni-kl.de"


@pytest.fixture(scope="module")
def endings_fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("endings")
    for run, excerpt in RUNS_OF.items():
        (base / "root" / run).mkdir(parents=True)
        shutil.copy(ENDINGS / excerpt, base / "root" / run / Path(excerpt).name)
    dataset = base / "dataset"
    args = ["index", str(base / "root"), "--out", str(dataset), "--num-gpus", "8"]
    result = CliRunner().invoke(main, [*args, "--jobs", "1", "--json", "-q"])
    assert result.exit_code == 0, result.output
    return base, dataset


def test_index_then_fleet_json_counts_the_endings_of_real_runs(
    endings_fleet: tuple[Path, Path],
) -> None:
    _, dataset = endings_fleet
    runs = pl.read_parquet(dataset / RUNS).sort("run_id")
    got = runs.select("run_id", "status", "outcome_status", "outcome_reason", "outcome_rank")
    assert got.rows() == [
        ("root/abort-1", NO_ITERATIONS, "crashed", "signal", 0),
        ("root/abort-2", NO_ITERATIONS, "crashed", "signal", 0),
        ("root/done", "ok", "completed", "train_iters_reached", None),
        ("root/early-oom", NO_ITERATIONS, "crashed", "oom", None),
        ("root/hung", "ok", "hung", None, None),
        ("root/nccl-hf", "ok", "crashed", "nccl_timeout", 0),
        # its NeMo 1 progress bar is a record (the nemo parser reads the bar's frame)
        ("root/nccl-nemo", "ok", "crashed", "nccl_timeout", 0),
    ]
    hung = runs.row(by_predicate=pl.col("run_id") == "root/hung", named=True)
    # 7,207 s from the last progress to the last PULSE line, on 8 GPUs
    assert hung["hang_s"] == pytest.approx(7207.0)
    # the budget's hang line, on 8 GPUs
    assert hung["lost_hang_gpu_hours"] == hung["lost_hang_before_the_ending_gpu_hours"]
    assert 15.0 < hung["lost_hang_gpu_hours"] <= 7207.0 * 8 / 3600
    assert runs["incidents"].to_list() == [0] * 7

    fleet = json.loads(_fleet(str(dataset), "--json").stdout)
    endings = {(e["status"], e["reason"]): e["runs"] for e in fleet["endings"]}
    assert endings == {
        ("crashed", "nccl_timeout"): 2,
        ("crashed", "signal"): 2,
        ("crashed", "oom"): 1,
        ("hung", None): 1,
        ("completed", "train_iters_reached"): 1,
    }
    hangs = runs["lost_hang_gpu_hours"].sum()
    assert fleet["totals"]["lost_hang_gpu_hours"] == pytest.approx(hangs)
    assert fleet["lost_by_cause_gpu_hours"]["hang_before_the_ending"] == pytest.approx(hangs)
    assert (fleet["totals"]["failed"], fleet["totals"]["no_iterations"]) == (6, 3)
    assert fleet["recurring"] == {
        "ranks": [
            {
                "rank": 0,
                "runs": 4,
                "run_ids": ["root/abort-1", "root/abort-2", "root/nccl-hf", "root/nccl-nemo"],
            }
        ],
        "hosts": [{"host": HOST, "runs": 2, "run_ids": ["root/abort-1", "root/abort-2"]}],
    }
    failed = {r["run_id"]: r for r in fleet["failed"]}
    assert "root/done" not in failed
    assert failed["root/early-oom"]["error"] == "RuntimeError: CUDA error: out of memory"
    assert "Watchdog caught collective operation timeout" in failed["root/nccl-nemo"]["error"]


def test_index_then_fleet_text_and_html_say_the_endings(
    endings_fleet: tuple[Path, Path],
) -> None:
    base, dataset = endings_fleet
    text = _fleet(str(dataset)).stdout
    lines = text.splitlines()
    hang = pl.read_parquet(dataset / RUNS)["lost_hang_gpu_hours"].sum()
    assert f"lost ({hang:,.1f} of it hung before the ending)" in lines[0]
    [hung] = [line for line in lines if line.split()[:2] == ["hung", "1"]]
    hung_run = pl.read_parquet(dataset / RUNS).filter(pl.col("run_id") == "root/hung")
    assert hung.split()[-1] == f"{hung_run['lost_hang_gpu_hours'].item():,.1f}"
    assert (
        "  rank 0: 4 failed runs (root/abort-1, root/abort-2, root/nccl-hf, root/nccl-nemo)"
        in lines
    )
    assert f"  host {HOST}: 2 failed runs (root/abort-1, root/abort-2)" in lines
    assert (
        "  root/early-oom: crashed (oom) before its first iteration:"
        " RuntimeError: CUDA error: out of memory"
    ) in lines
    assert any(line.startswith("  root/hung: hung at iteration 45,000 for 2") for line in lines)
    out = base / "fleet.html"
    _fleet(str(dataset), "-o", str(out))
    page = out.read_text(encoding="utf-8")
    assert '<td data-sort="crashed (nccl timeout)" class="status-bad">' in page
    assert f'<td data-sort="host {HOST}">host {HOST}</td>' in page
    assert "RuntimeError: CUDA error: out of memory" in page
