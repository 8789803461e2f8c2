"""Which TensorBoard event files are one run: the run-identity rules (loganalyzer.identity)
applied to folders of event files written by tensorboard's own writer."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.identity import group_runs
from loganalyzer.model import ConfigValue, Provenance
from loganalyzer.parsers.tensorboard import TensorBoardParser

START = 1_795_000_000.0


def _write(
    folder: Path, steps: Iterable[int], start: float, layers: int | None = None, seed: int = 0
) -> Path:
    """One event file: `iteration-time` and `lm loss` (shifted by `seed`) at each step, one
    second apart from `start`; Megatron's `num_layers` text summary when given."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.text.summary_v2 import text_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder))
    if layers is not None:
        text = text_pb("num_layers/text_summary", str(layers))
        writer.add_event(Event(wall_time=start, step=0, summary=text))
    for step in steps:
        for tag, value in (("iteration-time", 0.5), ("lm loss", 10 - step / 100 + seed)):
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            writer.add_event(Event(wall_time=start + step, step=step, summary=summary))
    writer.close()
    (written,) = folder.glob("events.out.tfevents.*")
    return written


def _summary(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["summary", "-q", *args])
    return result.exit_code, result.stdout, result.stderr


def test_a_folder_of_two_runs_is_refused_with_both_listed(tmp_path: Path) -> None:
    first = _write(tmp_path / "runs" / "A", range(1, 21), START, layers=24)
    second = _write(tmp_path / "runs" / "B", range(1, 31), START + 1000, layers=12)
    code, stdout, stderr = _summary(str(tmp_path / "runs"))
    assert code == 1 and stdout == ""
    assert "holds 2 different runs" in stderr
    assert f"run 1: {first}: layers 24, GPU count unknown, iterations 1–20 (20 records)" in stderr
    assert f"run 2: {second}: layers 12, GPU count unknown, iterations 1–30 (30 records)" in stderr
    code, stdout, _ = _summary("--json", "--split-runs", str(tmp_path / "runs"))
    assert code == 0
    docs = json.loads(stdout)
    assert [doc["iterations"]["logged"] for doc in docs] == [20, 30]
    assert [doc["sources"][0]["path"] for doc in docs] == [str(first), str(second)]
    code, stdout, _ = _summary("--json", "--run", "2", str(tmp_path / "runs"))
    assert code == 0
    assert json.loads(stdout)["iterations"]["first"] == 1
    assert json.loads(stdout)["run"]["model"]["num_layers"] == 12


def test_two_runs_of_a_sweep_side_by_side_are_not_a_restart(tmp_path: Path) -> None:
    """B continues A's counter, but was running while A still was: not a resume of it."""
    _write(tmp_path / "sweep" / "lr1", range(1, 101), START)
    _write(tmp_path / "sweep" / "lr2", range(51, 151), START + 10, seed=1)
    code, _, stderr = _summary(str(tmp_path / "sweep"))
    assert code == 1
    assert "holds 2 different runs" in stderr


def test_a_restart_into_a_new_sub_folder_is_a_segment_of_the_run(tmp_path: Path) -> None:
    """HF Trainer writes each launch into runs/<date>_<host>/: a resume that starts after the
    first launch's last event, from its checkpoint, is the same run."""
    _write(tmp_path / "runs" / "Nov01_10-00-00_node1", range(1, 51), START)
    _write(tmp_path / "runs" / "Nov01_12-00-00_node1", range(41, 101), START + 7200)
    code, stdout, _ = _summary("--json", str(tmp_path / "runs"))
    assert code == 0
    document = json.loads(stdout)
    assert document["iterations"] == {
        "logged": 110,
        "covered": 110,
        "first": 1,
        "last": 100,
        "segments": 2,
    }
    (restart,) = document["restarts"]
    assert restart["lost_iterations"] == 10


def test_a_step_that_goes_back_in_one_file_is_a_restart(tmp_path: Path) -> None:
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(tmp_path))
    for index, step in enumerate([*range(1, 31), *range(21, 41)]):
        summary = Summary(value=[Summary.Value(tag="iteration-time", simple_value=0.5)])
        writer.add_event(Event(wall_time=START + index, step=step, summary=summary))
    writer.close()
    code, stdout, _ = _summary("--json", str(tmp_path))
    assert code == 0
    document = json.loads(stdout)
    assert document["iterations"]["segments"] == 2
    assert len(document["restarts"]) == 1


def test_a_single_record_past_iteration_1_is_a_resume(tmp_path: Path) -> None:
    """A file holding one record, at iteration 700, says nothing of the iterations before
    it: it is not known to start from scratch, and it carries on the counter of the run
    before it (which stopped at 500), so it joins that run."""
    parser = TensorBoardParser()
    first = parser.parse(_write(tmp_path / "a", [500], START))
    second = parser.parse(_write(tmp_path / "b", [700], START + 100))
    assert second.table["interval"].to_list() == [700]  # the parser's guess, not evidence
    assert [len(run) for run in group_runs([first, second])] == [2]


def test_a_single_record_not_past_the_run_before_is_another_run(tmp_path: Path) -> None:
    """Benchmarks that each log iteration 2 once: a lone record that does not carry the
    counter past the earlier run's last iteration is not a resume of it."""
    parser = TensorBoardParser()
    first = parser.parse(_write(tmp_path / "a", [1, 2], START))
    second = parser.parse(_write(tmp_path / "b", [2], START + 100))
    assert [len(run) for run in group_runs([first, second])] == [1, 1]


def test_a_single_record_at_the_stated_log_interval_starts_from_scratch(tmp_path: Path) -> None:
    """With the log interval stated (700), a lone record at iteration 700 covers 1–700."""
    parser = TensorBoardParser()
    first = parser.parse(_write(tmp_path / "a", [500], START))
    second = parser.parse(_write(tmp_path / "b", [700], START + 100))
    second.config["log_interval"] = ConfigValue(700, Provenance("config", "test"))
    assert [len(run) for run in group_runs([first, second])] == [1, 1]
