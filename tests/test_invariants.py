"""The invariants of every summary (loganalyzer.analysis.invariants): the wall clock is at least
the logged step time, every share lies in [0, 1], the budget's lines sum to its wall clock,
the waterfall ends at the goodput MFU, and records cover no more iterations than counted.
Checked on random tables (timestamps that contradict the step times among them), on a real
W&B run whose history was logged after the fact, and on every shared log and fixture."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer import cli
from loganalyzer.cli import main
from loganalyzer.load import Loaded
from loganalyzer.model import Run, SourceInfo, empty_metrics
from loganalyzer.summary import build_summary
from tests.analysis_factories import START, make_table
from tests.conftest import FIXTURES, SHARED
from tests.wandb_offline import write_offline_run

SHARED_LOGS = SHARED / "logs"
OPTIONS: dict[str, dict[str, Any]] = {
    "shape": {
        "num_layers": 24,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "seq_length": 2048,
        "padded_vocab_size": 50304,
    },
    "run": {"gpu": "h100-sxm", "num_gpus": 8, "global_batch_size": 8},
}


def assert_invariants(doc: dict[str, Any]) -> None:
    """The invariants, read off the document itself (not through the code that checks them)."""
    assert doc["invariants"]["broken"] == []
    budget = doc["goodput"]
    wall = budget["wall_s"]
    slack = 1e-9 * max(1.0, wall)
    assert wall + slack >= doc["time"]["logged_s"]
    assert sum(line["seconds"] for line in budget["lines"]) == pytest.approx(wall, abs=slack)
    for line in budget["lines"]:
        assert line["seconds"] >= -slack, line
        assert line["share"] is None or -1e-9 <= line["share"] <= 1 + 1e-9, line
    assert budget["goodput"] is None or 0 <= budget["goodput"] <= 1 + 1e-9
    flops = doc["flops"]
    for key in ("mfu", "hfu", "mfu_overall", "mfu_goodput"):
        assert flops[key] is None or flops[key] >= 0, (key, flops[key])
    waterfall = doc["waterfall"]
    if waterfall["steps"] and flops["mfu_goodput"] is not None:
        assert waterfall["achieved"] == pytest.approx(flops["mfu_goodput"], rel=1e-12)


# A percent printed, and a duration printed negative.
_PERCENT = re.compile(r"(-?\d[\d,]*(?:\.\d+)?) %")
_NEGATIVE = re.compile(r"(?<![\w.])-\d[\d,]*(?:\.\d+)? ?(?:s|min|h)\b")
# Lines whose percents are not shares of a whole: utilisation of a peak (above 100 % when a
# flag gives a wrong GPU count; a verdict judges that) and differences between two figures.
_NOT_SHARES = re.compile(r"MFU|HFU|×|unexplained|TFLOPS")


def assert_printed_figures_possible(text: str) -> None:
    for line in text.splitlines():
        for found in _PERCENT.finditer(line):
            value = float(found.group(1).replace(",", ""))
            assert value >= 0 or _NOT_SHARES.search(line), line
            assert value <= 100 or _NOT_SHARES.search(line), line
        assert not _NEGATIVE.search(line), line


def _run(table: Any) -> Loaded:
    return Loaded(
        Run(
            framework="megatron-lm",
            config={},
            table=table,
            metrics=empty_metrics(),
            sources=[SourceInfo("synthetic.log", "megatron", table.height)],
        )
    )


@st.composite
def tables(draw: st.DrawFn) -> tuple[Any, bool]:
    """A run of one to three segments whose timestamps are true, absent, squeezed into a
    second (history logged after the fact), or shuffled; iterations that sometimes skip
    ahead of the log (a cut log, a counter that jumps by millions). The flag: whether the
    stamps of a segment contradict its step times."""
    segments = draw(st.integers(1, 3))
    steps: list[float] = []
    iterations: list[int] = []
    intervals: list[int] = []
    segment_of: list[int] = []
    stamps: list[Any] = []
    clock = 0.0
    contradicted = False
    for segment in range(segments):
        n = draw(st.integers(2, 25))
        interval = draw(st.integers(1, 10))
        times = draw(st.lists(st.floats(0.05, 20), min_size=n, max_size=n))
        mode = draw(st.sampled_from(["true", "none", "squeezed", "shuffled"]))
        iteration = draw(st.integers(0, 50)) if segment else 0
        clock += draw(st.floats(0, 600))  # a restart's gap
        seg_stamps = []
        for step in times:
            skip = draw(st.sampled_from([0, 0, 0, 1, 7, 1_000_000]))
            iteration += interval + skip
            clock += step * interval + draw(st.floats(0, 30))
            iterations.append(iteration)
            seg_stamps.append(START + timedelta(seconds=clock))
        if mode == "none":
            seg_stamps = [None] * n
        elif mode == "squeezed":
            base = seg_stamps[0]
            seg_stamps = [base + timedelta(seconds=k / n) for k in range(n)]
        elif mode == "shuffled":
            seg_stamps = draw(st.permutations(seg_stamps))
        logged = sum(times) * interval
        if mode in ("squeezed", "shuffled") and None not in seg_stamps:
            span = (seg_stamps[-1] - seg_stamps[0]).total_seconds() + times[0] * interval
            contradicted |= span < logged * 0.99 - 1.0
        steps += times
        intervals += [interval] * n
        segment_of += [segment] * n
        stamps += seg_stamps
    table = make_table(steps, iterations, intervals, segment_of, stamps)
    return table, contradicted


@settings(max_examples=40, deadline=None)
@given(tables())
def test_every_summary_keeps_the_invariants(drawn: tuple[Any, bool]) -> None:
    table, contradicted = drawn
    doc = build_summary(_run(table), OPTIONS)
    assert_invariants(doc)
    fallbacks = doc["invariants"]["clock_fallbacks"]
    assert bool(fallbacks) == contradicted
    for fallback in fallbacks:
        assert fallback["stamped_s"] < fallback["logged_s"]
        assert any(
            w.startswith("synthetic.log: the timestamps of iterations") for w in doc["warnings"]
        )


def test_stamps_that_contradict_the_step_times_give_way_to_them() -> None:
    """Ten 60 s steps stamped within one second: the wall clock is their 600 s."""
    stamps = [START + timedelta(seconds=k / 10) for k in range(10)]
    doc = build_summary(_run(make_table([60.0] * 10, timestamps=stamps)), OPTIONS)
    assert_invariants(doc)
    assert doc["goodput"]["wall_s"] == pytest.approx(600.0)
    assert doc["goodput"]["wall_clock"] == "sum of step times (timestamps set aside)"
    (fallback,) = doc["invariants"]["clock_fallbacks"]
    assert fallback["stamped_s"] == pytest.approx(60.9)
    assert (fallback["first_iteration"], fallback["last_iteration"]) == (1, 10)


def test_stamps_set_aside_measure_nothing() -> None:
    """Stamps within one second of a log whose counter jumps by a million: set aside, they
    measure neither iterations not in the log nor a jump beyond the clock."""
    stamps = [START + timedelta(seconds=k / 10) for k in range(10)]
    iterations = [
        1,
        2,
        3,
        1_000_004,
        1_000_005,
        1_000_006,
        1_000_007,
        1_000_008,
        1_000_009,
        1_000_010,
    ]
    doc = build_summary(_run(make_table([60.0] * 10, iterations, timestamps=stamps)), OPTIONS)
    assert_invariants(doc)
    assert len(doc["invariants"]["clock_fallbacks"]) == 1
    assert doc["invariants"]["unlogged_beyond_clock"] is None
    assert doc["goodput"]["wall_s"] == pytest.approx(600.0)


def test_records_that_cover_more_iterations_than_counted_are_said() -> None:
    """Ten records a counter apart, each claiming an interval of 10: 100 iterations in a
    span of 19."""
    doc = build_summary(_run(make_table([1.0] * 10, list(range(1, 11)), 10)), OPTIONS)
    (overlap,) = doc["invariants"]["overlaps"]
    assert (overlap["records"], overlap["covered"], overlap["span"]) == (10, 100, 19)
    assert (
        "synthetic.log: 10 records cover 100 iterations by their intervals, more than the 19"
        " the iteration counter spans" in " ".join(doc["warnings"])
    )


def test_stamps_a_second_short_of_the_step_times_are_rounding() -> None:
    """Whole-second stamps (2, 3, 5, ... 16 s) that span 0.85 s less than ten 1.65 s steps: no
    warning, and the clock is the step times' (never less)."""
    stamps = [START + timedelta(seconds=round(1.6 * (k + 1))) for k in range(10)]
    doc = build_summary(_run(make_table([1.65] * 10, timestamps=stamps)), OPTIONS)
    assert_invariants(doc)
    assert doc["invariants"]["clock_fallbacks"] == []
    assert doc["goodput"]["wall_s"] == pytest.approx(16.5)


# A W&B run whose history was logged after the fact: Megatron-LM's keys, as its training.py
# logs them (`wandb.log({...}, step=iteration)`), 500 iterations of 15 s each (2.1 h) with a
# save every 100, all written within a second.
AFTER_THE_FACT = """
import wandb
run = wandb.init(project="p", config={
    "num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "seq_length": 2048,
    "padded_vocab_size": 50304, "global_batch_size": 512, "bf16": True, "save_interval": 100})
for iteration in range(1, 501):
    step = 45.0 if iteration % 100 == 1 and iteration > 1 else 15.0
    wandb.log({"lm loss": 9 - iteration / 100, "iteration-time": step,
               "learning-rate": 1e-4}, step=iteration)
run.finish()
"""


@pytest.fixture(scope="module")
def after_the_fact(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_offline_run(AFTER_THE_FACT, tmp_path_factory.mktemp("wandb"))


def _summary(*args: str) -> tuple[dict[str, Any], str]:
    runner = CliRunner()
    as_json = runner.invoke(main, ["summary", "-q", "--json", *args])
    assert as_json.exit_code == 0, as_json.output
    as_text = runner.invoke(main, ["summary", "-q", *args])
    assert as_text.exit_code == 0, as_text.output
    return json.loads(as_json.stdout), as_text.stdout


def test_a_wandb_history_logged_after_the_fact(after_the_fact: Path) -> None:
    doc, text = _summary(str(after_the_fact), "--gpu", "h100-sxm", "--num-gpus", "8")
    assert_invariants(doc)
    assert_printed_figures_possible(text)
    logged = 15.0 * 500 + 30.0 * 4
    (fallback,) = doc["invariants"]["clock_fallbacks"]
    assert fallback["stamped_s"] < 15.0 + 2.0  # the first record's work and a second
    assert fallback["logged_s"] == pytest.approx(logged)
    assert doc["goodput"]["wall_s"] == pytest.approx(logged)
    assert doc["flops"]["mfu_goodput"] is not None
    (warning,) = [w for w in doc["warnings"] if "the timestamps of iterations 1–500" in w]
    assert warning.startswith(str(after_the_fact))
    assert "2.1 h of logged step time" in warning
    assert "wall clock is the sum of its step times" in warning
    assert "sum of step times (timestamps set aside)" in text


def test_the_wandb_0_16_fixture_has_the_clock_of_its_step_times() -> None:
    """fixtures/wandb/v0_16_6: 20 steps of about 0.51 s logged within 0.52 s."""
    doc, text = _summary(str(FIXTURES / "wandb" / "v0_16_6"), "--gpu", "h100-sxm")
    assert_invariants(doc)
    assert_printed_figures_possible(text)
    assert doc["goodput"]["wall_s"] == pytest.approx(doc["time"]["logged_s"])
    assert doc["goodput"]["wall_s"] == pytest.approx(10.21)
    assert len(doc["invariants"]["clock_fallbacks"]) == 1


def test_a_counter_that_jumps_is_held_to_the_clock() -> None:
    """fixtures/bad/iteration_jump.log: 5,000,000 iterations skipped in 46.7 minutes."""
    doc, text = _summary(str(FIXTURES / "bad" / "iteration_jump.log"))
    assert_invariants(doc)
    assert_printed_figures_possible(text)
    beyond = doc["invariants"]["unlogged_beyond_clock"]
    assert (beyond["first_after_iteration"], beyond["first_iteration"]) == (30, 5_000_030)
    assert beyond["clock_s"] == pytest.approx(2800 - 16.172)
    lines = {line["name"]: line["seconds"] for line in doc["goodput"]["lines"]}
    assert lines["iterations not in the log"] == pytest.approx(beyond["clock_s"])
    assert any("jumps further than the clock allows" in w for w in doc["warnings"])


def _every_input() -> list[Path]:
    """Every shared log and fixture a summary reads (what it cannot read is left out)."""
    found: list[Path] = []
    for root in (SHARED_LOGS, FIXTURES):
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in (".out", ".log", ".txt", ".gz", ".wandb", ".bin"):
                found.append(path)
    folders = [
        FIXTURES / "megatron" / "restart_dir",
        FIXTURES / "deepspeed" / "pipeline_restart",
        *[p for p in (FIXTURES / "tensorboard").iterdir() if p.is_dir()],
        *[p for p in (FIXTURES / "hf_trainer").iterdir() if p.is_dir()],
        SHARED_LOGS / "generated" / "hf_run",
        SHARED_LOGS / "generated" / "ds_run" / "out" / "tb",
    ]
    return found + [p for p in folders if p.is_dir()]


INPUTS = _every_input()


@pytest.mark.skipif(not SHARED_LOGS.is_dir(), reason="the shared logs are not beside the project")
def test_the_shared_logs_are_there() -> None:
    assert len([p for p in INPUTS if SHARED_LOGS in p.parents]) >= 40


@pytest.fixture(scope="module")
def read_once() -> Iterator[None]:
    """The four summaries of a source (JSON and text, without and with --gpu, one after the
    other) read it once: the later three take the runs the first read (`load_sources`, which
    --gpu does not change), and make their summaries of them as the CLI does. What these
    tests check is what a summary makes of a run; reading is checked by the parser and
    golden tests. A source that cannot be read is tried each time (its error each time)."""
    real = cli.load_sources
    last: dict[tuple[object, ...], list[Loaded]] = {}

    def once(
        sources: Sequence[str], forced_format: str | None, quiet: bool, refresh: bool
    ) -> list[Loaded]:
        key = (tuple(sources), forced_format, quiet, refresh)
        if key not in last:
            runs = real(sources, forced_format, quiet, refresh)
            last.clear()  # one source's runs held at a time
            last[key] = runs
        return last[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cli, "load_sources", once)
        yield


# A source's two variants side by side (the --gpu one varies fastest): `read_once` reads it
# once for both.
@pytest.mark.parametrize("gpu", [(), ("--gpu", "h100-sxm")], ids=["", "gpu"])
@pytest.mark.parametrize("path", INPUTS, ids=[str(p) for p in INPUTS])
def test_no_summary_prints_an_impossible_figure(
    path: Path, gpu: tuple[str, ...], read_once: None
) -> None:
    runner = CliRunner()
    as_json = runner.invoke(main, ["summary", "-q", "--json", str(path), *gpu])
    if as_json.exit_code != 0:  # not read (exit 1 or 3): nothing printed to check
        assert as_json.exit_code in (1, 3), as_json.output
        return
    assert_invariants(json.loads(as_json.stdout))
    as_text = runner.invoke(main, ["summary", "-q", str(path), *gpu])
    assert_printed_figures_possible(as_text.stdout)
