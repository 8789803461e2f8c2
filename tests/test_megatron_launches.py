"""Runs in one Megatron log: launches told apart by their iteration total and parallelism.

The logs are written from Megatron-LM's own format strings (megatron/training.py,
`training_log`): `' iteration {:8d}/{:8d} |'`, `' consumed samples: {:12d} |'`,
`' elapsed time per iteration (ms): {:.1f} |'`, `' learning rate: {:.6E} |'`,
`' global batch size: {:5d} |'`, `' {}: {:.6E} |'` (lm loss), `' loss scale: {:.1f} |'`,
`' grad norm: {:.3f} |'`, `' number of skipped iterations: {:3d} |'`,
`' number of nan iterations: {:3d} |'`; megatron/arguments.py `_print_args`:
`'------------------------ arguments ------------------------'`, `'  {} {} {}'` with dots,
`'-------------------- end of arguments ---------------------'`; megatron/initialize.py
`'using world size: {}, data-parallel size: {}, context-parallel size: {}, hierarchical
context-parallel sizes: {}, tensor-model-parallel size: {}, pipeline-model-parallel size: {}'`.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.load import load_runs
from loganalyzer.registry import load_registry

START = datetime(2025, 1, 1)


def iteration_line(k: int, total: int, ms: float, stamp: datetime | None) -> str:
    head = f" [{stamp:%Y-%m-%d %H:%M:%S}]" if stamp else ""
    return (
        f"{head} iteration {k:8d}/{total:8d} | consumed samples: {k * 8:12d} |"
        f" elapsed time per iteration (ms): {ms:.1f} | learning rate: {1e-4:.6E} |"
        f" global batch size: {8:5d} | lm loss: {6.0:.6E} | loss scale: 1.0 |"
        f" grad norm: 1.234 | number of skipped iterations: {0:3d} |"
        f" number of nan iterations: {0:3d} |"
    )


def arguments(values: dict[str, object]) -> list[str]:
    return [
        "------------------------ arguments ------------------------",
        *(f"  {key} {'.' * (48 - len(key))} {value}" for key, value in values.items()),
        "-------------------- end of arguments ---------------------",
    ]


def world(tp: int, pp: int, gpus: int = 8) -> str:
    return (
        f"using world size: {gpus}, data-parallel size: {gpus // (tp * pp)}, context-parallel "
        "size: 1, hierarchical context-parallel sizes: None, tensor-model-parallel size: "
        f"{tp}, pipeline-model-parallel size: {pp}"
    )


def summaries(path: Path) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", "--split-runs", str(path)])
    assert result.exit_code == 0, result.output
    docs = json.loads(result.stdout)
    return docs if isinstance(docs, list) else [docs]


def test_a_benchmark_then_the_full_run_are_two_runs(tmp_path: Path) -> None:
    """`iteration 5/ 10` then `iteration 2400/ 8247`: the counter goes on, but to another
    total: a 10-iteration benchmark and the run after it, not one run without restarts."""
    stamp = START
    lines = []
    for k in range(1, 11):
        stamp += timedelta(seconds=0.5)
        lines.append(iteration_line(k, 10, 500.0, stamp))
    stamp += timedelta(minutes=5)
    for k in range(2400, 2500, 10):
        stamp += timedelta(seconds=10)
        lines.append(iteration_line(k, 8247, 1000.0, stamp))
    path = tmp_path / "bench_then_run.log"
    path.write_text("\n".join(lines) + "\n")
    bench, run = summaries(path)
    assert bench["iterations"] == {
        "logged": 10,
        "covered": 10,
        "first": 1,
        "last": 10,
        "segments": 1,
    }
    assert run["iterations"] == {
        "logged": 10,
        "covered": 100,
        "first": 2400,
        "last": 2490,
        "segments": 1,
    }
    totals = [
        loaded.run.config["train_iters"] for loaded in load_runs([str(path)], load_registry())
    ]
    assert [(t.value, t.provenance.line) for t in totals] == [(10, 1), (8247, 11)]
    # each run's clock is its own: the five minutes between them belong to neither
    assert bench["time"]["logged_s"] == 5.0 and run["time"]["logged_s"] == 100.0
    for doc in (bench, run):
        assert doc["restarts"] == []
        assert 0 < doc["goodput"]["wall_s"] <= 101


def test_relaunches_of_one_checkpoint_with_other_tp_pp_are_one_run_each(tmp_path: Path) -> None:
    """A reshaping experiment: seven launches resume one checkpoint, each with another TP/PP.
    A launch's statement that repeats the one before (TP=1 after TP=1) is a copy, yet TP=1
    again after TP=2 is a change."""
    shapes = [(1, 1), (2, 1), (1, 2), (2, 2), (4, 1), (1, 4), (4, 2)]
    for dumped in (True, False):
        stamp = START
        lines = []
        for tp, pp in shapes:
            lines.append(world(tp, pp))
            if dumped:
                lines += arguments(
                    {
                        "hidden_size": 256,
                        "log_interval": 10,
                        "num_layers": 2,
                        "pipeline_model_parallel_size": pp,
                        "tensor_model_parallel_size": tp,
                        "train_iters": 1100,
                    }
                )
            lines.append(" loading checkpoint from /ckpt at iteration 1000")
            for k in (1010, 1020, 1030):
                stamp += timedelta(seconds=5)
                lines.append(iteration_line(k, 1100, 500.0 * tp, stamp))
            stamp += timedelta(minutes=5)
        path = tmp_path / f"reshape_{dumped}.log"
        path.write_text("\n".join(lines) + "\n")
        docs = summaries(path)
        found = [
            (d["run"]["parallelism"]["tensor"], d["run"]["parallelism"]["pipeline"]) for d in docs
        ]
        assert found == shapes
        assert [d["run"]["parallelism"]["data"] for d in docs] == [8 // (t * p) for t, p in shapes]
        for doc, (tp, _) in zip(docs, shapes, strict=True):
            assert doc["iterations"]["logged"] == 3
            assert doc["time"]["logged_s"] == 15.0 * tp  # 3 records of 10 iterations


def test_a_relaunch_that_logged_one_record_covers_one_log_interval(tmp_path: Path) -> None:
    """A relaunch from the checkpoint at 95000 that printed one line before it was stopped:
    without a `log_interval` argument its record covers the file's usual step (10), not the
    95010 iterations since 0 (that read 7.5 s of step as 197.9 h logged)."""
    stamp = START
    lines = []
    for launch, (tp, pp) in enumerate([(1, 1), (2, 1), (1, 2)]):
        lines.append(world(tp, pp))
        for k in (95010, 95020, 95030) if launch == 0 else (95010,):
            stamp += timedelta(seconds=75)
            lines.append(iteration_line(k, 100000, 7500.0, stamp))
        stamp += timedelta(minutes=5)
    path = tmp_path / "relaunches.log"
    path.write_text("\n".join(lines) + "\n")
    docs = summaries(path)
    assert [d["time"]["logged_s"] for d in docs] == [225.0, 75.0, 75.0]
    assert [d["iterations"]["logged"] for d in docs] == [3, 1, 1]


def test_a_finished_run_extended_with_a_larger_total_is_one_run(tmp_path: Path) -> None:
    """A run that reached `400/ 400`, relaunched from its last checkpoint with
    `--train-iters 800` (`410/ 800` next), is the same run extended: the counter goes on
    without a gap. A relaunch that leaves iterations out under another total stays apart."""
    stamp, lines = START, []
    for k in range(10, 410, 10):
        stamp += timedelta(seconds=10)
        lines.append(iteration_line(k, 400, 1000.0, stamp))
    extended, apart = list(lines), list(lines)
    stamp += timedelta(minutes=5)
    for k in range(410, 510, 10):
        stamp += timedelta(seconds=10)
        extended.append(iteration_line(k, 800, 1000.0, stamp))
        apart.append(iteration_line(k + 1000, 800, 1000.0, stamp))
    (tmp_path / "extended.log").write_text("\n".join(extended) + "\n")
    (tmp_path / "apart.log").write_text("\n".join(apart) + "\n")
    (run,) = summaries(tmp_path / "extended.log")
    assert run["iterations"] == {
        "logged": 50,
        "covered": 500,
        "first": 10,
        "last": 500,
        "segments": 2,
    }
    assert [len(summaries(tmp_path / "apart.log"))] == [2]
