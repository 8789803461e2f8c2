"""Run identity in the dataset: every run found is kept once under a key of its own, whatever
its folder is called, wherever `--out` is and however it is spelled, and a W&B reference's
password, or a root URL's, is in none of the dataset's files, names or outputs."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from fsspec.implementations.memory import MemoryFileSystem
from fsspec.registry import register_implementation
from fsspec.utils import infer_storage_options
from hypothesis import given
from hypothesis import strategies as st

from loganalyzer.cli import main
from loganalyzer.fleet.layout import RUNS_DIR, is_leftover, run_id, run_key, unit_name
from loganalyzer.fleet.storage import locate
from tests.fleet_tree import write_tree
from tests.test_wandb_remote import RUN
from tests.wandb_replay import client_env, replay_server

GPU = ["--gpu", "h100-sxm"]


def _index(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["index", *args, *GPU, "--jobs", "1", "--json", "-q"])
    assert result.exit_code == 0, result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def _manifest(dataset: Path) -> pl.DataFrame:
    return pl.read_parquet(dataset / "manifest.parquet").sort("run_id")


def _logs(tmp_path: Path) -> tuple[Path, Path]:
    """Two Megatron-LM logs of runs of other shapes (a folder holding both holds two runs)."""
    tree = write_tree(tmp_path / "generated", runs_per_config=1)
    return (
        tree.root / "small" / "run-00" / "slurm-1000.out",
        tree.root / "medium" / "run-00" / "slurm-2000.out",
    )


def _run_folders(dataset: Path) -> list[str]:
    return sorted(p.name for p in (dataset / RUNS_DIR).iterdir())


def _assert_kept(dataset: Path, runs: int) -> None:
    """Every run of the manifest is ok and has its folder, and nothing else is in runs/."""
    manifest = _manifest(dataset)
    assert manifest.height == runs
    assert manifest["status"].to_list() == ["ok"] * runs
    assert manifest["key"].n_unique() == runs
    assert _run_folders(dataset) == sorted(manifest["key"].to_list())
    for key in manifest["key"]:
        assert (dataset / RUNS_DIR / key / "summary.json").is_file()


def test_names_the_index_takes_for_its_own_leftovers_survive_a_second_index(
    tmp_path: Path,
) -> None:
    """Finding 1: the key of a folder `exp.tmp-` + 75 x `A` kept its last 80 characters,
    `.tmp-AAA…`, which the next index deleted as its own leftover while the manifest kept
    the run as ok; roots named `.tmp-…` and `.old-…` did the same."""
    log, _ = _logs(tmp_path)
    roots = [tmp_path / "fleet", tmp_path / ".tmp-fleet", tmp_path / ".old-fleet"]
    for root in roots:
        for name in ("exp.tmp-" + "A" * 75, "exp.old-" + "B" * 75, "run"):
            (root / name).mkdir(parents=True)
            shutil.copy(log, root / name / "slurm-1.out")
    dataset = tmp_path / "index"
    first = _index(*map(str, roots), "--out", str(dataset))
    assert (first["found"], first["analysed"]) == (9, 9)
    second = _index(*map(str, roots), "--out", str(dataset))
    assert (second["found"], second["skipped"]) == (9, 9)
    _assert_kept(dataset, 9)
    assert not any(name.startswith(".") for name in _run_folders(dataset))


def _legacy_key(run_id: str) -> str:
    """The key an earlier layout gave a run: the id's last 80 characters, a 32-bit hash."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", run_id.replace("/", "__"))[-80:]
    return f"{readable}-{hashlib.blake2b(run_id.encode(), digest_size=4).hexdigest()}"


def test_a_dataset_under_older_keys_is_read_again_once_and_keeps_every_run(
    tmp_path: Path,
) -> None:
    """A dataset written with the earlier keys (one of them `.tmp-AAA…`, taken by the
    clean-up while the manifest said ok): the next index reads those runs again, keeps them
    under the new keys and leaves no folder of an older key."""
    log, _ = _logs(tmp_path)
    root = tmp_path / "fleet"
    for name in ("exp.tmp-" + "A" * 75, "run"):
        (root / name).mkdir(parents=True)
        shutil.copy(log, root / name / "slurm-1.out")
    dataset = tmp_path / "index"
    _index(str(root), "--out", str(dataset))
    for table in ("manifest.parquet", "runs.parquet"):
        frame = pl.read_parquet(dataset / table)
        older = frame["run_id"].map_elements(_legacy_key, return_dtype=pl.String)
        frame.with_columns(older.alias("key")).write_parquet(dataset / table)
    for run in _manifest(dataset)["run_id"]:
        (dataset / RUNS_DIR / run_key(run)).rename(dataset / RUNS_DIR / _legacy_key(run))
    assert sum(name.startswith(".tmp-") for name in _run_folders(dataset)) == 1
    again = _index(str(root), "--out", str(dataset))
    # the `.tmp-AAA…` folder is a leftover by the new rules: cleared first, its entry has no
    # folder and it is read as new; the other is read again for its older key
    assert (again["analysed"], again["reasons"]) == (2, {"new": 1, "older key": 1})
    _assert_kept(dataset, 2)
    assert _index(str(root), "--out", str(dataset))["skipped"] == 2


def test_a_dataset_under_older_ids_keeps_each_run_once(tmp_path: Path) -> None:
    """A dataset written before `%` and `#` were escaped in ids holds `root/run 50%`: the
    next index named that folder `root/run 50%25`, read it as new and kept the older entry
    too (2 runs for 1 folder, two folders in runs/)."""
    log, _ = _logs(tmp_path)
    root = tmp_path / "root"
    for name in ("run 50%", "x#2", "plain"):
        (root / name).mkdir(parents=True)
        shutil.copy(log, root / name / "slurm-1.out")
    dataset = tmp_path / "index"
    _index(str(root), "--out", str(dataset))
    older = {"root/run 50%25": "root/run 50%", "root/x%232": "root/x#2"}

    def rewritten(frame: pl.DataFrame) -> pl.DataFrame:
        ids = frame["run_id"].replace(older)
        return frame.with_columns(
            ids, ids.map_elements(_legacy_key, return_dtype=pl.String).alias("key")
        )

    for table in ("manifest.parquet", "runs.parquet"):
        frame = rewritten(pl.read_parquet(dataset / table))
        if "folder" in frame.columns:
            frame = frame.with_columns(pl.col("folder").replace(older))
        frame.write_parquet(dataset / table)
    for now, before in [*older.items(), ("root/plain", "root/plain")]:
        (dataset / RUNS_DIR / run_key(now)).rename(dataset / RUNS_DIR / _legacy_key(before))
    again = _index(str(root), "--out", str(dataset))
    assert (again["found"], again["analysed"]) == (3, 3)
    _assert_kept(dataset, 3)
    assert _manifest(dataset)["run_id"].to_list() == ["root/plain", *sorted(older)]
    assert _index(str(root), "--out", str(dataset))["skipped"] == 3


def test_a_folder_named_like_a_run_of_another_folder_is_a_run_of_its_own(tmp_path: Path) -> None:
    """Finding 2: `root/x` holding two runs (`root/x#1`, `root/x#2`) and a folder named
    `root/x#2` shared an id and a folder: 3 runs found, 2 kept, another one every index."""
    small, medium = _logs(tmp_path)
    root = tmp_path / "root"
    (root / "x").mkdir(parents=True)
    shutil.copy(small, root / "x" / small.name)
    shutil.copy(medium, root / "x" / medium.name)
    for name in ("x#2", "x%232", "x%2"):
        (root / name).mkdir()
        shutil.copy(small, root / name / small.name)
    dataset = tmp_path / "index"
    ids = ["root/x#1", "root/x#2", "root/x%232", "root/x%25232", "root/x%252"]
    for _ in range(3):
        result = _index(str(root), "--out", str(dataset))
        assert result["found"] == 5
        assert _manifest(dataset)["run_id"].to_list() == sorted(ids)
        _assert_kept(dataset, 5)
    assert result["skipped"] == 5  # the same runs every time: none read again
    assert _manifest(dataset).filter(pl.col("run_id") == "root/x%232")["folder"].item() == (
        "root/x%232"
    )


# Characters fsspec reads as URL syntax (chaining, fragment, query, globs) in a path it parses.
ODD_NAMES = ("a::b", "c#d", "e?f", "g*h", "i[1]j", "k%l", "file::m", "memory::n", "~o", "p q")


def test_folders_with_url_syntax_in_their_names_are_read(tmp_path: Path) -> None:
    """Finding 3: a folder `a::b` was read by fsspec as a chained URL and dropped (5 runs
    found, 0 failed, for 6 folders)."""
    log, _ = _logs(tmp_path)
    root = tmp_path / "ro::ot"
    for name in ODD_NAMES:
        (root / name).mkdir(parents=True)
        shutil.copy(log, root / name / "slurm-1.out")
    dataset = tmp_path / "in::dex"
    result = _index(str(root), "--out", str(dataset))
    assert (result["found"], result["analysed"], result["failed"]) == (10, 10, [])
    expected = sorted(unit_name(f"ro::ot/{name}") for name in ODD_NAMES)
    assert _manifest(dataset)["run_id"].to_list() == expected
    _assert_kept(dataset, 10)
    assert _index(str(root), "--out", str(dataset))["skipped"] == 10


def test_a_dataset_named_like_a_pattern_is_read_by_fleet(tmp_path: Path) -> None:
    """`--out` named with `[`, `?` and `*` was written whole, but `fleet` scanned its runs
    table as a glob pattern: 'internal error ComputeError: ... expanded paths were empty'."""
    log, _ = _logs(tmp_path)
    (tmp_path / "root" / "run").mkdir(parents=True)
    shutil.copy(log, tmp_path / "root" / "run" / log.name)
    dataset = tmp_path / "out::[2]?*#x"
    assert _index(str(tmp_path / "root"), "--out", str(dataset))["analysed"] == 1
    result = CliRunner().invoke(main, ["fleet", str(dataset), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["totals"]["runs"] == 1


def test_a_local_path_is_never_a_url_and_a_url_stays_one(tmp_path: Path) -> None:
    assert locate(str(tmp_path / "a::b" / "x.log")).path == str(tmp_path / "a::b" / "x.log")
    assert locate("a/../a/./b//").path == os.path.join(os.getcwd(), "a", "b")
    chained = locate("simplecache::memory://bucket/x.log")
    assert (type(chained.fs).__name__, chained.path) == ("SimpleCacheFileSystem", "/bucket/x.log")


def test_folders_with_url_syntax_in_an_object_store_are_read(tmp_path: Path) -> None:
    import fsspec

    log, _ = _logs(tmp_path)
    memory = fsspec.filesystem("memory")
    for name in ODD_NAMES:
        memory.pipe(f"/ident/ro::ot/{name}/slurm-1.out", log.read_bytes())
    try:
        result = _index("memory://ident/ro::ot", "--out", "memory://ident/in::dex")
        assert (result["found"], result["analysed"], result["failed"]) == (10, 10, [])
        assert _index("memory://ident/ro::ot", "--out", "memory://ident/in::dex")["skipped"] == 10
        key = run_key(unit_name("ro::ot/c#d"))
        table = pl.read_parquet(memory.cat(f"/ident/in::dex/runs/{key}/iterations.parquet"))
        # the files as found, not the temporary copies they were read from
        assert table["source"].unique().to_list() == ["memory://ident/ro::ot/c#d/slurm-1.out"]
    finally:
        memory.rm("/ident", recursive=True)


def _spellings(tmp_path: Path) -> list[str]:
    """The dataset `root/ds` as written in every way that names it."""
    os.symlink(tmp_path / "root", tmp_path / "alias")
    return [
        "root/ds",
        "root/../root/ds",
        "./root/./ds",
        "root//ds/",
        "alias/ds",
        str(tmp_path / "alias" / "ds"),
    ]


def test_the_dataset_inside_a_root_is_never_read_however_it_is_spelled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Finding 6: `--out` inside the root spelled unnormalised (or through a symlink) was
    indexed as input: with --reports each report.html read as a Megatron log, and after
    three indexes `fleet` counted 3 runs (1 failed) for 1."""
    log, _ = _logs(tmp_path)
    (tmp_path / "root" / "run").mkdir(parents=True)
    shutil.copy(log, tmp_path / "root" / "run" / log.name)
    monkeypatch.chdir(tmp_path)
    for out in _spellings(tmp_path):
        result = _index("root", "--out", out, "--reports")
        assert (result["found"], result["failed"]) == (1, []), out
    os.symlink(tmp_path / "root" / "ds", tmp_path / "root" / "ds-link")  # an alias inside
    assert _index("root", "--out", "root/ds", "--reports")["found"] == 1
    fleet = CliRunner().invoke(main, ["fleet", "root/ds", "--json"])
    assert fleet.exit_code == 0, fleet.output
    document = json.loads(fleet.stdout)
    assert (document["totals"]["runs"], document["totals"]["not_read"]) == (1, 0)
    assert _manifest(tmp_path / "root" / "ds")["run_id"].to_list() == ["root/run"]


def test_a_root_inside_the_dataset_is_refused_in_one_line(tmp_path: Path) -> None:
    log, _ = _logs(tmp_path)
    (tmp_path / "root" / "run").mkdir(parents=True)
    shutil.copy(log, tmp_path / "root" / "run" / log.name)
    dataset = tmp_path / "root" / "ds"
    assert _index(str(tmp_path / "root"), "--out", str(dataset))["found"] == 1
    (dataset / "logs").mkdir()
    shutil.copy(log, dataset / "logs" / log.name)
    for root in (dataset / "logs", tmp_path / "root" / "." / "ds"):
        result = CliRunner().invoke(main, ["index", str(root), "--out", str(dataset), *GPU])
        assert result.exit_code == 2
        assert result.stderr == (
            f"Error: {root}: inside the dataset {dataset}, which is never read as input; name"
            " a root outside it\n"
        )
    listed = dataset / "wandb-runs.txt"  # a list of W&B runs may be kept in the dataset
    listed.write_text(f"{RUN}\n")
    with replay_server() as server:
        env = client_env(tmp_path / "client", server.base)
        done = subprocess.run(
            [sys.executable, "-m", "loganalyzer", "index", str(listed), "--out", str(dataset)],
            env=env,
            capture_output=True,
            timeout=300,
        )
    assert done.returncode == 0, done.stderr


# The credentials looked for in every output, by a piece no escaping changes: the second
# holds `'` and `&` (legal in a URL's userinfo), which HTML and a page's script JSON escape.
PASSWORDS = ("Zq9hunter2x", "Zq9'hunter2x&Kp")
PIECE = b"hunter2x"
SHORT = "PASS"  # one shorter than the values masked wherever they appear


@pytest.mark.parametrize("password", PASSWORDS)
def test_a_w_and_b_reference_with_a_password_is_stored_and_shown_without_it(
    tmp_path: Path, password: str
) -> None:
    """Finding 12: `https://alice:PASS@host/team/proj/runs/abc` was stored as written: the
    manifest's run_id, key, folder, error and sources, runs.parquet, the runs/<key> folder,
    the fleet page, `fleet --json`, `index --json` and stderr."""
    team, project, run = RUN.removeprefix("wandb:").split("/")
    good = f"https://alice:{password}@wandb.example/{team}/{project}/runs/{run}"
    gone = f"https://bob:{SHORT}@wandb.example/{team}/{project}/runs/nope"
    listed = tmp_path / "runs.txt"
    listed.write_text(f"{good}\n{gone}\n")
    dataset = tmp_path / "index"
    page = tmp_path / "fleet.html"
    with replay_server() as server:
        env = client_env(tmp_path / "client", server.base)
        command = [sys.executable, "-m", "loganalyzer", "index", str(listed), "--out"]
        index = subprocess.run(
            [*command, str(dataset), *GPU, "--jobs", "1", "--json", "--reports"],
            env=env,
            capture_output=True,
            timeout=300,
        )
    assert index.returncode == 0, index.stderr
    fleet = [sys.executable, "-m", "loganalyzer", "fleet", str(dataset)]
    outputs = [
        subprocess.run(argv, env=env, capture_output=True, timeout=120)
        for argv in (fleet, [*fleet, "--json"], [*fleet, "-o", str(page)])
    ]
    assert [done.returncode for done in outputs] == [0, 0, 0]
    said = json.loads(index.stdout)
    assert (said["found"], said["analysed"]) == (2, 2)
    assert [f["run_id"] for f in said["failed"]] == [gone.replace(SHORT, "***")]
    manifest = _manifest(dataset)
    assert manifest["run_id"].to_list() == sorted(
        [good.replace(password, "***"), gone.replace(SHORT, "***")]
    )
    assert manifest["status"].sort().to_list() == ["error", "ok"]
    written = [index.stdout, index.stderr, page.read_bytes()]
    written += [done.stdout + done.stderr for done in outputs]
    for path in dataset.rglob("*"):
        written.append(str(path.relative_to(dataset)).encode())
        if path.is_file():
            written.append(path.read_bytes())
    for text in written:
        data = text if isinstance(text, bytes) else text.encode()
        assert PIECE not in data
        assert f":{SHORT}@".encode() not in data
    # the same run listed with another password (or none) is the same run, read once
    listed.write_text(f"{good}\n{good.replace(password, 'other-secret')}\n")
    with replay_server() as server:
        env = client_env(tmp_path / "client", server.base)
        again = subprocess.run(
            [*command, str(dataset), *GPU, "--jobs", "1", "--json"],
            env=env,
            capture_output=True,
            timeout=300,
        )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["found"] == 1
    assert b"other-secret" not in again.stdout + again.stderr


ids = st.text(st.characters(codec="utf-8"), min_size=1, max_size=200)


@given(ids)
def test_no_key_is_a_name_the_clean_up_takes(text: str) -> None:
    """Keys and the index's temporary and backup names are disjoint by construction."""
    key = run_key(text)
    assert not key.startswith(".") and not is_leftover(key)
    assert key not in (".", "..") and "/" not in key and len(key.encode()) <= 100


@given(st.text(max_size=12), st.text(max_size=12), st.integers(2, 5), st.integers(1, 5))
def test_a_run_of_a_folder_never_takes_another_folders_id(
    first: str, second: str, runs: int, number: int
) -> None:
    """Escaped folder names never hold `#`: `x`'s N-th run and a folder `x#N` differ."""
    if first != second:
        assert unit_name(first) != unit_name(second)
    numbered = run_id(unit_name(first), min(number, runs), runs)
    assert numbered != run_id(unit_name(second), 1, 1)


class _StoreWithCredentials(MemoryFileSystem):
    """An object store whose URLs carry `user:password@` before the bucket, as FTP, SFTP and
    s3fs (`s3://key:secret@bucket`) take them: the store reads them from the URL and strips
    them from its paths."""

    protocol = ("credstore",)

    @classmethod
    def _strip_protocol(cls, path: Any) -> Any:
        if isinstance(path, str) and path.startswith("credstore://"):
            parts = infer_storage_options(path)
            path = parts["host"] + parts["path"]
        return super()._strip_protocol(path)

    @staticmethod
    def _get_kwargs_from_urls(path: str) -> dict[str, Any]:
        parts = infer_storage_options(path)
        return {key: parts[key] for key in ("username", "password") if parts.get(key)}

    def __init__(self, username: str | None = None, password: str | None = None, **kw: Any):
        super().__init__(**kw)


def test_a_root_url_with_a_password_is_read_and_stored_without_it(tmp_path: Path) -> None:
    """A root `credstore://alice:PASS@bucket/logs`: its files are opened with the password,
    which files.parquet, the manifest's sources and each run's summary held as written; they
    now hold `alice:***@`, and a second index finds the same files unchanged."""
    register_implementation("credstore", _StoreWithCredentials, clobber=True)
    store = MemoryFileSystem()
    log, _ = _logs(tmp_path)
    store.pipe("/credbucket/logs/run-a/slurm-1.out", log.read_bytes())
    root = f"credstore://alice:{PASSWORDS[1]}@credbucket/logs"
    dataset = tmp_path / "index"
    try:
        first = _index(root, "--out", str(dataset), "--reports")
        again = _index(root, "--out", str(dataset))
    finally:
        store.rm("/credbucket", recursive=True)
    assert (first["analysed"], again["skipped"]) == (1, 1)
    stored = pl.read_parquet(dataset / "files.parquet")["url"].to_list()
    assert stored == ["credstore://alice:***@credbucket/logs/run-a/slurm-1.out"]
    assert _manifest(dataset)["sources"][0][0]["url"] == stored[0]
    for path in dataset.rglob("*"):
        assert PIECE not in str(path).encode()
        assert path.is_dir() or PIECE not in path.read_bytes(), path


def test_a_folder_whose_name_is_not_utf8_is_a_failed_run_naming_it(tmp_path: Path) -> None:
    """A run folder named in Latin-1 bytes (`run-\\xe9t\\xe9`) beside a good one: the index
    went down with an internal error (polars holds no such text); the folder is now a run
    that failed, named with its byte escaped, and saying what to do."""
    log, _ = _logs(tmp_path)
    root = tmp_path / "root"
    latin = Path(os.fsdecode(bytes(root) + b"/run-\xe9t\xe9"))
    latin.mkdir(parents=True)
    (root / "good").mkdir()
    shutil.copy(log, latin / "slurm-1.out")
    shutil.copy(log, root / "good" / "slurm-1.out")
    said = _index(str(root), "--out", str(tmp_path / "index"))
    assert (said["found"], said["analysed"]) == (2, 2)
    assert [f["run_id"] for f in said["failed"]] == ["root/run-\\xe9t\\xe9"]
    assert "not UTF-8: rename it" in said["failed"][0]["error"]
    stored = pl.read_parquet(tmp_path / "index" / "files.parquet")["url"].to_list()
    assert any(url.endswith("run-\\xe9t\\xe9/slurm-1.out") for url in stored)
