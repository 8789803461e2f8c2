"""Evidence from binary sources (TensorBoard event files, W&B transaction logs) reads as
`source: record N, tag T, step S`, never as a line of bytes: those files have records, not
lines, and the `line` of their records is an index into them.

The runs are written by the frameworks' own writers: tensorboard's `EventFileWriter` with
Megatron-LM's tags (`iteration-time`, `lm loss`, `grad-norm`, as its `training_log` writes
them), and `wandb` itself in offline mode with the keys Megatron-LM's `wandb.log` call uses.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.test_consistency import _visible, unprintable
from tests.wandb_offline import write_offline_run

START = 1_795_000_000.0
STALL, SPIKE = 40, 30  # the iteration that took 20 s, the one whose loss and grad norm spike


def _pace(step: int) -> float:
    return 20.0 if step == STALL else 1.0


def _tensorboard(folder: Path) -> Path:
    """60 iterations of Megatron-LM's scalars, one second apart but the stall."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    folder.mkdir(parents=True)
    writer = EventFileWriter(str(folder))
    wall = START
    for step in range(1, 61):
        wall += _pace(step)
        spike = 5.0 if step == SPIKE else 0.0
        for tag, value in (
            ("iteration-time", _pace(step)),
            ("lm loss", 10 - step / 100 + spike),
            ("grad-norm", 1.0 + 10 * spike),
        ):
            summary = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            writer.add_event(Event(wall_time=wall, step=step, summary=summary))
    writer.close()
    return folder


WANDB = f"""
import wandb
run = wandb.init(project="p", config={{"num_layers": 2, "hidden_size": 64}})
for step in range(1, 61):
    spike = 5.0 if step == {SPIKE} else 0.0
    wandb.log({{"iteration-time": 20.0 if step == {STALL} else 1.0,
               "lm loss": 10 - step / 100 + spike, "grad-norm": 1.0 + 10 * spike}}, step=step)
run.finish()
"""


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return {
        "tensorboard": _tensorboard(tmp_path_factory.mktemp("tb") / "run"),
        "wandb": write_offline_run(WANDB, tmp_path_factory.mktemp("wandb")).parent,
    }


def _report(source: Path, tmp_path: Path) -> str:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", "-q", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return _visible(out.read_text(encoding="utf-8"))


# `events.out.tfevents.…: record 118, tag iteration-time, step 40`
RECORD = r"(?:events\.out\.tfevents\.\S+|run-\w+\.wandb): record \d+, tag {tag}, step {step}"


@pytest.mark.parametrize("kind", ["tensorboard", "wandb"])
def test_the_report_locates_records_by_index_tag_and_step(
    kind: str, sources: dict[str, Path], tmp_path: Path
) -> None:
    page = _report(sources[kind], tmp_path)
    assert not unprintable(page), unprintable(page)[:3]
    assert re.search(RECORD.format(tag="iteration-time", step=STALL), page)
    assert re.search(RECORD.format(tag="lm loss", step=SPIKE), page)
    assert re.search(RECORD.format(tag="grad-norm", step=SPIKE), page)


@pytest.mark.xfail(
    strict=True,
    reason="issue 30 why: the incident verdicts (render/wording.py, incident_message) quote their "
    "evidence as file:line, a record index read as a line; they should locate it as the "
    "incidents table does (render.loglines.location: source: record N, tag T, step S)",
)
@pytest.mark.parametrize("kind", ["tensorboard", "wandb"])
def test_no_record_index_is_passed_off_as_a_line(
    kind: str, sources: dict[str, Path], tmp_path: Path
) -> None:
    page = _report(sources[kind], tmp_path)
    assert not re.search(r"(?:tfevents\.[\w.]+|\.wandb):\d", page)


@pytest.mark.parametrize("kind", ["tensorboard", "wandb"])
def test_the_terminal_locates_records_by_index_tag_and_step(
    kind: str, sources: dict[str, Path]
) -> None:
    result = CliRunner().invoke(main, ["summary", "-q", str(sources[kind])])
    assert result.exit_code == 0, result.output
    incidents = result.stdout.split("Incidents", 1)[1].split("\n\n", 1)[0]
    assert re.search(RECORD.format(tag="lm loss", step=SPIKE), incidents), incidents
    assert re.search(RECORD.format(tag="grad-norm", step=SPIKE), incidents), incidents
    assert not unprintable(result.stdout)


def test_the_json_says_what_a_sources_line_counts(sources: dict[str, Path]) -> None:
    import json

    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(sources["tensorboard"])])
    (source,) = json.loads(result.stdout)["sources"]
    assert source["unit"] == "record"
    assert source["tags"] == {
        "step_time_s": "iteration-time",
        "loss": "lm loss",
        "grad_norm": "grad-norm",
    }
    text = CliRunner().invoke(main, ["summary", "-q", "--json", _text_log()])
    assert json.loads(text.stdout)["sources"][0] | {"path": ""} == {
        "path": "",
        "format": "megatron",
        "records": 20,
        "unit": "line",
        "tags": {},
    }


def _text_log() -> str:
    from tests.conftest import FIXTURES

    return str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out")
