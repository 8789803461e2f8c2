"""`index` and `fleet` on a generated tree of 51 Megatron-LM runs: three configurations, one
15 % regression, one corrupt run, one run split across a restart."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.analysis.goodput import LOST_CAUSES, LOST_LINES, PRODUCTIVE, UNLOGGED
from loganalyzer.cli import main
from loganalyzer.fleet.engines import Item, PoolEngine, Result
from loganalyzer.fleet.indexer import build_index
from loganalyzer.fleet.layout import RUNS_DIR, run_key
from loganalyzer.fleet.worker import Settings, analyse_folder
from loganalyzer.summary import SCHEMA as SUMMARY_SCHEMA
from tests.conftest import ROOT
from tests.fleet_tree import Tree, write_tree

GPU = ["--gpu", "h100-sxm"]


@dataclass(frozen=True)
class Indexed:
    tree: Tree
    dataset: Path
    result: dict[str, Any]


def _index(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["index", *args, *GPU, "--json", "-q"])
    assert result.exit_code == 0, result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def _fleet(dataset: Path | str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["fleet", str(dataset), "--json"])
    assert result.exit_code == 0, result.output
    parsed: dict[str, Any] = json.loads(result.stdout)
    return parsed


def _runs(dataset: Path) -> pl.DataFrame:
    return pl.read_parquet(dataset / "runs.parquet")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Indexed:
    base = tmp_path_factory.mktemp("fleet")
    tree = write_tree(base / "a" / "fleet")
    dataset = base / "a-index"
    return Indexed(tree, dataset, _index(str(tree.root), "--out", str(dataset), "--jobs", "1"))


def test_index_records_every_run_and_the_corrupt_one_with_its_error(indexed: Indexed) -> None:
    result, tree = indexed.result, indexed.tree
    assert (result["found"], result["analysed"], result["skipped"]) == (51, 51, 0)
    assert result["reasons"] == {"new": 51}
    [failed] = result["failed"]
    assert failed["run_id"] == tree.corrupt
    assert "trainer_state.json" in failed["error"]
    manifest = pl.read_parquet(indexed.dataset / "manifest.parquet")
    assert manifest.height == 51
    assert manifest.filter(pl.col("status") == "error")["run_id"].to_list() == [tree.corrupt]
    restarted = manifest.filter(pl.col("run_id") == tree.restarted).row(0, named=True)
    assert [Path(s["url"]).name for s in restarted["sources"]] == [
        "slurm-2005.out",
        "slurm-2005b.out",
    ]  # launch.sh beside the logs is no source
    assert all(len(s["fingerprint"]) == 32 for s in restarted["sources"])
    folder = indexed.dataset / RUNS_DIR / run_key(tree.restarted)
    iterations = pl.read_parquet(folder / "iterations.parquet")
    assert iterations.columns[0] == "run_id"
    assert set(iterations["run_id"]) == {tree.restarted}
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["schema"] == SUMMARY_SCHEMA
    assert summary["iterations"]["logged"] == iterations.height == 12 + 6
    assert pl.read_parquet(folder / "metrics.parquet").columns[0] == "run_id"
    assert not (indexed.dataset / RUNS_DIR / run_key(tree.corrupt)).exists()


def test_fleet_json_finds_the_regression_names_the_corrupt_run_and_sums_gpu_hours(
    indexed: Indexed,
) -> None:
    fleet, tree = _fleet(indexed.dataset), indexed.tree
    assert fleet["schema"] == "loganalyzer.fleet/3"
    [regression] = fleet["regressions"]
    assert regression["run_id"] == tree.regressed
    assert regression["slowdown"] == pytest.approx(0.15, abs=0.02)
    assert regression["config_changes"] == [{"key": "micro_batch_size", "before": 2, "after": 1}]
    # the other runs' logs stop before their 1,000 iterations with no line saying why: their
    # ending is unknown, which is no failure
    assert [(r["run_id"], r["status"], r["error"]) for r in fleet["failed"]] == [
        (tree.corrupt, "error", indexed.result["failed"][0]["error"])
    ]
    assert fleet["totals"]["gpu_hours"] == pytest.approx(sum(tree.gpu_hours.values()), rel=1e-12)
    by_run = {r["run_id"]: r for r in fleet["runs"]}
    for run_id, hours in tree.gpu_hours.items():
        assert by_run[run_id]["gpu_hours"] == pytest.approx(hours, rel=1e-12), run_id
    restarted = by_run[tree.restarted]
    # 10 minutes of gap and 60 redone iterations (of 1.8 s) on 16 GPUs
    assert restarted["lost_restart_gaps_gpu_hours"] == pytest.approx(16 * 600 / 3600, rel=1e-9)
    assert restarted["lost_redone_work_gpu_hours"] == pytest.approx(16 * 60 * 1.8 / 3600, rel=0.01)
    assert fleet["most_lost"][0]["run_id"] == tree.restarted
    lost = fleet["lost_by_cause_gpu_hours"]
    assert lost["restart_gaps"] == restarted["lost_restart_gaps_gpu_hours"]
    assert [g["runs"] for g in fleet["groups"]] == [16, 17, 17]  # the corrupt run is in none
    assert fleet["runs"][0]["run_id"] == tree.corrupt  # worst first: failed, then most lost
    assert fleet["runs"][1]["run_id"] == tree.restarted


def test_gpu_hours_lost_are_the_runs_goodput_budgets_summed(indexed: Indexed) -> None:
    """Every run's figures are its summary's goodput budget times its GPUs, and the fleet's
    totals their sums: lost + productive + not in the log = the GPU-hours held."""
    fleet = _fleet(indexed.dataset)
    kept = (PRODUCTIVE, UNLOGGED)
    summed: dict[str, list[float]] = {cause: [] for cause in (*LOST_CAUSES, "all", "held")}
    for row in fleet["runs"]:
        if row["status"] != "ok":
            continue
        summary = json.loads((indexed.dataset / RUNS_DIR / row["key"] / "summary.json").read_text())
        goodput, gpus = summary["goodput"], summary["run"]["num_gpus"]
        lines = {line["name"]: line["seconds"] for line in goodput["lines"]}
        assert row["gpu_hours"] == gpus * goodput["wall_s"] / 3600
        lost = math.fsum(s for name, s in lines.items() if name not in kept)
        assert row["lost_gpu_hours"] == gpus * lost / 3600
        for cause, name in LOST_LINES.items():
            assert row[f"lost_{cause}_gpu_hours"] == gpus * lines[name] / 3600
            summed[cause].append(row[f"lost_{cause}_gpu_hours"])
        held = gpus * (lost + lines[PRODUCTIVE] + lines[UNLOGGED]) / 3600
        assert held == pytest.approx(row["gpu_hours"], rel=1e-12)
        summed["all"].append(row["lost_gpu_hours"])
        summed["held"].append(row["gpu_hours"])
    assert fleet["totals"]["lost_gpu_hours"] == pytest.approx(math.fsum(summed["all"]), rel=1e-12)
    assert fleet["totals"]["gpu_hours"] == pytest.approx(math.fsum(summed["held"]), rel=1e-12)
    for cause in LOST_CAUSES:
        total = fleet["lost_by_cause_gpu_hours"][cause]
        assert total == pytest.approx(math.fsum(summed[cause]), rel=1e-12, abs=1e-15), cause
    by_cause = math.fsum(fleet["lost_by_cause_gpu_hours"][c] for c in LOST_CAUSES)
    assert by_cause == pytest.approx(fleet["totals"]["lost_gpu_hours"], rel=1e-12)
    assert fleet["lost_by_cause_gpu_hours"]["restart_gaps"] > 0


def test_second_index_reanalyses_only_the_changed_run_in_a_pool(
    indexed: Indexed, tmp_path: Path
) -> None:
    tree = write_tree(tmp_path / "b" / "fleet")
    dataset = tmp_path / "index"
    first = _index(str(tree.root), "--out", str(dataset), "--jobs", "2")
    assert first["analysed"] == 51
    pooled, inline = _runs(dataset).drop("error"), _runs(indexed.dataset).drop("error")
    assert pooled.equals(inline)  # the pool gives the rows analysing in-process gives
    changed = tree.root / "small" / "run-01" / "slurm-1001.out"
    lines = changed.read_text().splitlines(keepends=True)
    changed.write_text("".join(lines[:-1]))  # the run's last record is gone
    touched = tree.root / "wide" / "run-07" / "slurm-3007.out"
    os.utime(touched, (1e9, 1e9))  # a new time, the same content
    second = _index(str(tree.root), "--out", str(dataset), "--jobs", "2")
    assert (second["analysed"], second["skipped"], second["reasons"]) == (1, 50, {"changed": 1})
    rows = _runs(dataset)
    records = rows.filter(pl.col("run_id") == "fleet/small/run-01")["records"].item()
    assert records == 11
    manifest = pl.read_parquet(dataset / "manifest.parquet")
    entry = manifest.filter(pl.col("run_id") == "fleet/wide/run-07").row(0, named=True)
    assert entry["sources"][0]["mtime"] == 1e9  # the entry keeps up with the new time
    third = _index(str(tree.root), "--out", str(dataset), "--jobs", "2")
    assert (third["analysed"], third["skipped"]) == (0, 51)


def test_rebuild_and_other_options_analyse_every_run_again(tmp_path: Path) -> None:
    tree = write_tree(tmp_path / "fleet", runs_per_config=2)
    dataset = str(tmp_path / "index")
    assert _index(str(tree.root), "--out", dataset, "--jobs", "1")["analysed"] == 6
    again = _index(str(tree.root), "--out", dataset, "--jobs", "1", "--rebuild")
    assert again["reasons"] == {"rebuild": 6}
    other = _index(str(tree.root), "--out", dataset, "--jobs", "1", "--slow-factor", "2")
    assert other["reasons"] == {"other options": 6}


class _Interrupted(PoolEngine):
    """An engine interrupted (Ctrl-C) after two runs finished."""

    def map(
        self,
        function: Callable[[Item], Result],
        items: Sequence[Item],
        failed: Callable[[Item, str], Result] | None = None,
    ) -> Iterator[Result]:
        if function is not analyse_folder:
            yield from super().map(function, items, failed)
            return
        yield from super().map(function, items[:2], failed)
        raise KeyboardInterrupt


def test_an_interrupted_index_keeps_what_it_finished_and_nothing_half_written(
    tmp_path: Path,
) -> None:
    tree = write_tree(tmp_path / "fleet", runs_per_config=2)
    dataset = tmp_path / "index"
    settings = Settings({"shape": {}, "run": {"gpu": "h100-sxm"}})
    with pytest.raises(KeyboardInterrupt):
        build_index([str(tree.root)], str(dataset), settings, _Interrupted(1))
    assert pl.read_parquet(dataset / "manifest.parquet").height == 2
    leftover = dataset / RUNS_DIR / ".tmp-fleet__small__run-00-0-123"
    leftover.mkdir()  # as a run killed mid-write leaves it
    (leftover / "iterations.parquet").write_bytes(b"PAR1 half")
    result = _index(str(tree.root), "--out", str(dataset), "--jobs", "1")
    assert (result["analysed"], result["skipped"]) == (4, 2)
    assert sorted(p.name.startswith(".") for p in (dataset / RUNS_DIR).iterdir()) == [False] * 6


def test_ray_engine_gives_the_same_rows_as_the_pool(indexed: Indexed, tmp_path: Path) -> None:
    """On one configuration's 17 runs (the corrupt one among them), to keep the test short."""
    dataset = tmp_path / "ray-index"
    root = indexed.tree.root / "wide"
    result = _index(str(root), "--out", str(dataset), "--engine", "ray", "--jobs", "2")
    assert (result["analysed"], len(result["failed"])) == (17, 1)
    on_ray = _runs(dataset).with_columns(("fleet/" + pl.col("run_id")).alias("run_id"))
    pooled = _runs(indexed.dataset).filter(pl.col("run_id").str.starts_with("fleet/wide/"))
    assert on_ray.drop("key").equals(pooled.drop("key"))


def test_memory_inputs_and_dataset_through_fsspec(indexed: Indexed) -> None:
    import fsspec

    memory = fsspec.filesystem("memory")
    picked = ["small/run-12", "medium/run-05", "wide/run-03"]
    for run in picked:
        for path in (indexed.tree.root / run).iterdir():
            memory.pipe(f"/i14/fleet/{run}/{path.name}", path.read_bytes())
    try:
        result = _index("memory://i14/fleet", "--out", "memory://i14/index", "--jobs", "1")
        assert (result["found"], result["analysed"], len(result["failed"])) == (3, 3, 1)
        assert "memory://i14/fleet/wide/run-03/trainer_state.json" in result["failed"][0]["error"]
        rows = pl.read_parquet(memory.cat("/i14/index/runs.parquet"))
        local = _runs(indexed.dataset).filter(pl.col("run_id").is_in(rows["run_id"].to_list()))
        figures = ["run_id", "status", "step_time_s", "mfu", "gpu_hours", "lost_gpu_hours"]
        assert rows.select(figures).equals(local.select(figures))
        summary = json.loads(
            memory.cat(f"/i14/index/runs/{run_key('fleet/medium/run-05')}/summary.json")
        )
        assert summary["sources"][1]["path"] == "memory://i14/fleet/medium/run-05/slurm-2005b.out"
        assert (
            _index("memory://i14/fleet", "--out", "memory://i14/index", "--jobs", "1")["skipped"]
            == 3
        )
        fleet = _fleet("memory://i14/index")
        assert [r["run_id"] for r in fleet["regressions"]] == []  # one run per group: no history
        assert [r["run_id"] for r in fleet["failed"]] == ["fleet/wide/run-03"]
    finally:
        memory.rm("/i14", recursive=True)


def test_fleet_html_is_self_contained_escaped_and_links_reports(
    indexed: Indexed, tmp_path: Path
) -> None:
    report = indexed.dataset / RUNS_DIR / run_key(indexed.tree.regressed) / "report.html"
    report.write_text("<html></html>")
    try:
        page = tmp_path / "out" / "fleet.html"
        page.parent.mkdir()
        result = CliRunner().invoke(main, ["fleet", str(indexed.dataset), "-o", str(page)])
        assert result.exit_code == 0, result.output
    finally:
        report.unlink()
    html = page.read_text()
    assert indexed.tree.regressed in html and indexed.tree.corrupt in html
    assert "micro_batch_size: 2 → 1" in html
    assert set(re.findall(r'(?:src|href)="([^"]+)"', html)) == {
        os.path.relpath(report, page.parent)
    }
    assert "<svg" in html and "http" not in html.replace("http://www.w3.org", "")


def test_fleet_page_escapes_what_runs_are_called(indexed: Indexed) -> None:
    from loganalyzer.fleet.report import build_fleet
    from loganalyzer.render.fleet_html import render_fleet_html
    from loganalyzer.render.fleet_view import build_view

    document = build_fleet(str(indexed.dataset))
    document["runs"][0]["run_id"] = "<script>alert(1)</script>"
    html = render_fleet_html(build_view(document, {}), "<i>dataset</i>")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script>alert" not in html and "<i>dataset" not in html


def test_fleet_text_in_a_real_subprocess(indexed: Indexed) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "loganalyzer", "fleet", str(indexed.dataset)],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    # the 50 whose logs stop before their last iteration end "unknown": no failure
    assert "Fleet of 51 runs (50 analysed, 1 not read, 1 failed)" in done.stdout
    assert f"{indexed.tree.regressed}: step" in done.stdout
    assert "micro_batch_size 2 → 1" in done.stdout
    assert done.stderr == ""


def test_fleet_of_a_folder_that_is_no_dataset_is_a_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["fleet", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr == (
        f"Error: {tmp_path}: no runs.parquet here; build the dataset with `loganalyzer index`\n"
    )


def test_index_refuses_to_write_into_a_folder_that_is_no_dataset(
    indexed: Indexed, tmp_path: Path
) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["index", str(indexed.tree.root), "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert "exists and is not a loganalyzer dataset" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_index_of_a_missing_root_and_a_shared_memory_dataset_are_errors(tmp_path: Path) -> None:
    missing = CliRunner().invoke(main, ["index", str(tmp_path / "nope"), "--out", "x"])
    assert missing.exit_code == 1
    assert missing.stderr == f"Error: {tmp_path / 'nope'}: no such file or directory\n"
    memory = CliRunner().invoke(main, ["index", str(tmp_path), "--out", "memory://x"])
    assert memory.exit_code == 2
    assert "memory:// dataset lives in one process" in memory.stderr


def test_docs_example_answers_a_fleet_question_without_loganalyzer(indexed: Indexed) -> None:
    readme = (ROOT / "docs" / "fleet.md").read_text()
    found = re.search(r"```python\n(import polars as pl\n.*?)```", readme, re.S)
    assert found, "docs/fleet.md lost its polars example"
    code = found[1].replace('"fleet-index/', f'"{indexed.dataset}/')
    assert len([line for line in code.splitlines() if line.strip()]) <= 5
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    answer = namespace["answer"]
    assert answer["run_id"][0] == indexed.tree.restarted
