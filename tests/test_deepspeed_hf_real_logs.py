"""Every DeepSpeed, HF Trainer and HF+DeepSpeed log under ../shared/logs parses to the numbers
grep finds in it, and detection gives every real log to the right parser.

The expected figures were extracted independently of the parsers, per file F:
  DeepSpeed step records: grep -o "\\[Rank 0\\] step=[0-9]\\+" F | grep -v "step=0$" | uniq
  their step time:        16 / the CurrSamplesPerSec after the first (train_batch_size 16)
  timer-only records:     grep -c "time (ms) | fwd: " F; first = (fwd + bwd + step) / 1000
  HF stdout records:      grep -c "{'loss'" F; step = k·40/8 (TrainOutput(global_step=40) or
                          train_steps_per_second x train_runtime = 1.11 x 36.0323 = 40)
  HF step time:           first 'train_runtime' / 5 (its cumulative runtime at step 5)
  HF bars:                grep -o "[0-9]*/40 \\[" F | sort -u | grep -v "^0/" | wc -l; the
                          first step's time is the rate of the first update (2.29s/it: tqdm's
                          average of one step is that step), which its elapsed 00:02 agrees with
  trainer_state.json:     [e["step"] for e in json.load(F)["log_history"] if "loss" in e]
  bigscience bars:        grep -o " [0-9]*/8 \\[[0-9:]*" F | sort -u  (elapsed differences)
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.errors import UnrecognisedSourceError
from loganalyzer.load import load_run
from loganalyzer.parsers.deepspeed import DeepSpeedParser
from loganalyzer.parsers.hf_trainer import HfTrainerParser
from loganalyzer.registry import choose, load_registry
from tests.conftest import ROOT, assert_golden

# path, first and last iteration, records, first step time (s)
DEEPSPEED = [
    ("excerpts/deepspeed_4.txt", 5, 20, 4, 16 / 3689.8964666166466),
    ("generated/ds_run/combined_info.log", 5, 20, 4, 16 / 3689.8964666166466),
    ("excerpts/deepspeed_5.txt", 1, 20, 20, (114.52 + 10.28 + 11.66) / 1000),
    ("generated/ds_run/combined.log", 1, 20, 20, (114.52 + 10.28 + 11.66) / 1000),
]
HF = [
    ("excerpts/hf_trainer_4.txt", 5, 40, 8, 7.6695 / 5),
    ("generated/hf_run/stdout.bin", 5, 40, 8, 7.6695 / 5),
    ("excerpts/hf_trainer_6.txt", 5, 40, 8, 0.8554 / 5),
    ("generated/hf_torchrun/combined.log", 5, 40, 8, 0.8554 / 5),
    ("excerpts/hf_trainer_7.txt", 5, 40, 8, 7.6695 / 5),
    ("generated/hf_run/out/trainer_state.json", 5, 40, 8, 7.6695 / 5),
    ("generated/hf_torchrun/out/trainer_state.json", 5, 40, 8, 0.8554 / 5),
    ("excerpts/hf_trainer_5.txt", 1, 40, 39, 2.29),
    ("generated/hf_run/stderr.bin", 1, 40, 39, 2.29),
    ("bigscience/gpt2-hf-ds/hf_ds_gpt2_base_n8-1832573.out", 1, 8, 8, 113.21),
    ("bigscience/gpt2-hf-ds/hf_ds_gpt2_perf_n16_bs4-mbs8.out", 2, 2, 1, 273.0148 / 2),
]


@pytest.mark.parametrize(("name", "first", "last", "records", "step"), DEEPSPEED + HF)
def test_records_and_step_times(
    shared_logs: Path, name: str, first: int, last: int, records: int, step: float
) -> None:
    run = load_run([str(shared_logs / name)], load_registry()).run
    table = run.table
    assert (table.height, table["iteration"].min(), table["iteration"].max()) == (
        records,
        first,
        last,
    )
    assert table["step_time_s"][0] == pytest.approx(step, rel=1e-4)


def test_bigscience_bars_give_each_step(shared_logs: Path) -> None:
    """Elapsed 1:53, 3:45, 5:37, 7:30, 9:23, 11:12, 13:01, 14:55 at steps 1 to 8, rates
    113.21, 112.97, 112.71, 112.80, 112.91, 111.56, 110.83, 111.95 s/it: the rate where the
    elapsed clock agrees with it within its second (steps 1-5), the elapsed difference where
    tqdm's running average lags a change (step 6 took 109 s, not 111.56)."""
    path = shared_logs / "bigscience/gpt2-hf-ds/hf_ds_gpt2_base_n8-1832573.out"
    run = load_run([str(path)], load_registry()).run
    expected = [113.21, 112.97, 112.71, 112.8, 112.91, 109, 109, 114]
    assert run.table["step_time_s"].to_list() == expected
    assert run.sources[0].clock_resolution_s == 1.0
    assert run.get("global_batch_size") == 128
    assert run.get("num_gpus") == 32  # 128 / (4 per device x 1 accumulation step)


def test_training_block_and_trainable_parameters(shared_logs: Path) -> None:
    run = HfTrainerParser().parse(shared_logs / "excerpts/hf_trainer_2.txt")
    facts = {k: run.get(k) for k in ("global_batch_size", "micro_batch_size", "num_gpus")}
    assert facts == {"global_batch_size": 224, "micro_batch_size": 8, "num_gpus": 7}
    assert run.get("gradient_accumulation_steps") == 4
    assert run.get("train_iters") == 196
    assert run.get("trainable_params") == 7_615_616_512


def test_checkpoint_state_and_unnumbered_dicts(shared_logs: Path) -> None:
    state = HfTrainerParser().parse(shared_logs / "excerpts/hf_trainer_1.txt")
    assert state.table["iteration"].to_list() == [15, 30, 45, 2790]
    assert state.table["interval"].to_list() == [15, 15, 15, 15]  # the cut is not one long step
    dicts = HfTrainerParser().parse(shared_logs / "excerpts/hf_trainer_3.txt")
    assert dicts.table["loss"].to_list() == [4.75, 2.0312, 0.8984, 0.4102, 0.2031]
    assert any("numbered 1, 2, 3" in w for w in dicts.warnings)


def test_deepspeed_config_profiler_and_megatron_deepspeed_lines(shared_logs: Path) -> None:
    parser = DeepSpeedParser()
    engine = parser.parse(shared_logs / "excerpts/deepspeed_1.txt")
    assert engine.get("global_batch_size") == 1024
    assert engine.table.height == 0  # only step=0, printed when the engine starts
    profiler = parser.parse(shared_logs / "excerpts/deepspeed_3.txt")
    latency = profiler.metrics.filter(profiler.metrics["name"] == "flops_profiler/iter_latency_s")
    assert latency["value"].to_list() == pytest.approx([0.18473, 41.39])
    zero = parser.parse(shared_logs / "excerpts/deepspeed_2.txt")
    assert zero.table["iteration"].to_list() == list(range(136005, 136012))
    names = set(zero.metrics["name"].cast(str).to_list())
    assert {"timer/optimizer_allgather", "timer/fwd_microstep", "timer/bwd"} <= names


def test_quiet_deepspeed_log_says_what_is_missing(shared_logs: Path) -> None:
    run = DeepSpeedParser().parse(shared_logs / "generated/ds_run/combined.log")
    assert any('"log_level": "info"' in w for w in run.warnings)
    profiled = run.table.filter(run.table["reported_tflops_per_gpu"].is_not_null())
    assert profiled["iteration"].to_list() == [6, 7]
    assert profiled["reported_tflops_per_gpu"].to_list() == pytest.approx([11.68e-3, 4.26e-3])


def test_alcf_megatron_deepspeed_log_is_read_by_its_deepspeed_lines(
    shared_logs: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deepspeed_2.txt: the ALCF Megatron-DeepSpeed fork on DeepSpeed 0.17.5. Its iteration
    lines are the fork's key=value variant, which the Megatron parser does not read; its
    DeepSpeed engine lines (step=, ThroughputTimer, wall_clock_breakdown) are read here,
    step times from the logger timestamps of consecutive step= lines. Independently:

        grep -o "step=[0-9]*, skipped" F              -> 136005 ... 136011 (7 lines)
        grep -o "elapsed_time_per_iteration_ms=[0-9.]*" F
            -> 3415.3 (136004), 3420.2, 6863.2, 3402.7, 5334.1, 3394.8, 3401.5 (136010)

    the fork's own step times for 136006-136010, which the timestamp differences match to
    the timestamps' 1 ms resolution (136005's predecessor and 136011's figure are clipped).
    """
    path = shared_logs / "excerpts/deepspeed_2.txt"
    assert choose(load_registry(), path) == "deepspeed"
    run = load_run([str(path)], load_registry()).run
    table = run.table
    assert table["iteration"].to_list() == list(range(136005, 136012))
    assert table["step_time_s"][0] is None
    fork_ms = [6863.2, 3402.7, 5334.1, 3394.8, 3401.5]
    assert table["step_time_s"][1:6].to_list() == pytest.approx(
        [ms / 1000 for ms in fork_ms], abs=0.002
    )
    assert table["mem_max_allocated_gb"].to_list() == [39.0] * 7
    assert any("key=value iteration lines" in w for w in run.warnings)
    assert not any("no DeepSpeedEngine configuration, step=" in w for w in run.warnings)
    monkeypatch.chdir(ROOT)
    relative = "../shared/logs/excerpts/deepspeed_2.txt"
    golden = load_run([relative], load_registry()).run
    assert_golden("deepspeed/alcf_deepspeed_2.table.csv", golden.table.write_csv())
    result = CliRunner().invoke(main, ["summary", "-q", "--json", relative])
    assert result.exit_code == 0, result.output
    assert_golden("deepspeed/alcf_deepspeed_2.json", result.stdout)


# Which parser reads each real log. Megatron-DeepSpeed logs stay with the Megatron parser;
# deepspeed_2.txt, an ALCF Megatron-DeepSpeed log whose iteration lines are a key=value
# variant the Megatron parser does not read, goes to the DeepSpeed parser for its engine
# lines. The HF+DeepSpeed runs are the Trainer's.
def _expected(relative: str) -> str | None:
    name = relative.rsplit("/", 1)[-1]
    if relative.startswith("bigscience/gpt2-hf-ds/"):
        return "hf_trainer"
    if relative.startswith("bigscience/") or name.startswith("megatron"):
        return "megatron"
    if name.startswith("deepspeed_") or relative.startswith("generated/ds_run/combined"):
        return "deepspeed"
    if name.startswith("hf_trainer_") or relative.startswith("generated/hf_torchrun/combined"):
        return "hf_trainer"
    if name in ("stdout.bin", "stderr.bin", "output.log"):
        return "hf_trainer"
    if name == "trainer_state.json":
        return None if "/checkpoint-" in relative else "hf_trainer"
    return "other"


def test_detection_on_every_real_log(shared_logs: Path) -> None:
    registry = load_registry()
    wrong = []
    for path in sorted(p for p in shared_logs.rglob("*") if p.is_file()):
        relative = path.relative_to(shared_logs).as_posix()
        expected = _expected(relative)
        try:
            chosen: str | None = choose(registry, path)
        except UnrecognisedSourceError:  # FORMATS.md quotes every framework's format strings
            chosen = None
        if expected == "other":
            # not a DeepSpeed, Trainer or Megatron log: neither new parser may claim it
            if chosen in ("deepspeed", "hf_trainer") and not relative.endswith(".md"):
                wrong.append((relative, chosen))
        elif chosen != expected:
            wrong.append((relative, chosen))
    assert wrong == []
