"""Golden files: each fixture's per-iteration table, long metrics table and summary document.

Regenerate with LOGANALYZER_UPDATE_GOLDENS=1 python -m pytest tests/test_golden.py, then
review the diff like any other change.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.load import load_run
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES, ROOT, assert_golden

# Every input the built-in parsers claim: single files, and run directories read whole.
CASES = sorted(
    [p for p in (FIXTURES / "megatron").glob("*") if p.is_file()]
    + [p for p in (FIXTURES / "megatron_deepspeed").glob("*") if p.is_file()]
    + sorted((FIXTURES / "megatron" / "quirks").glob("*"))
    + [FIXTURES / "megatron" / "restart_dir"]
)


# The facts a fixture's log lacks, as a user would pass them (from each source's notes).
EXTRA_ARGS = {
    "bigscience_gpt2_tp4_pp8.out": ["--gpu", "v100-sxm2"],
    "bigscience_gpt2_3d_ds_on.out": ["--gpu", "v100-sxm2"],
    "core_v0_6_mixtral_throughput.txt": [
        *("--model", "mixtral-8x7b", "--seq-length", "4096", "--num-gpus", "16"),
        *("--gpu", "NVIDIA H100 80GB HBM3", "--dtype", "bf16"),
    ],
    "bloom_176b_chronicles.txt": [
        *("--num-layers", "70", "--hidden-size", "14336", "--num-attention-heads", "112"),
        *("--seq-length", "2048", "--padded-vocab-size", "250880", "--num-gpus", "384"),
        *("--gpu", "a100-sxm4-80gb", "--dtype", "bf16", "--recompute", "full"),
    ],
    "restart_dir": ["--gpu", "h100-sxm"],
    "restart_in_file.log": ["--gpu", "h100-sxm"],
}


def _name(path: Path) -> str:
    return "megatron/" + path.relative_to(FIXTURES).as_posix().replace("/", "__")


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_tables_match_golden(path: Path) -> None:
    run = load_run([str(path.relative_to(ROOT))], load_registry()).run
    assert_golden(_name(path) + ".table.csv", run.table.write_csv())
    assert_golden(_name(path) + ".metrics.csv", run.metrics.write_csv())


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_summary_matches_golden(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    args = ["summary", "-q", str(path.relative_to(ROOT)), *EXTRA_ARGS.get(path.name, [])]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)
    assert_golden(_name(path) + ".json", result.stdout)
    text = CliRunner().invoke(main, args)
    assert_golden(_name(path) + ".txt", text.stdout)
