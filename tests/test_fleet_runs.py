"""`index`: runs told apart by the run-identity rules, each run's HTML report in the dataset
linked from the fleet page, and W&B runs listed in a file."""

from __future__ import annotations

import json
import os
import re
import shutil
import zipfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.fleet.layout import RUNS_DIR, run_key
from tests.fleet_tree import write_tree
from tests.test_wandb_remote import RUN
from tests.wandb_replay import FAKE_KEY, replay_server

GPU = ["--gpu", "h100-sxm"]


def _invoke(*args: str) -> Any:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


def _index(*args: str) -> dict[str, Any]:
    parsed: dict[str, Any] = json.loads(
        _invoke("index", *args, *GPU, "--jobs", "1", "--json", "-q").stdout
    )
    return parsed


def _manifest_ids(dataset: Path) -> list[str]:
    import polars as pl

    return sorted(pl.read_parquet(dataset / "manifest.parquet")["run_id"].to_list())


def test_a_folder_holds_the_runs_summary_split_runs_sees(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "fleet", runs_per_config=6)
    mixed = tmp_path / "fleet" / "mixed"
    mixed.mkdir()
    small = tree.root / "small" / "run-00" / "slurm-1000.out"
    medium = tree.root / "medium" / "run-00" / "slurm-2000.out"
    for log in (small, medium):  # two runs of other shapes in one folder
        shutil.copy(log, mixed / log.name)
    restarted = sorted((tree.root / "medium" / "run-05").glob("*.out"))
    dataset = tmp_path / "index"
    first = _index(str(tree.root), "--out", str(dataset))
    assert (first["found"], first["analysed"]) == (20, 20)
    assert [f["run_id"] for f in first["failed"]] == [tree.corrupt]
    assert "fleet/mixed" not in _manifest_ids(dataset)
    split = json.loads(
        _invoke("summary", "--split-runs", "--json", *GPU, "-q", *map(str, mixed.iterdir())).stdout
    )
    assert len(split) == 2
    for number, document in enumerate(split, start=1):
        folder = dataset / RUNS_DIR / run_key(f"fleet/mixed#{number}")
        assert json.loads((folder / "summary.json").read_text()) == document
    # a run whose restart is in another file is one run, as `summary` sees it
    whole = json.loads(_invoke("summary", "--json", *GPU, "-q", *map(str, restarted)).stdout)
    folder = dataset / RUNS_DIR / run_key("fleet/medium/run-05")
    assert json.loads((folder / "summary.json").read_text()) == whole
    assert whole["iterations"]["segments"] == 2

    again = _index(str(tree.root), "--out", str(dataset))
    assert (again["analysed"], again["skipped"]) == (0, 20)
    (mixed / medium.name).unlink()  # the folder holds one run now: its two ids go
    third = _index(str(tree.root), "--out", str(dataset))
    assert (third["analysed"], third["skipped"], third["reasons"]) == (
        1,
        18,
        {"files added or removed": 1},
    )
    ids = _manifest_ids(dataset)
    assert "fleet/mixed" in ids and not any("#" in run_id for run_id in ids)
    assert not (dataset / RUNS_DIR / run_key("fleet/mixed#2")).exists()


def test_reports_are_written_incrementally_and_links_survive_a_move_and_a_zip(
    tmp_path: Path,
) -> None:
    tree = write_tree(tmp_path / "fleet", runs_per_config=2)
    dataset = tmp_path / "index"
    assert _index(str(tree.root), "--out", str(dataset))["reports"] == 0
    asked = _index(str(tree.root), "--out", str(dataset), "--reports")
    assert (asked["reasons"], asked["reports"]) == ({"report asked for": 6}, 6)
    assert _index(str(tree.root), "--out", str(dataset), "--reports")["skipped"] == 6
    assert _index(str(tree.root), "--out", str(dataset))["skipped"] == 6  # reports kept
    log = tree.root / "small" / "run-01" / "slurm-1001.out"
    expected = tmp_path / "expected.html"
    _invoke("report", str(log), *GPU, "-q", "-o", str(expected))
    written = dataset / RUNS_DIR / run_key("fleet/small/run-01") / "report.html"
    assert written.read_bytes() == expected.read_bytes()  # the report `report` writes
    assert not list((dataset / RUNS_DIR).glob(".*"))

    _invoke("fleet", str(dataset), "-o", str(dataset / "fleet.html"))
    moved = Path(shutil.move(dataset, tmp_path / "elsewhere" / "renamed"))
    links = set(re.findall(r'href="([^"]+)"', (moved / "fleet.html").read_text()))
    assert len(links) == 6
    assert all(not link.startswith(("/", "file:")) for link in links)
    assert all((moved / unquote(link)).is_file() for link in links)
    archive = shutil.make_archive(str(tmp_path / "fleet"), "zip", moved.parent, moved.name)
    names = set(zipfile.ZipFile(archive).namelist())
    assert {f"renamed/{unquote(link)}" for link in links} <= names

    beside = tmp_path / "elsewhere" / "fleet.html"  # a page beside the dataset links into it
    _invoke("fleet", str(moved), "-o", str(beside))
    links = set(re.findall(r'href="([^"]+)"', beside.read_text()))
    assert len(links) == 6 and all(link.startswith("renamed/runs/") for link in links)


@pytest.fixture
def wandb_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in os.environ:
        if key.startswith("WANDB_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    for name in ("CONFIG", "CACHE", "DATA"):
        monkeypatch.setenv(f"WANDB_{name}_DIR", str(tmp_path / f"wandb-{name.lower()}"))
    monkeypatch.setenv("WANDB_API_KEY", FAKE_KEY)
    monkeypatch.setenv("WANDB_SILENT", "true")


def test_wandb_runs_listed_in_a_file_are_runs(tmp_path: Path, wandb_env: None) -> None:
    listed = tmp_path / "wandb-runs.txt"
    gone = "https://wandb.ai/tiny-team/tiny/runs/nope"
    listed.write_text(f"# the tiny project's runs\n\n{RUN}\n{gone}  # deleted\n")
    tree = write_tree(tmp_path / "fleet", runs_per_config=1)
    dataset = tmp_path / "index"
    with replay_server() as server:
        os.environ["WANDB_BASE_URL"] = server.base
        try:
            first = _index(str(tree.root), str(listed), "--out", str(dataset))
            server.requests.clear()
            second = _index(str(tree.root), str(listed), "--out", str(dataset))
        finally:
            del os.environ["WANDB_BASE_URL"]
    assert (first["found"], first["analysed"]) == (5, 5)
    [failed] = first["failed"]
    assert failed["run_id"] == gone
    assert failed["error"].startswith(f"{gone}: W&B could not be read")
    summary = json.loads((dataset / RUNS_DIR / run_key(RUN) / "summary.json").read_text())
    assert summary["iterations"]["logged"] == 20
    assert summary["run"]["num_gpus"] == 8
    assert summary["sources"][0]["path"] == RUN
    # the pulled run is kept; the one that failed is asked again (it may be back)
    assert (second["skipped"], second["reasons"]) == (4, {"failed before": 1})
    assert "HistoryPage" not in server.requests
    assert FAKE_KEY not in json.dumps([first, second])


def test_a_list_with_a_line_that_is_no_reference_is_a_one_line_error(tmp_path: Path) -> None:
    listed = tmp_path / "runs.txt"
    listed.write_text(f"{RUN}\nwandb:tiny-team/tiny/other\nrun-17\n")
    result = CliRunner().invoke(main, ["index", str(listed), "--out", str(tmp_path / "x")])
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {listed} line 3: 'run-17' is no W&B run reference; a list of runs holds one "
        "`wandb:ENTITY/PROJECT/RUN_ID` or run URL a line (# for comments)\n"
    )
