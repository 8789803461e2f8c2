"""Reading the files of a source in a pool of processes gives exactly what reading them one
after another gives: the same runs in the same order, the same warnings and ignored files,
the same fatal error for a file named explicitly; progress still reaches stderr."""

from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from bench.generate import write_log
from loganalyzer.errors import InputError
from loganalyzer.model import Run
from loganalyzer.parsers.megatron import MegatronParser
from loganalyzer.readfiles import (
    POOL_BYTES,
    SIZEABLE_BYTES,
    FileOutcome,
    FileTask,
    read_files,
    worth_a_pool,
)
from loganalyzer.registry import LoadedParser, Registry, load_registry
from loganalyzer.spill import BUDGET_ENV, collect
from tests.conftest import FIXTURES, ROOT


def _mixed_folder(folder: Path) -> list[Path]:
    """Logs of two formats, a gzip cut short (a warning), an empty file and a note (both
    ignored), in the order `expand_sources` lists them."""
    folder.mkdir()
    shutil.copytree(FIXTURES / "megatron" / "restart_dir", folder / "a_restarts")
    packed = gzip.compress((FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out").read_bytes())
    (folder / "b_cut.log.gz").write_bytes(packed[: len(packed) // 2])
    (folder / "c_empty.log").write_bytes(b"")
    (folder / "d_notes.txt").write_text("rerun with a larger batch next time\n")
    shutil.copy(FIXTURES / "megatron" / "core_0_12_llama3_8b_throughput.log", folder / "e.log")
    return sorted(p for p in folder.rglob("*") if p.is_file())


def _same(serial: FileOutcome, pooled: FileOutcome) -> None:
    assert pooled.path == serial.path
    assert pooled.ignored_reason == serial.ignored_reason
    if serial.run is None:
        assert pooled.run is None
        return
    assert pooled.run is not None
    assert pooled.run.table.equals(serial.run.table)
    # compacted again after the trip from the worker: literal columns take no room
    assert pooled.run.table.estimated_size() == serial.run.table.estimated_size()
    assert pooled.run.metrics.equals(serial.run.metrics)
    assert pooled.run.config == serial.run.config
    assert pooled.run.warnings == serial.run.warnings
    assert pooled.run.sources == serial.run.sources


def test_pooled_outcomes_are_the_serial_ones_in_the_same_order(tmp_path: Path) -> None:
    paths = _mixed_folder(tmp_path / "run")
    tasks = [FileTask(path, explicit=False, forced_format=None) for path in paths]
    registry = load_registry()
    serial = list(read_files(tasks, registry, jobs=1))
    pooled = list(read_files(tasks, registry, jobs=2))
    assert [o.path for o in pooled] == paths
    for one, other in zip(serial, pooled, strict=True):
        _same(one, other)
    cut = next(o for o in pooled if o.path.name == "b_cut.log.gz")
    assert cut.run is not None and any("ends early" in w for w in cut.run.warnings)
    assert sum(o.run is None for o in pooled) == 2


def test_a_fatal_error_for_a_named_file_is_raised_from_the_pool(tmp_path: Path) -> None:
    paths = _mixed_folder(tmp_path / "run")
    tasks = [FileTask(path, explicit=True, forced_format=None) for path in paths]
    with pytest.raises(InputError, match=r"c_empty\.log: the file is empty"):
        list(read_files(tasks, load_registry(), jobs=2))


def test_only_several_sizeable_files_are_worth_a_pool(tmp_path: Path) -> None:
    small = tmp_path / "small.log"
    small.write_bytes(b"x" * (SIZEABLE_BYTES - 1))
    big = [tmp_path / f"big{i}.log" for i in range(2)]
    for path in big:
        with path.open("wb") as out:
            out.truncate(POOL_BYTES // 2)  # sparse: no bytes written
    assert worth_a_pool(big)
    assert not worth_a_pool([big[0], small])
    assert not worth_a_pool([small] * 40)


def test_a_run_directory_read_by_the_pool_from_the_command_line(tmp_path: Path) -> None:
    """A real subprocess on two logs large enough for the pool: the merged run holds every
    iteration of both, and each file's progress line reaches stderr."""
    folder = tmp_path / "run"
    folder.mkdir()
    size = POOL_BYTES // 2
    first = write_log(folder / "slurm-1.out", size)
    second = write_log(folder / "slurm-2.out", size, first=1 + first)
    done = subprocess.run(
        [sys.executable, "-m", "loganalyzer", "summary", str(folder), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert json.loads(done.stdout)["iterations"]["logged"] == first + second
    for name in ("slurm-1.out", "slurm-2.out"):
        assert f"reading {folder / name} (megatron)" in done.stderr


def test_a_registry_that_cannot_reach_a_worker_is_read_here(tmp_path: Path) -> None:
    """A parser object defined where a worker cannot import it (here, inside a test) keeps
    the serial path rather than failing."""

    class Local:
        name = "local"
        description = "a parser only this process knows"

        def detect(self, path: Path) -> float:
            return 1.0

        def parse(self, path: Path) -> Run:
            return MegatronParser().parse(path)

    registry = Registry({"local": LoadedParser(Local(), "tests", "tests:Local")}, {})
    paths = _mixed_folder(tmp_path / "run")[:2]
    tasks = [FileTask(path, explicit=True, forced_format=None) for path in paths]
    outcomes = list(read_files(tasks, registry, jobs=2))
    assert [o.path for o in outcomes] == paths
    assert all(o.run is not None and o.run.table.height for o in outcomes)


def test_long_tables_held_in_memory_stay_within_one_budget_over_all_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each file's long table is within the budget, but three of them are not: the later
    ones go to disk, and read back the same."""
    fixture = FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out"
    paths = []
    for name in ("a.out", "b.out", "c.out"):
        shutil.copy(fixture, tmp_path / name)
        paths.append(tmp_path / name)
    tasks = [FileTask(path, explicit=False, forced_format=None) for path in paths]
    held = [o.run for o in read_files(tasks, load_registry(), jobs=1)]
    assert all(run is not None and isinstance(run.metrics, pl.DataFrame) for run in held)
    one = held[0].metrics.estimated_size()  # type: ignore[union-attr]
    assert one > 0
    monkeypatch.setenv(BUDGET_ENV, str(int(one * 1.5)))
    bounded = [o.run for o in read_files(tasks, load_registry(), jobs=1)]
    assert [isinstance(run.metrics, pl.DataFrame) for run in bounded if run] == [True, False, False]
    for run, in_memory in zip(bounded, held, strict=True):
        assert run is not None and in_memory is not None
        assert collect(run.metrics).equals(in_memory.metrics)
