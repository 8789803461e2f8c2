"""Detection weighs what each parser can read, and a parser that finds nothing hands the
file on to the next claimant (`readfiles._handed_on`); only --format forces one parser.

Log text below is quoted from real logs (source beside each) or written from DeepSpeed's own
format strings: deepspeed/utils/timer.py ThroughputTimer.stop (v0.3.0-v0.7.3: "{}/{},
SamplesPerSec={}" / "..., MemAllocated={}GB, MaxMemAllocated={}GB" / "{}/{},
RunningAvgSamplesPerSec={}, CurrSamplesPerSec={}, MemAllocated={}GB, MaxMemAllocated={}GB";
v0.8.0+: "epoch={}/micro_step={}/global_step={}, RunningAvgSamplesPerSec={}, ..."), and
runtime/config.py DeepSpeedConfig.print ("  {} {} {}".format(arg, "." * (29 - len(arg)), value)).
"""

# ruff: noqa: E501  (real log lines are quoted whole)
from __future__ import annotations

import json
from datetime import datetime, timedelta
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer import registry as registry_module
from loganalyzer.cli import main
from loganalyzer.errors import NothingReadError
from loganalyzer.fleet import discovery
from loganalyzer.model import ConfigValue, Provenance, Run, conform_metrics, conform_table
from loganalyzer.registry import ENTRY_POINT_GROUP, choose, load_registry
from tests.conftest import FIXTURES

MEGATRON_LOG = FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out"


def load_run(path: Path) -> Run:
    from loganalyzer.load import load_run as load

    return load([str(path)], load_registry()).run


def _summary(*args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(main, ["summary", "-q", "--json", *args])
    data = json.loads(result.stdout) if result.exit_code == 0 else {}
    return result.exit_code, data, result.output


def _printout(prefix: str, values: dict[str, object]) -> list[str]:
    """The engine's configuration printout, as DeepSpeedConfig.print writes it."""
    stamp = "[2022-11-02 10:00:00,101] [INFO] [config.py:1024:print]"
    head = f"{prefix}[2022-11-02 10:00:00,100] [INFO] [config.py:1020:print] DeepSpeedEngine configuration:"
    return [head] + [f"{prefix}{stamp}   {k} {'.' * (29 - len(k))} {v}" for k, v in values.items()]


def _stamp(when: datetime) -> str:
    return f"[{when:%Y-%m-%d %H:%M:%S},{when.microsecond // 1000:03d}] [INFO]"


# --- DeepSpeed-Chat with the Trainer's banner (pattern 3) --------------------------------


def _deepspeed_chat(path: Path, prefix: str = "stdout: ") -> Path:
    """A DeepSpeed-Chat step-1 log under DeepSpeed 0.7: its own `***** Running training *****`
    banner (print_rank_0 in DeepSpeed-Chat's main.py, the words HF's Trainer prints), the
    ThroughputTimer's `E/S, RunningAvgSamplesPerSec=...` every micro-step (steps_per_print
    1), no step= lines, every line behind the job runner's `stdout: ` label."""
    lines = _printout(
        prefix,
        {
            "bfloat16_enabled": False,
            "fp16_enabled": True,
            "gradient_accumulation_steps": 1,
            "steps_per_print": 1,
            "train_batch_size": 32,
            "train_micro_batch_size_per_gpu": 4,
            "world_size": 8,
        },
    )
    lines += [
        f"{prefix}***** Running training *****",
        f"{prefix}***** Evaluating perplexity, Epoch 0/1 *****",
        f"{prefix}ppl: 4390.5380859375",
        f"{prefix}Beginning of Epoch 1/1, Total Micro Batches 17",
    ]
    when = datetime(2022, 11, 2, 10, 0, 5)
    for micro in range(3, 18):  # the timer reports from its third step (start_step=2)
        when += timedelta(seconds=0.5)
        lines.append(
            f"{prefix}{_stamp(when)} [timer.py:198:stop] {0}/{micro},"
            f" RunningAvgSamplesPerSec=64.0, CurrSamplesPerSec=64.0,"
            f" MemAllocated=3.1GB, MaxMemAllocated=9.5GB"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("prefix", ["stdout: ", "worker-0: ", ""])
def test_deepspeed_chat_with_the_trainer_banner_is_read_by_deepspeed(
    tmp_path: Path, prefix: str
) -> None:
    path = _deepspeed_chat(tmp_path / "train.log", prefix)
    assert choose(load_registry(), path) == "deepspeed"
    code, data, output = _summary(str(path))
    assert code == 0, output
    run = data["run"]
    assert (run["framework"], run["num_gpus"], run["dtype"], run["dtype_assumed"]) == (
        "deepspeed",
        8,
        "fp16",
        False,
    )
    assert run["global_batch_size"] == 32
    assert data["iterations"]["logged"] == 15
    # train_batch_size / CurrSamplesPerSec = 32 / 64
    assert data["step_time_s"]["median"] == pytest.approx(0.5)


# --- the ThroughputTimer's wordings, with and without step= lines ------------------------

# stanford-crfm/mistral:docs/tutorials/deepspeed.rst@0d6882d8e919b3ade25b182a54a349230d039de9
# (DeepSpeed 0.4, HF Trainer + DeepSpeed on 2 nodes, pdsh `machine1: ` labels; GAS 8,
# micro batch 4, 16 GPUs: train batch 512; the timer counts micro-steps: 1200 = step 150 x 8).
MISTRAL = """    machine1: [2021-07-01 01:25:14,263] [INFO] [timer.py:154:stop] 0/1210, SamplesPerSec=464.0203879208643
    machine1: [2021-07-01 01:25:15,594] [INFO] [timer.py:154:stop] 0/1220, SamplesPerSec=464.1906754491529
    machine1: [2021-07-01 01:25:16,914] [INFO] [timer.py:154:stop] 0/1230, SamplesPerSec=464.3912136700007
    machine1: [2021-07-01 01:25:18,362] [INFO] [timer.py:154:stop] 0/1240, SamplesPerSec=464.24566491771554
    machine1: [2021-07-01 01:25:19,695] [INFO] [timer.py:154:stop] 0/1250, SamplesPerSec=464.42727423856235
    machine1: [2021-07-01 01:25:21,014] [INFO] [timer.py:154:stop] 0/1260, SamplesPerSec=464.6226536935847
"""
# https://github.com/deepspeedai/DeepSpeed/issues/1825 (DeepSpeed 0.6: with MemAllocated)
V06 = """[2022-03-11 02:06:58,985] [INFO] [logging.py:69:log_dist] [Rank 0] step=40, skipped=2, lr=[5e-05], mom=[[0.9, 0.999]]
[2022-03-11 02:06:58,985] [INFO] [timer.py:189:stop] 0/40, SamplesPerSec=83.48609168106144, MemAllocated=0.26GB, MaxMemAllocated=9.02GB
[2022-03-11 02:07:14,130] [INFO] [logging.py:69:log_dist] [Rank 0] step=50, skipped=2, lr=[5e-05], mom=[[0.9, 0.999]]
[2022-03-11 02:07:14,130] [INFO] [timer.py:189:stop] 0/50, SamplesPerSec=83.73838805358588, MemAllocated=0.26GB, MaxMemAllocated=9.02GB
"""


def _with_config(tmp_path: Path, text: str, config: dict[str, int]) -> Path:
    (tmp_path / "ds_config.json").write_text(json.dumps(config))
    path = tmp_path / "train.log"
    path.write_text(text)
    return path


def test_running_average_only_reports_give_step_times_from_the_timers_own_clock(
    tmp_path: Path,
) -> None:
    """Before 0.7 the timer prints only its running average R(n) over n - 2 micro-steps of
    b = 512 / 8 = 64 samples: a step of 8 micro-steps between reports m and n took
    512 ((n - 2) / R(n) - (m - 2) / R(m)) / (n - m)."""
    path = _with_config(
        tmp_path, MISTRAL, {"train_batch_size": 512, "gradient_accumulation_steps": 8}
    )
    code, _, output = _summary(str(path))
    assert code == 0, output
    table = pl.DataFrame(
        {
            "n": [1210, 1220, 1230, 1240, 1250, 1260],
            "r": [
                464.0203879208643,
                464.1906754491529,
                464.3912136700007,
                464.24566491771554,
                464.42727423856235,
                464.6226536935847,
            ],
        }
    )
    clock = (table["n"] - 2) / table["r"]
    expected = [512 * clock[0] / 1208] + [512 * (clock[i] - clock[i - 1]) / 10 for i in range(1, 6)]
    run = load_run(path)
    assert run.table["iteration"].to_list() == [152, 153, 154, 155, 157, 158]
    assert run.table["step_time_s"].to_list() == pytest.approx(expected, rel=1e-9)
    # the timestamps agree: 10 micro-steps (1.25 steps) every ~1.33 s
    assert sum(expected[1:]) / 5 == pytest.approx(1.33 / 1.25, rel=0.05)


def test_pre_0_8_reports_beside_step_lines_take_the_step_line_numbers(tmp_path: Path) -> None:
    path = _with_config(tmp_path, V06, {"train_batch_size": 16, "gradient_accumulation_steps": 1})
    run = load_run(path)
    assert run.table["iteration"].to_list() == [40, 50]
    assert run.table["mem_max_allocated_gb"].to_list() == [9.02, 9.02]
    n, r = [40, 50], [83.48609168106144, 83.73838805358588]
    first = 16 / r[0]
    second = 16 * ((n[1] - 2) / r[1] - (n[0] - 2) / r[0]) / 10
    assert run.table["step_time_s"].to_list() == pytest.approx([first, second])


def test_0_8_reports_without_step_lines_are_the_records(tmp_path: Path) -> None:
    # The wording as a real log prints it (SeekPoint/DeepSpeedExamples:
    # yknote-training-train_bert_ds.py@63ea1e40f614585edf973f6bfaf7e3ad4d70fd0a, DeepSpeed 0.10):
    # `[timer.py:215:stop] epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=
    # 220.69530887096045, CurrSamplesPerSec=222.88787331278564, MemAllocated=0.07GB, ...`
    lines = [
        f"[2023-08-02 00:41:{17 + i:02d},936] [INFO] [timer.py:215:stop] epoch=0/"
        f"micro_step={20 * (i + 1)}/global_step={10 * (i + 1)},"
        f" RunningAvgSamplesPerSec=220.69530887096045, CurrSamplesPerSec={200.0 + i},"
        f" MemAllocated=0.07GB, MaxMemAllocated=1.36GB"
        for i in range(3)
    ]
    path = _with_config(tmp_path, "\n".join(lines) + "\n", {"train_batch_size": 64})
    run = load_run(path)
    assert run.table["iteration"].to_list() == [10, 20, 30]
    assert run.table["interval"].to_list() == [10, 10, 10]
    assert run.table["step_time_s"].to_list() == pytest.approx([64 / 200, 64 / 201, 64 / 202])
    assert any("no step= lines" in w for w in run.warnings)


def test_the_pre_0_8_micro_step_count_goes_on_across_epochs(tmp_path: Path) -> None:
    lines = [
        f"[2022-08-29 06:58:{10 + i:02d},176] [INFO] [timer.py:198:stop] {e}/{m},"
        f" RunningAvgSamplesPerSec=232.7, CurrSamplesPerSec=227.5,"
        f" MemAllocated=0.36GB, MaxMemAllocated=15.06GB"
        for i, (e, m) in enumerate([(0, 20), (0, 40), (1, 20), (1, 40)])
    ]
    path = _with_config(
        tmp_path,
        "\n".join(lines) + "\n",
        {"train_batch_size": 64, "gradient_accumulation_steps": 2},
    )
    run = load_run(path)
    assert run.table["iteration"].to_list() == [10, 20, 30, 40]
    assert run.table["segment"].n_unique() == 1
    assert run.table["step_time_s"].to_list() == pytest.approx([64 / 227.5] * 4)


# --- pairs of parsers that can both claim a file ------------------------------------------


def test_megatron_deepspeed_without_iteration_lines_in_reach_goes_to_deepspeed(
    tmp_path: Path,
) -> None:
    """Megatron claims a Megatron-DeepSpeed log by its `using world size:` line (0.6) but
    finds no iteration line (log_interval past the end of the log): it hands the file on to
    DeepSpeed (0.2), which reads the engine's step= lines. The run's warnings say so."""
    lines = [
        "using world size: 8, data-parallel-size: 8, tensor-model-parallel size: 1,"
        " pipeline-model-parallel size: 1 ",
    ]
    for step in (10, 20, 30):
        lines += [
            f"[2021-06-10 20:5{step // 10}:00,000] [INFO] [logging.py:60:log_dist] [Rank 0]"
            f" step={step}, skipped=0, lr=[6e-05], mom=[(0.9, 0.999)]",
            f"[2021-06-10 20:5{step // 10}:00,001] [INFO] [timer.py:215:stop] epoch=0/"
            f"micro_step={step}/global_step={step}, RunningAvgSamplesPerSec=100.0,"
            " CurrSamplesPerSec=100.0, MemAllocated=1.0GB, MaxMemAllocated=2.0GB",
        ]
    path = _with_config(tmp_path, "\n".join(lines) + "\n", {"train_batch_size": 50})
    scores = registry_module.scores(load_registry(), path)
    assert scores["megatron"] > scores["deepspeed"] > 0
    run = load_run(path)
    assert run.framework == "deepspeed"
    assert run.table["iteration"].to_list() == [10, 20, 30]
    assert run.table["step_time_s"].to_list() == pytest.approx([0.5] * 3)
    assert any("read as deepspeed" in w and "megatron: no records" in w for w in run.warnings)


def test_megatron_deepspeed_with_iteration_lines_stays_megatron(shared_logs: Path) -> None:
    path = shared_logs / "excerpts" / "megatron_deepspeed_1.txt"
    assert choose(load_registry(), path) == "megatron"
    assert load_run(path).framework != "deepspeed"


def test_trainer_with_deepspeed_stays_the_trainers(tmp_path: Path) -> None:
    """HF Trainer + DeepSpeed: the engine's lines between the Trainer's log dicts (as
    transformers prints them with DeepSpeed 0.12: `{'loss': 2.075, 'learning_rate':
    0.0002329900014453396, 'epoch': 0.04}`, then `[Rank 0] step=10, ...`)."""
    lines = ["***** Running training *****", "  Num examples = 1,000"]
    for step in (10, 20, 30):
        lines += [
            f"{{'loss': {2.0 - step / 100}, 'learning_rate': 0.0003, 'epoch': {step / 30:.2f}}}",
            f"[2023-12-29 13:02:{step:02d},647] [INFO] [logging.py:96:log_dist] [Rank 0]"
            f" step={step}, skipped=0, lr=[0.0003], mom=[(0.9, 0.999)]",
        ]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    found = registry_module.scores(load_registry(), path)
    assert found["hf_trainer"] > found["deepspeed"] > 0
    assert load_run(path).framework == "hf-trainer"


# --- a parser that finds nothing hands the file on ---------------------------------------


class _FindsNothing:
    name = "nothing"
    description = "claims every file, reads none"

    def detect(self, path: Path) -> float:
        return 0.99

    def parse(self, path: Path) -> Run:
        raise NothingReadError(f"{path}: none of mine")


class _NoRecords(_FindsNothing):
    name = "norecords"
    description = "claims every file, reads a config and no records"

    def parse(self, path: Path) -> Run:
        config = {"framework": ConfigValue("x", Provenance("log", str(path)))}
        empty = pl.DataFrame()
        return Run("x", config, conform_table(empty), conform_metrics(empty))


class _TiesMegatron(_FindsNothing):
    name = "tie"
    description = "claims Megatron's fixture as Megatron does, reads none of it"

    def detect(self, path: Path) -> float:
        return 0.95


class _TiesAndReads(_TiesMegatron):
    name = "tiereads"

    def parse(self, path: Path) -> Run:
        return load_registry().get("megatron").parse(path)


NOTHING, NO_RECORDS = _FindsNothing(), _NoRecords()
TIE, TIE_READS = _TiesMegatron(), _TiesAndReads()


def _with_plugin(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    real = registry_module.entry_points
    extra = EntryPoint(name, f"tests.test_detection_handoff:{name}", ENTRY_POINT_GROUP)

    def fake(group: str) -> Any:
        return [*real(group=group), extra]

    monkeypatch.setattr(registry_module, "entry_points", fake)
    discovery.registry.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_discovery_registry() -> Any:
    yield
    discovery.registry.cache_clear()


@pytest.mark.parametrize("plugin", ["NOTHING", "NO_RECORDS"])
def test_a_parser_finding_nothing_hands_the_file_on(
    monkeypatch: pytest.MonkeyPatch, plugin: str, tmp_path: Path
) -> None:
    _with_plugin(monkeypatch, plugin)
    assert choose(load_registry(), MEGATRON_LOG) in ("nothing", "norecords")
    code, data, output = _summary(str(MEGATRON_LOG))
    assert code == 0, output
    assert data["run"]["framework"].startswith("megatron")
    assert any("read as megatron" in w for w in data["warnings"])
    # in a run directory
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "train.log").write_bytes(MEGATRON_LOG.read_bytes())
    code, data, output = _summary(str(folder))
    assert code == 0, output
    assert data["run"]["framework"].startswith("megatron")


def test_forced_format_does_not_hand_on(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_plugin(monkeypatch, "NOTHING")
    code, _, output = _summary("--format", "nothing", str(MEGATRON_LOG))
    assert code == 1
    assert "none of mine" in output


def test_equal_claimants_tie_only_when_both_read(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_plugin(monkeypatch, "TIE")
    code, data, output = _summary(str(MEGATRON_LOG))
    assert code == 0, output
    assert data["run"]["framework"].startswith("megatron")
    monkeypatch.undo()
    _with_plugin(monkeypatch, "TIE_READS")
    code, _, output = _summary(str(MEGATRON_LOG))
    assert code == 3
    assert "megatron, tiereads claim it equally" in output


def test_index_hands_a_file_on_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The fleet index records the claimant it detected, then reads the folder by the same
    hand-on rule (one job: the plugin stays in this process)."""
    _with_plugin(monkeypatch, "NOTHING")
    root = tmp_path / "fleet" / "job-1"
    root.mkdir(parents=True)
    (root / "train.log").write_bytes(MEGATRON_LOG.read_bytes())
    dataset = tmp_path / "index"
    args = ["index", str(tmp_path / "fleet"), "--out", str(dataset), "--jobs", "1", "-q"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    runs = pl.read_parquet(dataset / "runs.parquet")
    assert runs.height == 1
    assert runs["framework"][0].startswith("megatron")


def test_a_relaunch_after_an_epoch_starts_its_count_afresh(tmp_path: Path) -> None:
    """Before 0.8 the count restarts each epoch (carried on) and at a relaunch (not)."""
    reports = [(0, 20), (0, 40), (1, 20), (1, 40), (0, 20), (0, 40)]
    lines = [
        f"[2022-08-29 06:58:{10 + i:02d},176] [INFO] [timer.py:198:stop] {e}/{m},"
        f" RunningAvgSamplesPerSec=232.7, CurrSamplesPerSec=227.5,"
        f" MemAllocated=0.36GB, MaxMemAllocated=15.06GB"
        for i, (e, m) in enumerate(reports)
    ]
    config = {"train_batch_size": 64, "gradient_accumulation_steps": 2}
    path = _with_config(tmp_path, "\n".join(lines) + "\n", config)
    run = load_run(path)
    assert run.table["iteration"].to_list() == [10, 20, 30, 40, 10, 20]
    assert run.table["segment"].to_list() == [0, 0, 0, 0, 1, 1]


@pytest.mark.parametrize(
    ("parser_name", "text"),
    [
        # a head that names Trainer markers but a body of neither dicts, bars nor the block
        ("hf_trainer", "loading configuration file config.json\nhello\n"),
        ("megatron", "a line of no format\nnothing else\n"),
    ],
)
def test_built_in_parsers_finding_nothing_say_so(
    parser_name: str, text: str, tmp_path: Path
) -> None:
    """The built-in parsers raise NothingReadError (not a bare InputError) when a file holds
    nothing of theirs, so that a file they claimed by its head goes on to the next claimant."""
    path = tmp_path / "train.log"
    path.write_text(text)
    with pytest.raises(NothingReadError, match=r"train\.log"):
        load_registry().get(parser_name).parse(path)
