"""Placeholders a framework prints where it has no value are left out of the charts and the
analyses, with a warning that says what and why; and the terminal says of how many slow
steps it lists the worst."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.model import Run, conform_table
from loganalyzer.placeholders import without_placeholders
from tests.conftest import FIXTURES

# Real Megatron-DeepSpeed lines under DeepSpeed's pipeline engine (bigscience-workshop/
# bigscience experiments/gpt2-meg-ds-3d/meg_ds_3d_gpt2_perf_n16-ds-on.out, cut in
# fixtures/megatron_deepspeed): every iteration prints the engine's placeholders
#   ... | lm-loss: 1.244238E+01 | loss scale: -1.0 | grad norm: 0.000 | num zeros: 0.0 | ...
DS_ON = FIXTURES / "megatron_deepspeed" / "bigscience_gpt2_3d_ds_on.out"


def _summary(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", *args])
    assert result.exit_code == 0, result.output
    document: dict[str, object] = json.loads(result.stdout)
    return document


def test_deepspeed_placeholders_are_left_out_with_a_note(tmp_path: Path) -> None:
    document = _summary(str(DS_ON), "--gpu", "v100-sxm2")
    warnings = document["warnings"]
    assert isinstance(warnings, list)
    assert any(
        w.startswith("loss scale -1 on 13 records is a placeholder") and "left out" in w
        for w in warnings
    ), warnings
    assert any(w.startswith("grad norm 0 on all 13 records is a placeholder") for w in warnings)
    out = tmp_path / "run.csv"
    exported = CliRunner().invoke(main, ["export", "-q", str(DS_ON), "-o", str(out)])
    assert exported.exit_code == 0, exported.output
    table = pl.read_csv(out)
    assert table["loss_scale"].null_count() == table["grad_norm"].null_count() == table.height
    assert table["loss"].null_count() == 0


def test_the_report_draws_no_placeholder(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", "-q", str(DS_ON), "-o", str(out)])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf-8")
    assert "grad norm 0 on all 13 records is a placeholder" in page
    charts = json.loads(
        page.split('<script type="application/json" id="chart-data">', 1)[1].split("</script>", 1)[
            0
        ]
    )
    drawn = {trace.get("name") for chart in charts.values() for trace in chart["data"]}
    assert "grad norm" not in drawn and "loss scale" not in drawn


def _run(**columns: list[float | None]) -> Run:
    iterations = list(range(1, len(next(iter(columns.values()))) + 1))
    table = conform_table(
        pl.DataFrame({"iteration": iterations, "interval": 1, "segment": 0, **columns})
    )
    return Run("megatron", {}, table, pl.DataFrame())


def test_measured_values_are_kept() -> None:
    """A real scale and a grad norm that is zero once (among others) are measurements."""
    run = without_placeholders(
        _run(loss_scale=[65536.0, 32768.0, 32768.0], grad_norm=[0.0, 1.5, 1.2])
    )
    assert run.table["loss_scale"].to_list() == [65536.0, 32768.0, 32768.0]
    assert run.table["grad_norm"].to_list() == [0.0, 1.5, 1.2]
    assert not run.warnings


def test_only_the_placeholder_scales_are_left_out() -> None:
    run = without_placeholders(_run(loss_scale=[-1.0, 4096.0, None], grad_norm=[None] * 3))
    assert run.table["loss_scale"].to_list() == [None, 4096.0, None]
    assert run.warnings == [
        "loss scale -1 on 1 records is a placeholder (a loss scale is positive: the engine, "
        "not this log, keeps it): left out of the charts and the analyses"
    ]


def _spiky_tensorboard(folder: Path, spikes: list[int]) -> Path:
    """Megatron-LM's `iteration-time` tag at 60 iterations, 1 s each but at `spikes`, written
    by tensorboard's own writer."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True)
    writer = EventFileWriter(str(folder))
    wall = 1_795_000_000.0
    for step in range(1, 61):
        pace = 10.0 + step if step in spikes else 1.0
        wall += pace
        summary = Summary(value=[Summary.Value(tag="iteration-time", simple_value=pace)])
        writer.add_event(Event(wall_time=wall, step=step, summary=summary))
    writer.close()
    return folder


def test_the_terminal_says_of_how_many_slow_steps_it_lists_the_worst(tmp_path: Path) -> None:
    spikes = [7, 15, 22, 31, 37, 44, 50, 57]  # no period among them
    folder = _spiky_tensorboard(tmp_path / "tb", spikes)
    text = CliRunner().invoke(main, ["summary", "-q", str(folder)]).stdout
    assert "slow steps: 8 spike" in text
    listed = text.split("5 slowest of 8 (the JSON has them all):\n", 1)[1].splitlines()[:6]
    assert [line.split()[1] for line in listed[:5]] == ["57", "50", "44", "37", "31"]
    assert not listed[5].startswith("    iteration")


def test_the_causes_say_how_many_of_each_list_they_show(tmp_path: Path) -> None:
    spikes = [7, 15, 22, 31, 37, 44, 50, 57]
    folder = _spiky_tensorboard(tmp_path / "tb", spikes)
    text = CliRunner().invoke(main, ["summary", "-q", str(folder)]).stdout
    assert "\nCauses (5 of 8 slow steps listed; the JSON has them all)\n" in text
