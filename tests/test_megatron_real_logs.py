"""Every Megatron-family log under ../shared/logs parses to the numbers grep finds in it.

The expected figures were extracted independently of the parser, per file F, with:
  T='elapsed time per iteration ([ms]*): [0-9.]*'
  records:    grep -o "iteration *[0-9]*/ *[0-9]* |.*$T" F | sort -u | wc -l
  iterations: grep -o " iteration *[0-9]*/" F | grep -o "[0-9]*" | sort -n | sed -n '1p;$p'
  step times: grep -o "$T" F | awk '{print $NF}' | sort -g | sed -n '1p;$p'
  world size: grep -o -m1 "using world size: [0-9]*" F
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.conftest import assert_golden

# path, records, first, last, min printed, max printed, unit divisor to seconds, world size
CASES = [
    (
        "bigscience/gpt2-meg-ds-3d-old/meg_ds_3d_gpt2_perf_n16.out",
        2,
        1,
        2,
        145207.0,
        150471.3,
        1000,
        64,
    ),
    (
        "bigscience/gpt2-meg-ds-3d/meg_ds_3d_gpt2_perf_n16-ds-off.out",
        62,
        1,
        62,
        120406.6,
        144915.6,
        1000,
        64,
    ),
    (
        "bigscience/gpt2-meg-ds-3d/meg_ds_3d_gpt2_perf_n16-ds-on.out",
        49,
        1,
        49,
        125643.3,
        159778.9,
        1000,
        64,
    ),
    (
        "bigscience/gpt2-meg-ds-zero/meg_ds_zero_gpt2_perf_n16-1999616.out",
        4,
        1,
        4,
        123742.4,
        128917.0,
        1000,
        64,
    ),
    (
        "bigscience/gpt2-meg-ds-zero/meg_ds_zero_gpt2_perf_n16_nbs48_ms48.out",
        3,
        1,
        3,
        121899.8,
        125912.4,
        1000,
        64,
    ),
    (
        "bigscience/gpt2-meg/meg_gpt2_base_n8_dp1_tp4_pp8-1809562.out",
        20,
        10,
        200,
        1572.7,
        3171.3,
        1000,
        32,
    ),
    ("bigscience/gpt2-meg/meg_gpt2_perf_n16-1999618.out", 4, 1, 4, 122224.0, 150891.7, 1000, 64),
    ("bigscience/gpt2-meg/meg_gpt2_perf_n16.out", 3, 1, 3, 128891.5, 155483.8, 1000, 64),
    ("excerpts/megatron_2.txt", 20, 10, 200, 1572.7, 3171.3, 1000, None),
    ("excerpts/megatron_3.txt", 8, 2, 87, 5361.6, 5829.9, 1000, None),
    ("excerpts/megatron_4.txt", 1, 10, 10, 356.2, 356.2, 1000, None),
    ("excerpts/megatron_deepspeed_1.txt", 49, 1, 49, 125643.3, 159778.9, 1000, None),
    ("excerpts/megatron_deepspeed_2.txt", 17, 31214, 45000, 105.16, 111.14, 1, None),
    ("excerpts/megatron_deepspeed_3.txt", 6, 2, 2, 430.21, 853.81, 1, None),
    ("excerpts/megatron_deepspeed_4.txt", 2, 1, 2, 20298.3, 25849.1, 1000, None),
    ("excerpts/megatron_deepspeed_5.txt", 2, 199, 200, 14287.5, 14541.4, 1000, None),
]


@pytest.mark.parametrize(
    ("name", "records", "first", "last", "low", "high", "divisor", "world"),
    CASES,
    ids=[c[0].rsplit("/", 1)[-1] for c in CASES],
)
def test_summary_matches_grep(
    shared_logs: Path,
    name: str,
    records: int,
    first: int,
    last: int,
    low: float,
    high: float,
    divisor: int,
    world: int | None,
) -> None:
    args = ["summary", "-q", "--json", "--split-runs", str(shared_logs / name)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    docs = json.loads(result.stdout)  # one document per run the log holds
    assert sum(doc["iterations"]["logged"] for doc in docs) == records
    assert min(doc["iterations"]["first"] for doc in docs) == first
    assert max(doc["iterations"]["last"] for doc in docs) == last
    assert min(doc["step_time_s"]["min"] for doc in docs) == pytest.approx(low / divisor, 1e-12)
    assert max(doc["step_time_s"]["max"] for doc in docs) == pytest.approx(high / divisor, 1e-12)
    assert {doc["run"]["num_gpus"] for doc in docs} == {world}
    assert {doc["sources"][0]["format"] for doc in docs} == {"megatron"}


def test_arguments_only_log_gives_config_and_a_warning(shared_logs: Path) -> None:
    """megatron_1.txt is a start-up excerpt: config, no iteration line."""
    result = CliRunner().invoke(
        main, ["summary", "--json", str(shared_logs / "excerpts/megatron_1.txt")]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["iterations"]["logged"] == 0
    assert doc["run"]["num_gpus"] == 32
    assert any("no iteration lines" in w for w in doc["warnings"])


def test_bigscience_directory_reads_every_megatron_file(shared_logs: Path) -> None:
    """A directory of three runs, each from iteration 1: every Megatron file read, one run
    each."""
    result = CliRunner().invoke(
        main, ["summary", "--json", "--split-runs", str(shared_logs / "bigscience/gpt2-meg")]
    )
    assert result.exit_code == 0, result.output
    docs = json.loads(result.stdout)
    assert sorted(doc["sources"][0]["records"] for doc in docs) == [3, 4, 20]
    assert sorted(doc["iterations"]["logged"] for doc in docs) == [3, 4, 20]


# The bigscience runs are on V100s (their notes); excerpts run without hardware facts.
REAL_LOGS = [case[0] for case in CASES] + ["excerpts/megatron_1.txt"]


@pytest.mark.parametrize("name", REAL_LOGS, ids=[n.rsplit("/", 1)[-1] for n in REAL_LOGS])
def test_verdicts_match_golden(shared_logs: Path, name: str) -> None:
    """The verdicts for each real log, with the numbers a reader checks by hand: MFU against
    the V100 fp16 reference (PaLM's recomputation of GPT-3: 0.213), restarts, stalls."""
    gpu = ["--gpu", "v100-sxm2"] if name.startswith("bigscience/") else []
    args = ["summary", "-q", "--json", "--split-runs", str(shared_logs / name), *gpu]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    lines = []
    for doc in json.loads(result.stdout):
        lines += [f"{v['severity']} {v['code']}: {v['message']}" for v in doc["verdicts"]]
        lines.append(f"warm-up records: {[w['records'] for w in doc['warmup']]}")
        slow = [(s["first_iteration"], s["last_iteration"], s["kind"]) for s in doc["slow_steps"]]
        lines.append(f"slow steps: {slow}")
        lines.append(f"time: {doc['time']['summary']}")
    golden = "shared/" + name.replace("/", "__") + ".verdicts.txt"
    # a verdict quotes its evidence's file as given: the same golden wherever shared/ lies
    text = ("\n".join(lines) + "\n").replace(str(shared_logs), "<shared logs>")
    assert_golden(golden, text)
