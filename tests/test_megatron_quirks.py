"""One test per quirk of real Megatron-family logs (fixtures/megatron/quirks, restart_dir)."""

from __future__ import annotations

import functools
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from loganalyzer import sources, textlog
from loganalyzer.load import load_run
from loganalyzer.parsers.megatron import MegatronParser
from loganalyzer.registry import load_registry
from loganalyzer.summary import build_summary
from tests.conftest import FIXTURES

QUIRKS = FIXTURES / "megatron" / "quirks"


def parse(name: str) -> pl.DataFrame:
    return MegatronParser().parse(QUIRKS / name).table


def test_srun_labels_and_copies_from_several_tasks_are_kept_once() -> None:
    run = MegatronParser().parse(QUIRKS / "srun_label_duplicates.log")
    table = run.table
    assert table["iteration"].to_list() == [10, 20, 30, 40, 50]
    assert table["rank"].to_list() == [7] * 5  # the first copy's srun label
    assert table["step_time_s"].to_list() == pytest.approx([0.8123, 0.8133, 0.8143, 0.8153, 0.8163])
    assert table["reported_tflops_per_gpu"].to_list() == pytest.approx(
        [123.4, 124.4, 125.4, 126.4, 127.4]
    )
    assert table["timestamp"][0] == datetime(2025, 11, 3, 10, 0, 10, 123456, tzinfo=timezone.utc)
    # arguments dump printed with a "0: " label is still read
    assert run.get("world_size") == 8
    assert run.get("log_interval") == 10
    assert run.config["num_layers"].provenance.line is not None
    assert table["interval"].to_list() == [10] * 5


def test_torchrun_prefixes() -> None:
    table = parse("torchrun_prefixes.log")
    assert table["iteration"].to_list() == [10, 20, 30, 40, 50]
    # [rankN]: names a global rank; [defaultN]: only a local one, so it is not recorded
    assert table["rank"].to_list() == [7, 7, 7, None, None]


def test_glued_records_carriage_returns_and_ansi_codes() -> None:
    run = MegatronParser().parse(QUIRKS / "glued_cr_ansi.log")
    table = run.table
    assert table["iteration"].to_list() == [10, 20, 30, 40, 50]
    assert table["line"].to_list() == [1, 3, 3, 4, 5]
    assert table["step_time_s"].to_list() == pytest.approx([0.70, 0.71, 0.72, 0.73, 0.74])
    memory = run.metrics.filter(pl.col("name") == "memory/max_allocated_mb").sort("rank")
    assert memory["rank"].to_list() == [0, 1]
    assert memory["value"].to_list() == [2100.25, 2000.25]
    assert memory["iteration"].to_list() == [10, 10]


def test_restart_inside_one_file_starts_a_segment() -> None:
    run = MegatronParser().parse(QUIRKS / "restart_in_file.log")
    table = run.table
    assert table["iteration"].to_list() == [10, 20, 30, 40, 50, 60, 50, 60, 70, 80]
    assert table["segment"].to_list() == [0] * 6 + [1] * 4
    assert table["interval"].to_list() == [10] * 10
    saves = run.metrics.filter(pl.col("name") == "event/checkpoint_save")
    assert saves["iteration"].to_list() == [40]


def test_kubernetes_timestamps_primus_pairs_and_thousands_separators() -> None:
    run = MegatronParser().parse(QUIRKS / "kubelet_primus.log")
    table = run.table
    assert table["step_time_s"].to_list() == pytest.approx([13.10, 13.11, 13.12, 13.13, 13.14])
    assert table["reported_tflops_per_gpu"][0] == pytest.approx(579.4)
    assert table["timestamp"][0] == datetime(2026, 2, 5, 16, 3, 50, 889599, tzinfo=timezone.utc)
    energy = run.metrics.filter(pl.col("name") == "energy per GPU (J/iter/GPU)")
    assert energy["value"].to_list() == [1234.5] * 5
    tokens = run.metrics.filter(pl.col("name") == "tokens per GPU (tokens/s/GPU)")
    assert tokens["value"][0] == pytest.approx(10005.5)
    assert not any("time zone" in w for w in run.warnings)  # Z: the zone is known


def test_minmax_timer_blocks_extra_losses_and_validation() -> None:
    run = MegatronParser().parse(QUIRKS / "timers_minmax.log")
    metrics = run.metrics
    fwd = metrics.filter(pl.col("name") == "timer/forward-backward/max")
    assert fwd["iteration"].to_list() == [100, 110, 120]
    assert fwd["value"].to_list() == [1950.5, 1951.5, 1952.5]
    assert metrics.filter(pl.col("name") == "mtp_1 loss")["value"].to_list() == [2.6] * 3
    val = metrics.filter(pl.col("name") == "validation/lm loss value")
    assert val["iteration"].to_list() == [120]
    assert val["value"].to_list() == [2.45]
    assert run.table["loss"].to_list() == [2.5] * 3


def test_run_directory_with_a_restart_is_read_in_order() -> None:
    loaded = load_run([str(FIXTURES / "megatron" / "restart_dir")], load_registry())
    table = loaded.run.table
    assert table["iteration"].to_list() == [10, 20, 30, 40, 50, 40, 50, 60, 70, 80, 90, 100]
    assert table["segment"].to_list() == [0] * 5 + [1] * 7
    assert [Path(s.path).name for s in loaded.run.sources] == ["slurm-1001.out", "slurm-1002.out"]


def test_seconds_variant_and_default_prefix_of_bigscience_megatron_deepspeed() -> None:
    run = MegatronParser().parse(FIXTURES / "megatron_deepspeed" / "bloom_176b_chronicles.txt")
    assert run.framework == "megatron-deepspeed"
    first = run.table.row(0, named=True)
    assert first["iteration"] == 31214
    assert first["step_time_s"] == pytest.approx(106.46)
    assert first["samples_per_s"] == pytest.approx(19.238)
    assert first["reported_tflops_per_gpu"] == pytest.approx(147.29)
    assert first["loss_scale"] is None  # bf16: no loss scale printed


def test_microsoft_megatron_deepspeed_fields() -> None:
    run = MegatronParser().parse(FIXTURES / "megatron_deepspeed" / "alcf_tgs.txt")
    tgs = run.metrics.filter(pl.col("name") == "tokens per gpu per second (tgs)")
    assert tgs["value"].to_list() == pytest.approx([1146.733, 1126.713])
    assert run.table["reported_tflops_per_gpu"].to_list() == pytest.approx([69.85, 68.63])


def test_a_file_with_neither_iterations_nor_arguments_is_an_input_error(tmp_path: Path) -> None:
    from loganalyzer.errors import InputError

    path = tmp_path / "x.log"
    path.write_text("using nothing\n")
    with pytest.raises(InputError, match=r"x\.log: no Megatron iteration lines"):
        MegatronParser().parse(path)


def test_fields_and_labels_only_some_chunks_print_keep_their_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Read a line or two at a time, each chunk's records held without the columns of one
    value or none: a field, a label and a time stamp that only some chunks print keep their
    values beside nulls, a batch size that ramps up between chunks each chunk's value; the
    table's other columns stay in the chunks' pieces (not copied into one)."""
    plain = (
        " iteration {i:8d}/     100 | consumed samples: {s:12d} | elapsed time per iteration"
        " (ms): 1000.{i} | global batch size: {b:5d} | lm loss: 2.0 |\n"
    )
    rich = (
        "3: [2025-01-02 03:00:{i:02d}] iteration {i:8d}/     100 | consumed samples: {s:12d} |"
        " elapsed time per iteration (ms): 1000.{i} | throughput per GPU (TFLOP/s/GPU): 1{i}.5 |"
        " global batch size: {b:5d} | lm loss: 2.0 |\n"
    )
    log = tmp_path / "mixed.log"
    between = "a line of something else, long enough to fill a chunk of its own" * 8 + "\n"
    log.write_text(
        "".join(
            (plain if i <= 3 or i > 6 else rich).format(i=i, s=8 * i, b=8 if i < 8 else 16)
            + between * (i == 5)
            for i in range(1, 10)
        )
    )
    small = functools.partial(sources.iter_line_blocks, chunk_bytes=400)
    monkeypatch.setattr(textlog, "iter_line_blocks", small)
    assert len(list(textlog.line_frames(log))) > 3  # each chunk a line or two
    table = MegatronParser().parse(log).table
    assert table["iteration"].to_list() == list(range(1, 10))
    before, after = [None] * 3, [None] * 3  # the chunks that do not print them
    assert table["reported_tflops_per_gpu"].to_list() == [*before, 14.5, 15.5, 16.5, *after]
    assert table["rank"].to_list() == [*before, 3, 3, 3, *after]
    assert table["timestamp"].dt.second().to_list() == [*before, 4, 5, 6, *after]
    assert table["samples_per_s"].null_count() == table.height  # no line prints it
    assert table["global_batch_size"].to_list() == [8] * 7 + [16] * 2  # ramped up
    assert table["skipped_iterations"].to_list() == [None] * 9
    assert table["interval"].to_list() == [1] * 9
    assert table["step_time_s"].n_chunks() > 3
    assert table["step_time_s"].to_list() == pytest.approx([1.0001 + i / 10000 for i in range(9)])


@pytest.mark.parametrize(
    "name", ["core_0_12_llama3_8b_throughput.log", "bigscience_gpt2_tp4_pp8.out"]
)
def test_summarising_a_run_leaves_its_one_value_columns_as_one_value(name: str) -> None:
    """The columns the table holds as one value (nulls, a constant batch size, the source)
    stay so through loading and the whole summary: read as a `Series`, polars would write
    each out in full and keep it in the table (8 bytes a record or more)."""
    loaded = load_run([str(FIXTURES / "megatron" / name)], load_registry())
    size = loaded.run.table.estimated_size()
    build_summary(loaded, {"shape": {}, "run": {"gpu": "h100-sxm"}})
    assert loaded.run.table.estimated_size() == size


# A Megatron-LM 2021 iteration line (shape of fixtures/megatron/bigscience_gpt2_tp4_pp8.out).
_RECORD = (
    " iteration {it:>8}/  100000 | consumed samples:       {samples} | elapsed time per iteration"
    " (ms): 1572.7 | learning rate: 3.750E-05 | global batch size:     4 | lm loss: 2.1E+00 |"
    " loss scale: 32768.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
)


@pytest.mark.parametrize(
    ("iterations", "said"),
    [([45000], True), ([10], False), ([45000, 45010], False), ([100], False), ([101], True)],
)
def test_a_lone_record_far_in_is_said_to_cover_every_iteration_up_to_it(
    tmp_path: Path, iterations: list[int], said: bool
) -> None:
    """A resumed run whose log holds one record (iteration 45,000) and no log_interval: the
    record is taken to cover 45,000 iterations (19.7 h at 1.57 s), which a warning says; a
    fresh run's first record (at most Megatron's default log interval, 100) or a second
    record (which gives the interval) needs none."""
    log = tmp_path / "resumed.out"
    log.write_text("".join(_RECORD.format(it=i, samples=4 * i) for i in iterations))
    run = MegatronParser().parse(log)
    notes = [w for w in run.warnings if "lone record" in w]
    assert bool(notes) is said
    if said:
        widest = max(iterations)
        assert f"(iteration {widest:,}: {widest:,} iterations)" in notes[0]
        assert run.table["interval"].to_list() == [widest]
