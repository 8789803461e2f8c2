"""`index` under kills, a second index, a full disk, a dead worker and a run that takes too
long: every run finished is kept exactly once, and the next index goes on from there."""

from __future__ import annotations

import errno
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.fleet import worker as worker_module
from loganalyzer.fleet.engines import Item, PoolEngine, RayEngine, Result
from loganalyzer.fleet.indexer import build_index
from loganalyzer.fleet.layout import RUNS_DIR
from loganalyzer.fleet.worker import Settings, Task, analyse_folder
from tests.conftest import ROOT
from tests.fleet_tree import Tree, write_tree

GPU = ["--gpu", "h100-sxm"]
RUNS_PER_CONFIG = 6  # 18 folders: a pool of two takes a few seconds over them
SETTINGS = Settings({"shape": {}, "run": {"gpu": "h100-sxm"}})


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Tree:
    return write_tree(tmp_path_factory.mktemp("crash") / "fleet", runs_per_config=RUNS_PER_CONFIG)


def _runs_in_place(dataset: Path) -> set[str]:
    runs = dataset / RUNS_DIR
    return (
        {p.name for p in runs.iterdir() if not p.name.startswith(".")} if runs.exists() else set()
    )


def _index(*args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(main, ["index", *args, *GPU, "--json"])
    parsed = json.loads(result.stdout) if result.exit_code == 0 else {}
    return result.exit_code, parsed, result.stderr


def _assert_consistent(dataset: Path, runs: int) -> pl.DataFrame:
    """The manifest lists every run once, every ok run's folder is in place and no other
    folder is, nothing half-written is left, and `fleet` reads the dataset."""
    manifest = pl.read_parquet(dataset / "manifest.parquet")
    assert manifest.height == runs and manifest["run_id"].n_unique() == runs
    ok = manifest.filter(pl.col("status") == "ok")
    assert set(ok["key"]) == _runs_in_place(dataset)
    assert not [p.name for p in (dataset / RUNS_DIR).iterdir() if p.name.startswith(".")]
    assert not list(dataset.glob("*.tmp")) and not (dataset / "index.pending").exists()
    assert pl.read_parquet(dataset / "runs.parquet")["run_id"].to_list() == sorted(
        manifest["run_id"]
    )
    fleet = CliRunner().invoke(main, ["fleet", str(dataset), "--json"])
    assert fleet.exit_code == 0, fleet.output
    assert json.loads(fleet.stdout)["totals"]["runs"] == runs
    return manifest


def _start(tree: Tree, dataset: Path) -> subprocess.Popen[str]:
    """The index in a real process; its stderr to a file beside the dataset (a pipe would
    be held open by workers that outlive it)."""
    command = [sys.executable, "-m", "loganalyzer", "index", str(tree.root), "--out"]
    with open(dataset.parent / "stderr.txt", "w") as stderr:
        return subprocess.Popen(
            [*command, str(dataset), *GPU, "--jobs", "2", "-q"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            text=True,
        )


def _stderr(dataset: Path) -> str:
    return (dataset.parent / "stderr.txt").read_text()


def _kill_when(process: subprocess.Popen[str], dataset: Path, runs: int, pause: float) -> None:
    """Wait for `runs` run folders in place (0: none), then `pause` seconds more, then the
    kill is the caller's."""
    deadline = time.monotonic() + 60
    while len(_runs_in_place(dataset)) < runs and process.poll() is None:
        assert time.monotonic() < deadline, "the index made no progress"
        time.sleep(0.01)
    time.sleep(pause)


def _locked(process: subprocess.Popen[str], dataset: Path) -> None:
    while not (dataset / "index.lock").exists():
        assert process.poll() is None, _stderr(dataset)
        time.sleep(0.01)


@pytest.mark.parametrize("attempt", range(5))
def test_kill_9_at_a_random_instant_keeps_every_run_renamed_into_place(
    tree: Tree, tmp_path: Path, attempt: int
) -> None:
    """Finding 4: `kill -9` before the first checkpoint left no manifest at all."""
    rng = random.Random(f"kill-{attempt}-{time.time_ns()}")
    runs, pause = rng.randrange(0, 15), rng.uniform(0, 0.4)
    dataset = tmp_path / "index"
    process = _start(tree, dataset)
    _kill_when(process, dataset, runs, pause)
    process.kill()
    process.wait()
    time.sleep(0.2)  # the workers die with it (PR_SET_PDEATHSIG, else within 0.2 s)
    kept = _runs_in_place(dataset)
    code, result, _ = _index(str(tree.root), "--out", str(dataset), "--jobs", "1")
    assert code == 0, (runs, pause)
    assert result["skipped"] >= len(kept), (runs, pause, kept)  # recovered, not read again
    assert result["found"] == 3 * RUNS_PER_CONFIG
    manifest = _assert_consistent(dataset, 3 * RUNS_PER_CONFIG)
    assert kept <= set(manifest.filter(pl.col("status") == "ok")["key"])


@pytest.mark.parametrize("attempt", range(3))
def test_sigterm_at_a_random_instant_saves_the_runs_done_and_exits_143(
    tree: Tree, tmp_path: Path, attempt: int
) -> None:
    """Finding 4: SIGTERM (slurm, Kubernetes) after 4 s kept none of 57 finished runs."""
    rng = random.Random(f"term-{attempt}-{time.time_ns()}")
    runs, pause = rng.randrange(1, 15), rng.uniform(0, 0.4)
    dataset = tmp_path / "index"
    process = _start(tree, dataset)
    _kill_when(process, dataset, runs, pause)
    process.terminate()
    try:  # a slow stop is a finding; a busy machine (tests on every core) makes it slower
        process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise
    stderr = _stderr(dataset)
    if process.returncode == 0:  # it finished first: nothing to check here
        return
    assert process.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1].startswith("Error: index interrupted (SIGTERM): the ")
    assert "Traceback" not in stderr
    kept = _runs_in_place(dataset)
    manifest = pl.read_parquet(dataset / "manifest.parquet")  # saved before it exited
    assert kept == set(manifest.filter(pl.col("status") == "ok")["key"])
    code, result, _ = _index(str(tree.root), "--out", str(dataset), "--jobs", "1")
    assert code == 0 and result["skipped"] >= len(kept)
    _assert_consistent(dataset, 3 * RUNS_PER_CONFIG)


def test_a_run_folder_renamed_into_place_is_kept_even_when_the_manifest_is_older(
    tree: Tree, tmp_path: Path
) -> None:
    """The instants between a worker's rename and the next manifest save: a run analysed
    again (its log changed) whose new folder is in place, beside an older manifest."""
    root = tmp_path / "fleet"
    write_tree(root, runs_per_config=1)
    dataset = tmp_path / "index"
    assert _index(str(root), "--out", str(dataset), "--jobs", "1")[0] == 0
    before = (dataset / "manifest.parquet").read_bytes()
    log = root / "small" / "run-00" / "slurm-1000.out"
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:-1]))
    assert _index(str(root), "--out", str(dataset), "--jobs", "1")[1]["analysed"] == 1
    (dataset / "manifest.parquet").write_bytes(before)  # as if killed before the save
    (dataset / "index.pending").touch()
    code, result, stderr = _index(str(root), "--out", str(dataset), "--jobs", "1")
    assert (code, result["analysed"], result["skipped"]) == (0, 0, 3), stderr
    assert "1 runs recovered from their folders" in stderr
    rows = pl.read_parquet(dataset / "runs.parquet")
    assert rows.filter(pl.col("run_id") == "fleet/small/run-00")["records"].item() == 11


def test_a_second_index_into_the_same_out_refuses_naming_the_holder(
    tree: Tree, tmp_path: Path
) -> None:
    """Finding 5: two indexes into one --out both exited 0, the last manifest winning."""
    dataset = tmp_path / "index"
    first = _start(tree, dataset)
    try:
        _locked(first, dataset)
        time.sleep(0.3)
        second = CliRunner().invoke(main, ["index", str(tree.root), "--out", str(dataset), *GPU])
    finally:
        first.wait(timeout=60)
    assert first.returncode == 0
    assert second.exit_code == 1
    holder = f"pid {first.pid} on {socket.gethostname()}, since "
    assert second.stderr.startswith(f"Error: {dataset} is being written by another index (")
    assert holder in second.stderr and second.stderr.count("\n") == 1
    _assert_consistent(dataset, 3 * RUNS_PER_CONFIG)


def test_with_wait_a_second_index_goes_on_once_the_first_is_done(
    tree: Tree, tmp_path: Path
) -> None:
    dataset = tmp_path / "index"
    first = _start(tree, dataset)
    try:
        _locked(first, dataset)
        code, result, stderr = _index(str(tree.root), "--out", str(dataset), "--wait")
    finally:
        first.wait(timeout=60)
    assert first.returncode == 0 and code == 0, stderr
    assert f"waiting for the index that holds {dataset} (pid {first.pid}" in stderr
    assert result["skipped"] == 3 * RUNS_PER_CONFIG  # it came after: nothing left to read
    _assert_consistent(dataset, 3 * RUNS_PER_CONFIG)


def test_a_lock_left_by_a_killed_index_is_taken_over_with_a_warning(
    tree: Tree, tmp_path: Path
) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dataset = tmp_path / "index"
    dataset.mkdir()
    left = {"pid": int(dead.stdout), "host": socket.gethostname(), "since": "earlier"}
    (dataset / "index.lock").write_text(json.dumps(left))
    code, _, stderr = _index(str(tree.root), "--out", str(dataset), "--jobs", "1")
    assert code == 0, stderr
    assert f"the index that held the lock (pid {left['pid']} on {left['host']}" in stderr
    assert "ended without releasing it: taking it over" in stderr
    assert not (dataset / "index.lock").exists()
    _assert_consistent(dataset, 3 * RUNS_PER_CONFIG)


def _full_after(writes: int) -> Callable[..., None]:
    """A run-folder writer that fails as a full disk does once `writes` tables were written."""
    written = iter(range(10**6))
    real = worker_module._write_parquet

    def write(target: Any, frame: Any) -> None:
        if next(written) >= writes:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), target.path)
        real(target, frame)

    return write


def test_a_full_disk_stops_the_index_in_one_line_keeping_the_runs_done(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 7: `internal error OSError: [Errno 28]`, the runs finished unrecorded, 69
    `.tmp-*` folders, and the next index failing before it would clean them."""
    dataset = tmp_path / "index"
    monkeypatch.setattr(worker_module, "_write_parquet", _full_after(8))  # 2 per run: 4 runs
    code, _, stderr = _index(str(tree.root), "--out", str(dataset), "--jobs", "1")
    assert code == 1
    line = stderr.strip().splitlines()[-1]
    assert line.startswith(f"Error: {dataset / RUNS_DIR}: cannot write the run ")
    assert "(No space left on device): free space there, or index into another --out" in line
    assert "the index stopped after 4 runs, which are kept" in line
    assert "internal error" not in stderr and "Traceback" not in stderr
    manifest = pl.read_parquet(dataset / "manifest.parquet")
    assert manifest.height == 4 and set(manifest["status"]) == {"ok"}
    assert not [p for p in (dataset / RUNS_DIR).iterdir() if p.name.startswith(".")]
    monkeypatch.undo()
    code, result, _ = _index(str(tree.root), "--out", str(dataset), "--jobs", "1")
    assert (code, result["skipped"]) == (0, 4)
    _assert_consistent(dataset, 3 * RUNS_PER_CONFIG)


def test_when_even_the_manifest_cannot_be_saved_the_next_index_cleans_first_and_recovers(
    tree: Tree, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk full for the manifest too: the runs written are recovered from their folders,
    and the leftovers (a 0-byte `manifest.parquet.tmp`, `.tmp-*` folders) are removed
    before anything is written (`dataset.json` first of all)."""
    from loganalyzer.fleet import storage

    dataset = tmp_path / "index"
    monkeypatch.setattr(worker_module, "_write_parquet", _full_after(10))
    real_atomic = storage.write_bytes_atomic

    def full(target: Any, data: bytes) -> None:
        if target.path.endswith(".parquet"):
            Path(target.path + ".tmp").write_bytes(b"")  # as a write cut by ENOSPC leaves it
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_atomic(target, data)

    monkeypatch.setattr(storage, "write_bytes_atomic", full)
    monkeypatch.setattr("loganalyzer.fleet.manifest.write_bytes_atomic", full)
    code, _, stderr = _index(str(tree.root), "--out", str(dataset), "--jobs", "1")
    assert code == 1 and "internal error" not in stderr
    assert stderr.strip().splitlines()[-1].startswith("Error: ")
    assert not (dataset / "manifest.parquet").exists()
    assert len(_runs_in_place(dataset)) == 5
    monkeypatch.undo()
    (dataset / "manifest.parquet.tmp").write_bytes(b"")
    (dataset / RUNS_DIR / ".tmp-half-123").mkdir()

    def clean_first(target: Any, data: bytes) -> None:
        leftovers = list(dataset.glob("*.tmp")) + list((dataset / RUNS_DIR).glob(".tmp-*"))
        if leftovers:  # what the full disk has room for is what the cleaning frees
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_atomic(target, data)

    monkeypatch.setattr("loganalyzer.fleet.indexer.write_bytes_atomic", clean_first)
    monkeypatch.setattr("loganalyzer.fleet.manifest.write_bytes_atomic", clean_first)
    (dataset / "dataset.json").write_text('{"schema": "loganalyzer.index/1"}')  # written again
    code, result, stderr = _index(str(tree.root), "--out", str(dataset), "--jobs", "1")
    assert code == 0, stderr
    assert result["skipped"] == 5
    _assert_consistent(dataset, 3 * RUNS_PER_CONFIG)


def _dies_on_run_03(task: Task) -> list[Any]:
    """analyse_folder, but the worker reading run-03 of `small` is killed (as the
    out-of-memory killer kills it)."""
    if task.spec.folder.endswith("small/run-03"):
        os.kill(os.getpid(), signal.SIGKILL)
    return analyse_folder(task)


def _sleeps_on_run_04(task: Task) -> list[Any]:
    if task.spec.folder.endswith("medium/run-04"):
        time.sleep(600)
    return analyse_folder(task)


class _Swapped(PoolEngine):
    """A pool that runs `task` in place of analyse_folder."""

    def __init__(self, jobs: int, task: Callable[[Task], list[Any]], timeout: float) -> None:
        super().__init__(jobs)
        self.timeout, self.task = timeout, task

    def map(
        self, function: Callable[[Item], Result], items: Sequence[Item], **more: Any
    ) -> Iterator[Result]:
        swapped: Any = self.task if function is analyse_folder else function
        yield from super().map(swapped, items, **more)


def test_a_worker_killed_records_its_run_as_an_error_and_the_rest_is_analysed(
    tree: Tree, tmp_path: Path
) -> None:
    """Finding 8: one pool worker killed gave `internal error BrokenProcessPool`, exit 1,
    and 55 runs never analysed."""
    dataset = tmp_path / "index"
    result = build_index([str(tree.root)], str(dataset), SETTINGS, _Swapped(2, _dies_on_run_03, 60))
    failed = dict(result.failed)
    assert failed.pop("fleet/small/run-03") == "worker died: signal 9"
    assert list(failed) == ["fleet/wide/run-03"]  # the corrupt one, as always
    assert result.analysed == 3 * RUNS_PER_CONFIG
    _assert_consistent(dataset, 3 * RUNS_PER_CONFIG)


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_run_past_the_time_limit_is_recorded_as_an_error(
    tree: Tree, tmp_path: Path, jobs: int
) -> None:
    """Finding 15's last point: `index` had no per-run time limit. (10 s: a run of this tree
    takes 0.1 s of CPU, seconds on a machine loaded 20 deep; the limit counts from a worker's
    start on the run, not from its start-up.)"""
    dataset = tmp_path / "index"
    began = time.monotonic()
    engine = _Swapped(jobs, _sleeps_on_run_04, 10)
    result = build_index([str(tree.root)], str(dataset), SETTINGS, engine)
    assert time.monotonic() - began < 120  # not the 600 s it sleeps
    failed = dict(result.failed)
    assert failed.pop("fleet/medium/run-04") == "timed out after 10 s"
    assert list(failed) == ["fleet/wide/run-03"]
    _assert_consistent(dataset, 3 * RUNS_PER_CONFIG)


class _SwappedRay(RayEngine):
    """Ray tasks that run `_sleeps_on_run_04` in place of analyse_folder."""

    def map(
        self, function: Callable[[Item], Result], items: Sequence[Item], **more: Any
    ) -> Iterator[Result]:
        swapped: Any = _sleeps_on_run_04 if function is analyse_folder else function
        yield from super().map(swapped, items, **more)


def test_a_ray_task_past_the_time_limit_is_recorded_as_an_error(tree: Tree, tmp_path: Path) -> None:
    """Ray's tasks were not timed: a folder that hung held the index for good. The limit
    counts from the task's start on a worker, not from its submission."""
    from ray import cloudpickle

    # pytest imports this file under a name Ray's workers cannot import: send its code along
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    dataset = tmp_path / "index"
    began = time.monotonic()
    with _SwappedRay(2, timeout=10) as engine:
        result = build_index([str(tree.root / "medium")], str(dataset), SETTINGS, engine)
    assert time.monotonic() - began < 120  # not the 600 s it sleeps
    assert dict(result.failed) == {"medium/run-04": "timed out after 10 s"}
    assert result.analysed == RUNS_PER_CONFIG


def test_run_timeout_is_an_option_with_an_example() -> None:
    words = " ".join(CliRunner().invoke(main, ["index", "--help"]).output.split())
    assert "--run-timeout SECONDS Record a folder (its runs) still being read" in words
    assert "[default: 1800; x>0]" in words and "--run-timeout 600 --wait" in words
    bad = CliRunner().invoke(main, ["index", "x", "--out", "y", "--run-timeout", "0"])
    assert bad.exit_code == 2


def test_wait_goes_on_the_moment_the_lock_is_released(tree: Tree, tmp_path: Path) -> None:
    """--wait blocks on the lock, and goes on the moment it is released."""
    from loganalyzer.fleet.lock import hold_lock
    from loganalyzer.fleet.storage import locate

    dataset = tmp_path / "index"
    dataset.mkdir()
    held = threading.Event()
    release = threading.Event()

    def hold() -> None:
        with hold_lock(locate(str(dataset)), False, lambda _: None):
            held.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    refused = CliRunner().invoke(main, ["index", str(tree.root), "--out", str(dataset), *GPU])
    assert refused.exit_code == 1 and f"(pid {os.getpid()} on " in refused.stderr
    threading.Timer(1.0, release.set).start()
    code, _, stderr = _index(str(tree.root), "--out", str(dataset), "--jobs", "1", "--wait")
    holder.join()
    assert code == 0 and "waiting for the index that holds" in stderr


_FULL_DISK = r"""
set -u
index() { "$PYTHON" -m loganalyzer index "$ROOT_DIR" --out "$DISK/index" --gpu h100-sxm "$@"; }
mount -t tmpfs -o size=$SIZE tmpfs "$DISK"
head -c $FILLER /dev/zero > "$DISK/filler" 2>/dev/null
index --jobs 1 -q 2> "$OUT/first.err"
echo $? > "$OUT/first.rc"
ls -a "$DISK/index" "$DISK/index/runs" > "$OUT/first.ls" 2>&1
rm "$DISK/filler"
index --jobs 1 --json 2> "$OUT/second.err" > "$OUT/second.json"
echo $? > "$OUT/second.rc"
"$PYTHON" -m loganalyzer fleet "$DISK/index" --json > "$OUT/fleet.json"
"""


def test_a_real_full_disk_in_a_subprocess(tree: Tree, tmp_path: Path) -> None:
    """A dataset on a 1 MB tmpfs (a user and mount namespace: no root needed where
    `unshare -rm` is allowed) filled while the index writes, then freed."""
    disk, out = tmp_path / "disk", tmp_path / "out"
    disk.mkdir()
    out.mkdir()
    probe = subprocess.run(["unshare", "-rm", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        pytest.skip("no user and mount namespaces here (unshare -rm)")
    environment = {
        **os.environ,
        "SIZE": "1m",
        "FILLER": str(1024 * 1024 - 200 * 1024),  # room for a few runs, not 18
        "DISK": str(disk),
        "OUT": str(out),
        "PYTHON": sys.executable,
        "ROOT_DIR": str(tree.root),
    }
    subprocess.run(
        ["unshare", "-rm", "sh", "-c", _FULL_DISK],
        env=environment,
        cwd=ROOT,
        check=True,
        timeout=120,
    )
    first = (out / "first.err").read_text()
    assert (out / "first.rc").read_text().strip() == "1", first
    line = first.strip().splitlines()[-1]
    assert line.startswith("Error: ") and "No space left on device" in line, first
    assert "internal error" not in first and "Traceback" not in first
    listed = (out / "first.ls").read_text().split()
    kept = [name for name in listed if name.startswith("fleet__")]
    assert 0 < len(kept) < 3 * RUNS_PER_CONFIG and not any(n.startswith(".tmp") for n in listed)
    assert (out / "second.rc").read_text().strip() == "0", (out / "second.err").read_text()
    second = json.loads((out / "second.json").read_text())
    assert second["skipped"] >= len(kept) and second["found"] == 3 * RUNS_PER_CONFIG
    assert json.loads((out / "fleet.json").read_text())["totals"]["runs"] == 3 * RUNS_PER_CONFIG


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_during_the_final_save_waits_for_the_manifest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: int
) -> None:
    """A SIGTERM (or Ctrl-C) that came while the manifest was being written cut the write:
    exit 143 said the runs done were kept, and no manifest.parquet was left (seen in CI).
    The stop now waits for the tables, then stops the index."""
    from loganalyzer.fleet import indexer

    root = tmp_path / "fleet"
    write_tree(root, runs_per_config=1)
    dataset = tmp_path / "index"
    written = indexer.write_table

    def stopped_while_writing(where: Any, name: str, frame: pl.DataFrame) -> None:
        os.kill(os.getpid(), signum)  # the handler runs at the next bytecode: mid-write
        written(where, name, frame)

    monkeypatch.setattr(indexer, "write_table", stopped_while_writing)
    result = CliRunner().invoke(main, ["index", str(root), "--out", str(dataset), "--jobs", "1"])
    assert result.exit_code == (143 if signum == signal.SIGTERM else 130), result.output
    manifest = pl.read_parquet(dataset / "manifest.parquet")
    assert set(manifest["key"]) == _runs_in_place(dataset)
    assert manifest.height == 3
