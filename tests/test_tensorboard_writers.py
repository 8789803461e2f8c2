"""Event files as a second real writer, tensorboardX, and tensorboard's own writer write
them, read end to end through `loganalyzer summary DIR --json`:

- TF1 merged summaries (one event, several values: `tf.summary.merge_all()`, a writer's
  `add_summary` of a Summary of several values) read as the same values one an event;
- tensorboardX's `add_hparams` (its timestamped sub-folder) as the run's config;
- `add_scalars(main_tag, {key: ...})`, each key in a sub-folder of its own whose events
  carry `main_tag`: the series is `main_tag/key` (the folder's name qualifies the tag), so
  `add_scalars("throughput", {"samples_per_s": ...})` is not Megatron's `throughput`
  (TFLOPS/GPU); and the same with torch's folder naming (`<main_tag>_<key>`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.parsers.tensorboard import TensorBoardParser
from loganalyzer.parsers.tensorboard.writer_folders import series_name

START = 1_795_000_000.0
STEPS = range(1, 41)
HPARAMS = {"num_layers": 24, "hidden_size": 1024, "num_attention_heads": 16, "lr": 3e-4}


def _summary(*args: str) -> tuple[int, Any, str]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", *args])
    document = json.loads(result.stdout) if result.exit_code == 0 else None
    return result.exit_code, document, result.stderr


def _tensorboardx_run(
    folder: Path, start: float = START, steps: range = STEPS, step_time: float = 0.5
) -> None:
    """A run as tensorboardX's SummaryWriter writes it: Megatron's scalar tags, two
    add_scalars series and add_hparams."""
    from tensorboardX import SummaryWriter

    writer = SummaryWriter(str(folder))
    for step in steps:
        wall = start + step
        writer.add_scalar("iteration-time", step_time, step, walltime=wall)
        writer.add_scalar("lm loss", 10 - step / 100, step, walltime=wall)
        series = {"tokens_per_s": 8192.0, "samples_per_s": 213.3}
        writer.add_scalars("throughput", series, step, walltime=wall)
    writer.add_hparams(HPARAMS, {"hparam/final_loss": 9.6})
    writer.close()


def test_tensorboardx_hparams_are_config_and_add_scalars_series_are_not_tflops(
    tmp_path: Path,
) -> None:
    _tensorboardx_run(tmp_path / "run")
    series = sorted(p.parent.relative_to(tmp_path / "run") for p in tmp_path.rglob("*tfevents*"))
    assert [str(p) for p in series][-2:] == ["throughput/samples_per_s", "throughput/tokens_per_s"]
    code, document, stderr = _summary(str(tmp_path / "run"))
    assert code == 0, stderr
    model = document["run"]["model"]
    assert (model["num_layers"], model["hidden_size"], model["num_attention_heads"]) == (
        24,
        1024,
        16,
    )
    hparams_file = next(p for p in tmp_path.rglob("*tfevents*") if p.parent.name[0].isdigit())
    assert document["run"]["provenance"]["num_layers"].startswith(f"tensorboard {hparams_file}")
    assert document["reported"]["tflops_per_gpu"] is None
    assert document["iterations"] == {
        "logged": 40,
        "covered": 40,
        "first": 1,
        "last": 40,
        "segments": 1,
    }
    assert sorted(Path(item["path"]).parent.name for item in document["read_along"]) == [
        hparams_file.parent.name,
        "samples_per_s",
        "tokens_per_s",
    ]
    main_file = Path(document["sources"][0]["path"])
    names = TensorBoardParser().parse(main_file).metrics["name"].unique().sort().to_list()
    # tensorboardX writes `lm loss` as `lm_loss` (its tags are cleaned of spaces)
    assert names == [
        "hparam/final_loss",
        "lm_loss",
        "throughput/samples_per_s",
        "throughput/tokens_per_s",
    ]


def test_torch_add_scalars_folders_qualify_the_tag_too(tmp_path: Path) -> None:
    """torch.utils.tensorboard's add_scalars writes `<main_tag with / as _>_<key>/`:
    `fw_tag = fw_logdir + "/" + main_tag.replace("/", "_") + "_" + tag` (pytorch
    torch/utils/tensorboard/writer.py), each event `scalar(main_tag, value)`; written here
    with tensorboard's own EventFileWriter the same way."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    def write(folder: Path, tags: dict[str, float]) -> None:
        writer = EventFileWriter(str(folder))
        for step in STEPS:
            values = [Summary.Value(tag=tag, simple_value=value) for tag, value in tags.items()]
            writer.add_event(
                Event(wall_time=START + step, step=step, summary=Summary(value=values))
            )
        writer.close()

    write(tmp_path / "run", {"iteration-time": 0.5, "lm loss": 9.0})
    write(tmp_path / "run" / "iteration-time_samples_per_s", {"iteration-time": 213.3})
    code, document, stderr = _summary(str(tmp_path / "run"))
    assert code == 0, stderr
    assert document["iterations"]["logged"] == 40
    assert document["step_time_s"]["median"] == 0.5  # not 213.3 taken for a step time
    (along,) = document["read_along"]
    assert "add_scalars series 'iteration-time/samples_per_s'" in along["how"]


def test_a_writer_sub_folder_named_alone_says_where_its_run_is(tmp_path: Path) -> None:
    _tensorboardx_run(tmp_path / "run")
    (series,) = (tmp_path / "run" / "throughput" / "samples_per_s").glob("*tfevents*")
    result = CliRunner().invoke(main, ["summary", "-q", str(series)])
    assert result.exit_code == 1
    assert "add_scalars series 'throughput/samples_per_s'" in result.stderr
    assert f"name {tmp_path / 'run'} to read them together" in result.stderr


def test_folders_of_runs_each_read_their_own_sub_folders(tmp_path: Path) -> None:
    """Two runs side by side (folders as runs), each with its series and hparams: still two
    runs, each reading its own sub-folders; a relaunch into the same folder (a second
    event file, created later, with series files of its own) is a segment of its run."""
    _tensorboardx_run(tmp_path / "runs" / "a")
    _tensorboardx_run(tmp_path / "runs" / "b", START + 10_000, step_time=0.75)
    code, _, stderr = _summary(str(tmp_path / "runs"))
    assert code == 1 and "holds 2 different runs" in stderr
    code, documents, _ = _summary("--split-runs", str(tmp_path / "runs"))
    assert code == 0
    assert [document["run"]["model"]["num_layers"] for document in documents] == [24, 24]
    assert len(documents[0]["read_along"]) == 6  # the load's list: both runs' sub-folders
    for name in ("a", "b"):
        (own,) = (tmp_path / "runs" / name).glob("*tfevents*")
        sources = TensorBoardParser().parse(own).metrics["source"].unique().to_list()
        assert len(sources) == 4  # its own file (lm_loss), two series, the hparams metric
        assert all(Path(source).is_relative_to(own.parent) for source in sources)
    relaunch = tmp_path / "relaunch"
    _tensorboardx_run(relaunch, steps=range(1, 31))
    _created_earlier(relaunch, 100)
    _tensorboardx_run(relaunch, START + 1000, steps=range(21, 41))
    code, document, stderr = _summary(str(relaunch))
    assert code == 0, stderr
    assert document["iterations"]["segments"] == 2
    assert len(document["read_along"]) == 6


def _created_earlier(folder: Path, seconds: int) -> None:
    """Renames every event file below `folder` as if created `seconds` earlier (the writer
    names a file by the second it was created: a relaunch within the same second would
    otherwise look simultaneous)."""
    for path in folder.rglob("*tfevents*"):
        stamp = path.name.split(".")[3]
        earlier = path.name.replace(f".{stamp}.", f".{int(stamp) - seconds:010d}.", 1)
        os.rename(path, path.with_name(earlier))


def test_merged_summaries_read_as_one_value_an_event(tmp_path: Path) -> None:
    """The same scalars written one an event and as one Summary of several values an event,
    by tensorboard's EventFileWriter and by tensorboardX's file writer (`add_summary`, what
    `tf.summary.merge_all()` output is given to), give the same summary."""
    from tensorboard.compat.proto.event_pb2 import Event
    from tensorboard.compat.proto.summary_pb2 import Summary
    from tensorboard.summary.writer.event_file_writer import EventFileWriter
    from tensorboardX import FileWriter
    from tensorboardX.proto.summary_pb2 import Summary as XSummary

    steps = range(1, 301)

    def values(step: int) -> dict[str, float]:
        return {"iteration-time": 0.5 + (step % 7) / 100, "lm loss": 10 - step / 100}

    single = EventFileWriter(str(tmp_path / "single"))
    merged = EventFileWriter(str(tmp_path / "merged"))
    with_x = FileWriter(str(tmp_path / "tensorboardx"))
    for step in steps:
        scalars = values(step)
        for tag, value in scalars.items():
            one = Summary(value=[Summary.Value(tag=tag, simple_value=value)])
            single.add_event(Event(wall_time=START + step, step=step, summary=one))
        several = Summary(value=[Summary.Value(tag=t, simple_value=v) for t, v in scalars.items()])
        merged.add_event(Event(wall_time=START + step, step=step, summary=several))
        x_values = [XSummary.Value(tag=t, simple_value=v) for t, v in scalars.items()]
        with_x.add_summary(XSummary(value=x_values), step, START + step)
    for writer in (single, merged, with_x):
        writer.close()
    documents = []
    for name in ("single", "merged", "tensorboardx"):
        code, document, stderr = _summary(str(tmp_path / name))
        assert code == 0, stderr
        documents.append(document)
    one, *others = documents
    assert one["iterations"]["logged"] == 300
    for other in others:
        assert other["iterations"] == one["iterations"]
        assert other["step_time_s"] == one["step_time_s"]


@pytest.mark.parametrize(
    ("relative", "tag", "series"),
    [
        ("throughput/samples_per_s", "throughput", "throughput/samples_per_s"),  # tensorboardX
        ("throughput_samples_per_s", "throughput", "throughput/samples_per_s"),  # torch
        ("train/speed/tokens", "train/speed", "train/speed/tokens"),
        ("train_speed_tokens", "train/speed", "train/speed/tokens"),
        ("throughput", "throughput", None),  # no key: a run of its own
        ("throughput/a/b", "throughput", None),
        ("B", "lm loss", None),  # another run's folder
        ("throughputs_x", "throughput", None),
    ],
)
def test_an_add_scalars_folder_names_its_series(
    relative: str, tag: str, series: str | None
) -> None:
    assert series_name(relative, tag) == series
