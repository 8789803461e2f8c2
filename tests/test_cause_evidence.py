"""Evidence ranks above arithmetic, and each save or evaluation is counted once: a TensorBoard
run written by tensorboard's own writer, as Megatron-LM writes it (`iteration-time`,
`lm loss`, `lm loss validation` at the evaluations; its arguments as `<arg>/text_summary`,
initialize.py `writer.add_text(arg, str(value))`, see logs/FORMATS.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from loganalyzer.cli import main

START = 1_795_000_000.0
SAVE_S, EVAL_S, STALL_S = 38.0, 20.0, 95.0


def write_run(folder: Path, last: int = 2500) -> Path:
    """Iterations 1..`last` at about 1 s; at iterations 1000 and 2000 a save (38 s inside
    the record's `iteration-time`, save_interval 1000: no line says it) and an evaluation (a
    `lm loss validation` record, 20 s outside the iteration timer: a stall on the wall clock
    before the next record); one unexplained 95 s slow record at iteration 2345."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.plugins.text.summary_v2 import text_pb
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True, exist_ok=True)
    writer = EventFileWriter(str(folder))
    for arg, value in (("save_interval", 1000), ("num_layers", 24), ("micro_batch_size", 1)):
        text = text_pb(f"{arg}/text_summary", str(value))
        writer.add_event(Event(wall_time=START, step=0, summary=text))
    clock = START
    for step in range(1, last + 1):
        took = 1.0 + 0.01 * (step % 7)
        if step in (1000, 2000):
            took += SAVE_S
        if step in (1001, 2001):
            clock += EVAL_S
        if step == 2345:
            took += STALL_S
        clock += took
        scalars = [("iteration-time", took), ("lm loss", 10 - step / 1000)]
        if step in (1000, 2000):
            scalars.append(("lm loss validation", 9 - step / 1000))
        for tag, value in scalars:
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            writer.add_event(Event(wall_time=clock, step=step, summary=summary))
    writer.close()
    (written,) = folder.glob("events.out.tfevents.*")
    return written


def summary(path: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", *args, str(path)])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_a_validation_record_beats_save_interval_and_each_event_is_counted_once(
    tmp_path: Path,
) -> None:
    doc = summary(write_run(tmp_path / "tb"))
    stalls = {s["iteration"]: s["cause"] for s in doc["stalls"]}
    assert {i: (c["kind"], c["evidence_kind"]) for i, c in stalls.items()} == {
        1001: ("evaluation", "metric"),
        2001: ("evaluation", "metric"),
    }
    slow = {s["iteration"]: s["cause"] for s in doc["slow_steps"]}
    assert (slow[1000]["kind"], slow[1000]["evidence_kind"]) == ("checkpoint_save", "interval")
    assert (slow[2000]["kind"], slow[2000]["evidence_kind"]) == ("checkpoint_save", "interval")
    assert slow[2345]["kind"] == "unknown"
    lines = {line["name"]: line["seconds"] for line in doc["goodput"]["lines"]}
    assert abs(lines["evaluation"] - 2 * EVAL_S) < 1
    assert abs(lines["checkpoint saves"] - 2 * SAVE_S) < 1
    messages = {v["code"]: v["message"] for v in doc["verdicts"]}
    assert "2 saves attributed, 38 s each" in messages["CHECKPOINT_SAVE_COST"]
    assert "2 evaluations attributed, 20 s each" in messages["EVALUATION_COST"]


def test_verdicts_rank_the_unexplained_stall_above_explained_saves_and_evaluations(
    tmp_path: Path,
) -> None:
    """The 95 s nothing explains (3.5 % of the run) is a warning; the saves (76 s, 2.7 %)
    and evaluations (40 s, 1.4 %), explained, are information, each said once (no STALLS or
    PERIODIC_SLOW_STEPS verdict beside their own); every verdict carries its seconds."""
    doc = summary(write_run(tmp_path / "tb"))
    verdicts = {v["code"]: v for v in doc["verdicts"]}
    assert verdicts["SLOW_STEPS"]["severity"] == "warning"
    assert verdicts["SLOW_STEPS"]["message"].endswith("nothing in the logs says why")
    assert abs(verdicts["SLOW_STEPS"]["lost_s"] - STALL_S) < 1
    assert verdicts["CHECKPOINT_SAVE_COST"]["severity"] == "info"
    assert verdicts["EVALUATION_COST"]["severity"] == "info"
    assert "STALLS" not in verdicts and "PERIODIC_SLOW_STEPS" not in verdicts
    timed = [v["lost_s"] for v in doc["verdicts"] if v["severity"] == "info" and v["lost_s"]]
    assert timed == sorted(timed, reverse=True)
    assert all(v["gpu_hours"] is None for v in doc["verdicts"])  # GPU count unknown
    doc = summary(tmp_path / "tb", "--num-gpus", "8")
    slow = next(v for v in doc["verdicts"] if v["code"] == "SLOW_STEPS")
    assert abs(slow["gpu_hours"] - slow["lost_s"] * 8 / 3600) < 1e-9


def test_a_save_and_an_evaluation_at_one_iteration_split_by_the_save_timer() -> None:
    """One stall after iteration 500 that a save line, its `save-checkpoint` timer and a
    validation line all explain (Megatron-LM prints, after the iteration's line,
    `saving checkpoint at iteration 500 ...`, the timer `save-checkpoint ....: (min, max)` in
    ms, and ` validation loss at iteration 500 | lm loss value: ...`): the timer's 12 s go
    to the save, the rest of the 30 s stall to the evaluation. Without the timer, both are
    named and their seconds are unknown."""
    from analysis_factories import cumulative_timestamps, make_metrics, make_table

    from loganalyzer.analysis import analyse
    from loganalyzer.analysis.causes import SaveAndEvaluation, attribute
    from loganalyzer.analysis.events import Schedule
    from loganalyzer.analysis.goodput import budget

    steps = [1.0] * 1000
    table = make_table(steps, timestamps=cumulative_timestamps(steps, 1, {500: 30.0}))
    rows: list[tuple[int, str, float, int | None]] = [
        (500, "event/checkpoint_save", 1.0, None),
        (500, "validation/lm loss", 2.5, None),
    ]
    for timed in (True, False):
        metrics = make_metrics(rows + ([(500, "timer/save-checkpoint", 12_000.0, None)] * timed))
        analysis = analyse(table, metrics)
        causes = attribute(analysis, table, Schedule())
        (stall,) = [e for e in causes.entries if e.entry == "stall"]
        shares = {s.kind: s.seconds for s in stall.cause.shares}
        lines = {line.name: line.seconds for line in budget(analysis, causes, table).lines}
        if timed:
            assert shares == {"checkpoint_save": 12.0, "evaluation": 18.0}
            assert (stall.cause.kind, lines["checkpoint saves"], lines["evaluation"]) == (
                "evaluation",
                12.0,
                18.0,
            )
        else:
            assert shares == {"checkpoint_save": None, "evaluation": None}
            both = stall.cause.evidence
            assert isinstance(both, SaveAndEvaluation) and both.timer is None
            assert (both.save_s, both.evaluation_s) == (None, None)
            assert (lines["checkpoint saves"], lines["evaluation"]) == (30.0, 0.0)
        assert causes.event_seconds("checkpoint_save").keys() == {500}
        assert causes.event_seconds("evaluation").keys() == {500}
