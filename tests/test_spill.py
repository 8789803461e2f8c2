"""The long table past the memory budget: spilled to temporary Parquet files and scanned
lazily, with every figure the same as when it is held in memory (loganalyzer.spill)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer import spill
from loganalyzer.analysis.phases import (
    timer_means,
    timer_medians,
    timer_phases,
    timer_values,
    timer_values_at,
)
from loganalyzer.cli import main
from loganalyzer.errors import StorageError
from loganalyzer.load import load_run
from loganalyzer.model import METRICS_SCHEMA
from loganalyzer.parsers.megatron import MegatronParser
from loganalyzer.readfiles import FileTask, read_files
from loganalyzer.registry import load_registry
from loganalyzer.spill import (
    BUDGET_ENV,
    FOLDER_ENV,
    FOLDER_PREFIX,
    GROUP_BYTES,
    SpillingTable,
    collect,
    metric_names,
    remove_orphaned_folders,
    slices,
)
from loganalyzer.summary import build_summary
from tests.conftest import FIXTURES, ROOT

MEGATRON = FIXTURES / "megatron"
# Logs with timers (one-line and min/max), 32 ranks' memory lines, restarts in one file
# and across files, start-up timers and per-rank copies.
SOURCES = [
    [MEGATRON / "bigscience_gpt2_tp4_pp8.out"],
    [MEGATRON / "core_0_12_llama3_8b_throughput.log"],
    [MEGATRON / "quirks" / "timers_minmax.log"],
    [MEGATRON / "quirks" / "restart_in_file.log"],
    [MEGATRON / "quirks" / "srun_label_duplicates.log"],
    [MEGATRON / "restart_dir"],
]
TINY = "100"
# The GPU given, so that MFU and the waterfall are computed too.
OPTIONS: dict[str, dict[str, object]] = {
    "shape": {},
    "run": {"gpu": "h100-sxm"},
}  # bytes: every chunk of a fixture's long table goes to disk


@pytest.fixture
def spill_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A spill folder of the test's own (not yet made), named as a parent process would."""
    folder = tmp_path / "spill"
    monkeypatch.setenv(FOLDER_ENV, str(folder))
    return folder


def _summary(sources: list[Path]) -> dict[str, object]:
    loaded = load_run([str(s) for s in sources], load_registry())
    return build_summary(loaded, OPTIONS)


@pytest.mark.parametrize("sources", SOURCES, ids=lambda s: s[0].name)
def test_a_spilled_run_summarises_as_one_held_in_memory(
    sources: list[Path], spill_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = _summary(sources)
    monkeypatch.setenv(BUDGET_ENV, TINY)
    loaded = load_run([str(s) for s in sources], load_registry())
    assert isinstance(loaded.run.metrics, pl.LazyFrame)
    assert build_summary(loaded, OPTIONS) == held
    assert list(spill_folder.glob("*.parquet"))


def test_the_spilled_table_is_the_table_held_in_memory(
    spill_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = MEGATRON / "bigscience_gpt2_tp4_pp8.out"
    held = MegatronParser().parse(log).metrics
    assert isinstance(held, pl.DataFrame) and held.height > 100
    monkeypatch.setenv(BUDGET_ENV, TINY)
    spilled = MegatronParser().parse(log).metrics
    assert isinstance(spilled, pl.LazyFrame)
    assert spilled.collect_schema() == pl.Schema(METRICS_SCHEMA)
    assert collect(spilled).equals(held)
    assert list(spill_folder.glob("*.parquet"))


def test_a_spill_folder_named_like_a_pattern_is_read_as_a_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A temporary folder named with `[`, `?` and `*` (legal, as TMPDIR or a job's folder):
    the spilled files were scanned as a glob pattern matching nothing."""
    log = MEGATRON / "bigscience_gpt2_tp4_pp8.out"
    held = MegatronParser().parse(log).metrics
    monkeypatch.setenv(FOLDER_ENV, str(tmp_path / "job[1]?*" / "spill"))
    monkeypatch.setenv(BUDGET_ENV, TINY)
    spilled = MegatronParser().parse(log).metrics
    assert isinstance(spilled, pl.LazyFrame)
    assert collect(spilled).equals(held)


def test_a_run_under_the_budget_never_touches_the_disk(spill_folder: Path) -> None:
    run = MegatronParser().parse(MEGATRON / "bigscience_gpt2_tp4_pp8.out")
    assert isinstance(run.metrics, pl.DataFrame)
    assert not spill_folder.exists()


def test_parts_are_written_once_past_the_budget_and_read_back_in_order(
    spill_folder: Path,
) -> None:
    table = SpillingTable(budget=100)
    empty = pl.DataFrame(schema={"x": pl.Int64})
    table.add(pl.DataFrame({"x": [1, 2]}))
    assert not table.spilled and not spill_folder.exists()  # 16 bytes held
    table.add(pl.DataFrame({"x": list(range(3, 20))}))
    assert table.spilled
    table.add(pl.DataFrame({"x": [20]}))
    whole = table.finish(empty)
    assert isinstance(whole, pl.LazyFrame)
    assert collect(whole)["x"].to_list() == list(range(1, 21))
    assert len(list(spill_folder.iterdir())) == 2
    assert SpillingTable(budget=100).finish(empty) is empty


def test_slices_cover_the_table_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BUDGET_ENV, str(100 * GROUP_BYTES))  # a hundred rows a slice
    frame = pl.DataFrame({"x": list(range(250))})
    parts = [collect(part)["x"].to_list() for part in slices(frame)]
    assert [len(p) for p in parts] == [100, 100, 50]
    assert [x for part in parts for x in part] == list(range(250))


def test_runs_read_by_worker_processes_keep_their_spilled_files(
    spill_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(BUDGET_ENV, TINY)
    paths = [MEGATRON / "bigscience_gpt2_tp4_pp8.out", MEGATRON / "restart_dir" / "slurm-1001.out"]
    tasks = [FileTask(path, explicit=True, forced_format=None) for path in paths]
    pooled = list(read_files(tasks, load_registry(), jobs=2))
    for outcome, path in zip(pooled, paths, strict=True):
        assert outcome.run is not None
        assert isinstance(outcome.run.metrics, pl.LazyFrame)
        assert collect(outcome.run.metrics).equals(collect(MegatronParser().parse(path).metrics))


def test_export_streams_a_spilled_table(
    tmp_path: Path, spill_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = str(MEGATRON / "bigscience_gpt2_tp4_pp8.out")
    written = {}
    for budget in ("", TINY):
        monkeypatch.setenv(BUDGET_ENV, budget)
        out = tmp_path / f"metrics{budget}.parquet"
        result = CliRunner().invoke(main, ["export", "-q", log, "--metrics", "-o", str(out)])
        assert result.exit_code == 0, result.output
        written[budget] = pl.read_parquet(out)
    assert written[TINY].equals(written[""])


def test_the_spill_folder_goes_when_the_command_ends(tmp_path: Path) -> None:
    log = MEGATRON / "quirks" / "timers_minmax.log"
    env = {k: v for k, v in os.environ.items() if k != FOLDER_ENV}
    env |= {BUDGET_ENV: TINY, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    script = (
        "import os, sys\n"
        "from loganalyzer.cli import main\n"
        "try:\n"
        "    main(['summary', '-q', sys.argv[1], '--json'])\n"
        "finally:\n"
        f"    print(os.environ[{FOLDER_ENV!r}], file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(log)], env=env, capture_output=True, text=True
    )
    assert json.loads(done.stdout)["iterations"]["logged"] > 0
    folder = Path(done.stderr.strip().splitlines()[-1])
    assert folder.parent == tmp_path  # under TMPDIR, never beside the input
    assert not folder.exists()
    assert list(tmp_path.iterdir()) == []


def test_a_killed_commands_spill_folder_goes_with_the_next_command(tmp_path: Path) -> None:
    """A command killed (out of memory, `kill -9`) cannot remove its folder: the next one
    that spills removes it, and leaves a running process's folder and other files alone."""
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **_OUT)
    orphan = tmp_path / f"{FOLDER_PREFIX}{ended.stdout.strip()}-0a1b2c"
    running = tmp_path / f"{FOLDER_PREFIX}{os.getpid()}-3d4e5f"
    unrelated = tmp_path / f"{FOLDER_PREFIX}notes"
    for folder in (orphan, running, unrelated):
        folder.mkdir()
        (folder / "metrics-1-00000.parquet").write_bytes(b"x")
    remove_orphaned_folders(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([running.name, unrelated.name])


def test_a_command_that_spills_removes_orphaned_folders(tmp_path: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], **_OUT)
    orphan = tmp_path / f"{FOLDER_PREFIX}{ended.stdout.strip()}-0a1b2c"
    orphan.mkdir()
    log = MEGATRON / "quirks" / "timers_minmax.log"
    env = {k: v for k, v in os.environ.items() if k != FOLDER_ENV}
    env |= {BUDGET_ENV: TINY, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-m", "loganalyzer", "summary", "-q", str(log), "--json"], env=env, **_OUT
    )
    assert json.loads(done.stdout)["iterations"]["logged"] > 0
    assert list(tmp_path.iterdir()) == []


def test_index_removes_each_folders_spilled_tables_once_written(
    tmp_path: Path, spill_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`index` reads run after run in one process: each folder's spilled long tables go once
    its runs are written to the dataset, not when the process exits."""
    monkeypatch.setenv(BUDGET_ENV, TINY)
    fleet = tmp_path / "fleet"
    for name in ("a", "b"):
        (fleet / name).mkdir(parents=True)
        (fleet / name / "train.log").write_bytes(
            (MEGATRON / "quirks" / "timers_minmax.log").read_bytes()
        )
    dataset = tmp_path / "index"
    result = CliRunner().invoke(
        main, ["index", str(fleet), "--out", str(dataset), "--jobs", "1", "--json", "-q"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["analysed"] == 2
    assert list(spill_folder.rglob("*.parquet")) == []
    written = pl.concat([pl.read_parquet(p) for p in sorted(dataset.rglob("metrics.parquet"))])
    assert written.height > 0


_OUT: dict[str, Any] = {"capture_output": True, "text": True, "check": True}


def _restarted_timers() -> pl.DataFrame:
    """A long table of timers over a run restarted twice from iteration 1 (every iteration
    logged three times), with ranks' copies of some lines, `/min` rows and start-up timers."""
    names = ["timer/forward-backward/max", "timer/forward-backward/min", "timer/optimizer"]
    rows: list[tuple[int | None, str, float, str, int | None, int]] = []
    for launch in range(3):
        rows.append((None, "timer/model-and-optimizer-setup", 900.0 + launch, "x.log", None, 0))
        for iteration in range(1, 41):
            for k, name in enumerate(names):
                value = float((iteration * 37 + k * 11 + launch * 5) % 53)
                rows.append((iteration, name, value, "x.log", None, len(rows)))
                if iteration % 7 == 0:  # another rank's copy of the line, another value
                    rows.append((iteration, name, value + 1.5, "x.log", None, len(rows)))
    return pl.DataFrame(rows, schema=dict(METRICS_SCHEMA), orient="row")


@pytest.mark.parametrize(
    "metrics",
    [
        MegatronParser().parse(MEGATRON / "bigscience_gpt2_tp4_pp8.out").metrics,
        _restarted_timers(),
    ],
    ids=["bigscience", "restarted"],
)
def test_timer_medians_are_those_of_the_per_iteration_timer_table(
    metrics: pl.DataFrame, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted in passes over slices of 64 rows (iterations split between slices, phases
    logged again after a restart), as polars' median of the whole table gives them."""
    whole = timer_values(metrics)  # one slice under the default budget
    expected = (
        whole.group_by("phase")
        .agg(median=pl.col("value").median())
        .sort("phase")
        .with_columns(pl.col("phase").cast(pl.String))
    )
    assert expected.height
    monkeypatch.setenv(BUDGET_ENV, str(64 * GROUP_BYTES))
    assert len(slices(metrics)) > 1
    assert timer_medians(metrics, timer_phases(metric_names(metrics))).equals(expected)
    assert timer_values(metrics).sort("iteration", "phase").equals(whole.sort("iteration", "phase"))
    some = whole["iteration"].unique().sort().gather_every(3)
    at = whole.filter(pl.col("iteration").is_in(some.implode()))
    assert (
        timer_values_at(metrics, some, timer_phases(metric_names(metrics)))
        .sort("iteration", "phase")
        .equals(at.with_columns(pl.col("phase").cast(pl.String)).sort("iteration", "phase"))
    )


_TIMER_NAMES = ["timer/forward-backward/max", "timer/optimizer", "timer/backward-compute"]
# Timer rows (iteration, name, whole value) in any order, any phase again at any iteration.
_TIMER_ROWS = st.lists(
    st.tuples(st.integers(0, 60), st.sampled_from(_TIMER_NAMES), st.integers(0, 9)),
    min_size=65,  # two slices at least
    max_size=200,
)


def _timer_table(rows: list[tuple[int, str, int]]) -> pl.DataFrame:
    """A long table of `rows`."""
    return pl.DataFrame(
        [(i, name, float(v), "x.log", None, k) for k, (i, name, v) in enumerate(rows)],
        schema=dict(METRICS_SCHEMA),
        orient="row",
    )


@settings(max_examples=60, deadline=None)
@given(_TIMER_ROWS)
def test_timer_medians_count_each_iteration_once_however_the_rows_fall(
    rows: list[tuple[int, str, int]],
) -> None:
    """Any order of timer rows, any phase logged again at any iteration, in slices of 64
    rows: each phase's median over its per-iteration largest value."""
    metrics = _timer_table(rows)
    phase_of = timer_phases(_TIMER_NAMES)
    expected = (
        metrics.with_columns(phase=pl.col("name").cast(pl.String).replace_strict(phase_of))
        .group_by("iteration", "phase")
        .agg(pl.col("value").max())
        .group_by("phase")
        .agg(median=pl.col("value").median())
        .sort("phase")
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(BUDGET_ENV, "1")  # every slice the fewest rows: spill.MIN_SLICE_ROWS
        assert timer_medians(metrics, phase_of).equals(expected)


@settings(max_examples=60, deadline=None)
@given(
    _TIMER_ROWS,
    st.sampled_from([{"forward-backward", "optimizer", "backward-compute"}, {"optimizer"}]),
    st.sampled_from([3, 7, 1000]),
)
def test_timer_means_average_each_iteration_once_however_the_rows_fall(
    rows: list[tuple[int, str, int]], phases: set[str], buckets: int
) -> None:
    """In slices of 64 rows, any order and repeat of rows: each phase's per-iteration largest
    value, averaged over `buckets` runs of as many iterations (by rank among those with the
    phases read), as from the whole table at once; each iteration alone when there are no
    more of them than buckets. Whole values, so that any order of summing is exact."""
    metrics = _timer_table(rows)
    per_iteration = (
        metrics.with_columns(
            phase=pl.col("name").cast(pl.String).replace_strict(timer_phases(_TIMER_NAMES))
        )
        .filter(pl.col("phase").is_in(list(phases)))
        .group_by("iteration", "phase")
        .agg(pl.col("value").max())
    )
    iterations = per_iteration["iteration"].n_unique()
    expected = (
        per_iteration.with_columns(
            bucket=(pl.col("iteration").rank("dense").cast(pl.Int64) - 1) * buckets // iterations
        )
        .group_by("bucket", "phase")
        .agg(pl.col("iteration").min(), pl.col("value").mean())
        .select("iteration", "phase", "value")
        if iterations > buckets
        else per_iteration
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(BUDGET_ENV, "1")  # every slice the fewest rows: spill.MIN_SLICE_ROWS
        assert len(slices(metrics)) > 1
        read = {n: p for n, p in timer_phases(_TIMER_NAMES).items() if p in phases}
        means = timer_means(metrics, read, buckets)
    assert means.sort("iteration", "phase").equals(expected.sort("iteration", "phase"))


def test_a_timer_logged_twice_at_an_18_digit_iteration_is_counted_once() -> None:
    """iteration * phases would wrap around 64 bits here (ten phases): the key is wider."""
    phases = ["forward-backward", "forward-compute", "backward-compute", "batch-generator"]
    phases += ["forward-recv", "forward-send", "backward-recv", "backward-send", "optimizer"]
    names = [f"timer/{phase}" for phase in [*phases, "all-grads-sync"]]
    big = 999_999_999_999_999_990
    rows = [(big, names[0], 1.0), (big, names[0], 9.0), (big + 10, names[0], 3.0)]
    rows += [(big, name, 1.0) for name in names[1:]]
    metrics = pl.DataFrame(
        [(i, name, v, "x.log", None, k) for k, (i, name, v) in enumerate(rows)],
        schema=dict(METRICS_SCHEMA),
        orient="row",
    )
    medians = timer_medians(metrics, timer_phases(names))
    assert medians.filter(pl.col("phase") == "forward-backward")["median"].item() == 6.0


def test_a_spill_folder_that_cannot_be_made_is_one_line_and_exit_1(tmp_path: Path) -> None:
    """Where the spilled rows cannot go (here a folder under a file; a read-only or full
    disk alike), the command says where and what to do: no traceback."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    env = os.environ | {
        BUDGET_ENV: TINY,
        FOLDER_ENV: str(blocker / "spill"),
        "PYTHONPATH": str(ROOT),
    }
    log = MEGATRON / "quirks" / "timers_minmax.log"
    done = subprocess.run(
        [sys.executable, "-m", "loganalyzer", "summary", "-q", str(log), "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert "Traceback" not in done.stderr
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1
    assert str(blocker / "spill") in message
    assert "TMPDIR" in message and BUDGET_ENV in message


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_index_stops_once_where_the_spill_folder_cannot_take_the_tables(
    tmp_path: Path, jobs: str
) -> None:
    """Every folder after the first would fail alike: `index` stops with the one line, in a
    worker process too, and keeps the dataset it has written so far."""
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    fleet = tmp_path / "fleet"
    for name in ("a", "b", "c"):
        (fleet / name).mkdir(parents=True)
        (fleet / name / "train.log").write_bytes(
            (MEGATRON / "quirks" / "timers_minmax.log").read_bytes()
        )
    env = os.environ | {
        BUDGET_ENV: TINY,
        FOLDER_ENV: str(blocker / "spill"),
        "PYTHONPATH": str(ROOT),
    }
    dataset = tmp_path / "index"
    command = ["index", str(fleet), "--out", str(dataset), "--jobs", jobs, "-q", "--json"]
    done = subprocess.run(
        [sys.executable, "-m", "loganalyzer", *command],
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert message.startswith(f"Error: {blocker / 'spill'}")
    assert "cannot write the metrics" in message and "the index stopped after 0 runs" in message
    assert (dataset / "manifest.parquet").exists()


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs Linux's /dev/full")
def test_a_full_disk_is_a_storage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """polars reports a full disk as its own ComputeError, not as an OSError."""
    monkeypatch.setattr(spill, "_spill_path", lambda: Path("/dev/full"))
    table = SpillingTable(budget=0)
    with pytest.raises(StorageError, match="No space left on device"):
        table.add(pl.DataFrame({"value": list(range(100_000))}))


def test_data_polars_cannot_write_is_not_blamed_on_the_disk(spill_folder: Path) -> None:
    """polars' refusal of the data itself is a bug to report (an internal error), not a
    folder to clear."""
    table = SpillingTable(budget=0)
    with pytest.raises(pl.exceptions.ComputeError) as raised:
        table.add(pl.DataFrame({"value": [object()]}, schema={"value": pl.Object}))
    assert not isinstance(raised.value, StorageError)
