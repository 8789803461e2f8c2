"""The benchmark's log generator: the same arguments give the same bytes, the logs have the
shape the stdout stage claims (line counts per kind, ~30 % noise, rank prefixes, whole
blocks of iterations), and loganalyzer reads back every iteration written."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import synthetic
from bench.generate import write_log, write_run_dir
from bench.stage_report import synthetic_tables
from loganalyzer.parsers.megatron import MegatronParser

SIZE = 2 << 20  # 2 MiB: several blocks of 1,000 iterations in each format

# Iteration 60 prints every kind of line of its format (60 is a multiple of 3, 4, 5 and 10);
# the text is what the per-line formatter the vectorised generator replaced wrote.
CURRENT_60 = """\
63:  [2025-09-01 08:06:09.475140] iteration       60/ 5000000 | consumed samples:         7680 | elapsed time per iteration (ms): 6260.0 | throughput per GPU (TFLOP/s/GPU): 133.0 | learning rate: 1.830000E-05 | global batch size:   128 | lm loss: 2.780000E+00 | loss scale: 1.0 | grad norm: 0.700 | number of skipped iterations:   0 | number of nan iterations:   0 |
4: [Rank 4] (after 60 iterations) memory (MB) | allocated: 17704.36 | max allocated: 20045.01 | reserved: 24084.00 | max reserved: 24084.00
0: (min, max) time across ranks (ms):
0:     forward-backward ...............................: (5960.00, 6010.00)
0:     optimizer ......................................: (46.00, 50.00)
60: r7i3n0:38600:38856 [2] NCCL INFO comm 0x1450d4001060 rank 60 nranks 64 cudaDev 2 busId 48000
"""  # noqa: E501
LEGACY_60 = """\
 iteration       60/  292968 | consumed samples:          240 | elapsed time per iteration (ms): 1860.0 | learning rate: 9.150E-06 | global batch size:     4 | lm loss: 2.780000E+00 | loss scale: 16384.0 | grad norm: 0.700 | number of skipped iterations:   0 | number of nan iterations:   0 |
time (ms) | forward-compute: 275.00 | forward-recv: 1178.00 | backward-compute: 462.00 | backward-send: 65.31 | backward-send-forward-recv: 152.65 | backward-params-all-reduce: 22.00 | backward-embedding-all-reduce: 1000.10 | optimizer-copy-to-main-grad: 9.24 | optimizer-unscale-and-check-inf: 73.55 | optimizer: 82.95 | batch-generator: 2.00
[Rank 0] (after 60 iterations) memory (MB) | allocated: 17694.361328125 | max allocated: 20045.0126953125 | reserved: 24084.0 | max reserved: 24084.0
"""  # noqa: E501


@pytest.mark.parametrize("kind", ["current", "legacy"])
def test_the_same_arguments_write_the_same_bytes(tmp_path: Path, kind: str) -> None:
    first = write_log(tmp_path / "a.log", SIZE, kind)
    again = write_log(tmp_path / "b.log", SIZE, kind)
    assert first == again
    assert (tmp_path / "a.log").read_bytes() == (tmp_path / "b.log").read_bytes()
    other = write_log(tmp_path / "c.log", SIZE, kind, first=1 + first)
    assert (tmp_path / "c.log").read_bytes() != (tmp_path / "a.log").read_bytes()
    assert other > 0


@pytest.mark.parametrize(("kind", "expected"), [("current", CURRENT_60), ("legacy", LEGACY_60)])
def test_one_iteration_prints_every_kind_of_line(tmp_path: Path, kind: str, expected: str) -> None:
    write_log(tmp_path / "log", SIZE, kind)
    text = (tmp_path / "log").read_text()
    start = text.index(expected.splitlines()[0])
    assert text[start : start + len(expected)] == expected


def test_the_current_format_has_the_stated_shape(tmp_path: Path) -> None:
    path = tmp_path / "current.log"
    iterations = write_log(path, SIZE, "current")
    assert iterations % 1000 == 0
    text = path.read_text()
    # whole blocks: the log reaches the size asked for, and its last block is what did it
    last_block = text.rindex("\n", 0, text.index(f" iteration {iterations - 999:8d}/")) + 1
    assert last_block < SIZE <= len(text.encode())
    lines = text.splitlines()
    body = lines[next(n for n, line in enumerate(lines) if " iteration " in line) :]
    assert sum(" iteration " in line for line in body) == iterations
    assert sum("memory (MB)" in line for line in body) == iterations // 3
    assert sum("(min, max) time across ranks" in line for line in body) == iterations // 5
    noise = sum(("NCCL" in line or "Warning" in line or "socket" in line) for line in body)
    assert noise == iterations
    assert 0.25 < noise / len(body) < 0.35
    assert all(line.split(":", 1)[0].isdigit() for line in body)  # srun --label prefixes


def test_the_2021_format_has_the_stated_shape(tmp_path: Path) -> None:
    path = tmp_path / "legacy.log"
    iterations = write_log(path, SIZE, "legacy")
    body = path.read_text().split(" iteration ", 1)[1].splitlines()
    assert sum(line.startswith("time (ms) | forward-compute") for line in body) == iterations
    memory = [line for line in body if line.startswith("[Rank ")]
    assert len(memory) == iterations // 10 * 32
    assert {line.split("]")[0] for line in memory} == {f"[Rank {rank}" for rank in range(32)}


@pytest.mark.parametrize("kind", ["current", "legacy"])
def test_loganalyzer_reads_every_iteration_written(tmp_path: Path, kind: str) -> None:
    path = tmp_path / f"{kind}.log"
    iterations = write_log(path, SIZE, kind)
    run = MegatronParser().parse(path)
    assert run.table.height == iterations
    assert run.table["iteration"].to_list() == list(range(1, iterations + 1))


def test_a_run_directory_continues_its_iterations(tmp_path: Path) -> None:
    total = write_run_dir(tmp_path / "run", 3, 1 << 20)
    runs = [MegatronParser().parse(path) for path in sorted((tmp_path / "run").iterdir())]
    steps = [step for run in runs for step in run.table["iteration"].to_list()]
    assert steps == list(range(1, total + 1))


def test_a_synthetic_run_reads_back_as_built(tmp_path: Path) -> None:
    """The analysis and report stages build their run once; every child reads the same
    tables, schema and categories included."""
    table, metrics = synthetic_tables(5_000)
    read_table, read_metrics = synthetic.load(synthetic.save(tmp_path / "run", table, metrics))
    assert read_table.equals(table) and read_table.schema == table.schema
    assert read_metrics.equals(metrics) and read_metrics.schema == metrics.schema
