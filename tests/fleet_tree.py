"""A generated tree of Megatron-LM runs for the fleet tests and the index benchmark.

Each run is a directory holding one or two stdout logs in the current Megatron-LM shape (the
`using world size` line, the arguments dump, iteration lines with a microsecond timestamp
prefix, as quoted in the shared `logs/FORMATS.md`). Three configurations, one run of the first
slowed by 15 % (with a changed micro-batch size, the config difference that came with it), one
run whose log is a truncated .gz, and one run split across a restart. The generator knows every
run's wall-clock time exactly, so the tests can check the GPU-hours the fleet report sums.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path

BASE = datetime(2025, 9, 1, 8, 0, 0, tzinfo=timezone.utc)
LOG_INTERVAL = 10
RECORDS = 12


@dataclass(frozen=True)
class Config:
    """One training configuration: a model shape, its parallelism and its step time."""

    name: str
    num_layers: int
    hidden_size: int
    heads: int
    seq_length: int
    global_batch_size: int
    tp: int
    pp: int
    world_size: int
    step_ms: float


CONFIGS = (
    Config("small", 16, 2048, 16, 2048, 64, 1, 1, 8, 600.0),
    Config("medium", 32, 4096, 32, 4096, 64, 2, 1, 16, 1800.0),
    Config("wide", 40, 5120, 40, 4096, 128, 4, 2, 32, 4500.0),
)


@dataclass
class Tree:
    """What the generator wrote, for the tests to check against."""

    root: Path
    gpu_hours: dict[str, float] = field(default_factory=dict)
    regressed: str = ""
    corrupt: str = ""
    restarted: str = ""
    bytes: int = 0


def _arguments(config: Config, micro_batch_size: int) -> str:
    dp = config.world_size // (config.tp * config.pp)
    args = {
        "bf16": "True",
        "data_parallel_size": dp,
        "fp16": "False",
        "global_batch_size": config.global_batch_size,
        "hidden_size": config.hidden_size,
        "log_interval": LOG_INTERVAL,
        "micro_batch_size": micro_batch_size,
        "num_attention_heads": config.heads,
        "num_layers": config.num_layers,
        "padded_vocab_size": 50304,
        "pipeline_model_parallel_size": config.pp,
        "recompute_granularity": "None",
        "seq_length": config.seq_length,
        "swiglu": "True",
        "tensor_model_parallel_size": config.tp,
        "train_iters": 1000,
        "world_size": config.world_size,
    }
    lines = [
        f"using world size: {config.world_size}, data-parallel size: {dp}, context-parallel "
        "size: 1, hierarchical context-parallel sizes: None, tensor-model-parallel size: "
        f"{config.tp}, pipeline-model-parallel size: {config.pp}",
        "------------------------ arguments ------------------------",
    ]
    for key, value in args.items():
        lines.append(f"  {key} {'.' * (48 - len(key))} {value}")
    lines.append("-------------------- end of arguments ---------------------")
    return "\n".join(lines) + "\n"


def _iteration_line(when: datetime, iteration: int, step_ms: float, config: Config) -> str:
    return (
        f" [{when.strftime('%Y-%m-%d %H:%M:%S.%f')}] iteration {iteration:8d}/    1000 |"
        f" consumed samples: {iteration * config.global_batch_size:12d} |"
        f" elapsed time per iteration (ms): {step_ms:.1f} |"
        " learning rate: 1.000000E-04 |"
        f" global batch size: {config.global_batch_size:5d} |"
        " lm loss: 4.000000E+00 | loss scale: 1.0 | grad norm: 1.234 |"
        " number of skipped iterations:   0 | number of nan iterations:   0 |\n"
    )


def _segment(
    config: Config, start: datetime, iterations: range, rng: random.Random, scale: float
) -> tuple[list[str], datetime, int]:
    """Iteration lines from `start`; each line's timestamp is when its interval ended.
    Returns the lines, the last timestamp and the logged microseconds."""
    lines: list[str] = []
    now = start
    logged_us = 0
    for iteration in iterations:
        step_ms = round(config.step_ms * scale * (1 + rng.uniform(-0.004, 0.004)), 1)
        work_us = round(step_ms * 1000) * LOG_INTERVAL
        now += timedelta(microseconds=work_us)
        logged_us += work_us
        lines.append(_iteration_line(now, iteration, step_ms, config))
    return lines, now, logged_us


def write_tree(root: Path, runs_per_config: int = 17, records: int = RECORDS) -> Tree:
    """Write `runs_per_config` runs of each configuration under `root`/<config>/run-NN/."""
    tree = Tree(root)
    rng = random.Random(14)
    last = records * LOG_INTERVAL
    for c, config in enumerate(CONFIGS):
        for n in range(runs_per_config):
            run_dir = root / config.name / f"run-{n:02d}"
            run_dir.mkdir(parents=True)
            run_id = f"{root.name}/{config.name}/run-{n:02d}"
            start = BASE + timedelta(days=n, hours=c)
            scale = 1 + rng.uniform(-0.01, 0.01)
            micro_batch_size = 2
            if c == 0 and n == 12:
                scale, micro_batch_size, tree.regressed = 1.15, 1, run_id
            head = _arguments(config, micro_batch_size)
            job = 1000 * (c + 1) + n
            corrupt = c == 2 and n == 3
            end_iteration = last
            lines, end, logged_us = _segment(
                config, start, range(LOG_INTERVAL, end_iteration + 1, LOG_INTERVAL), rng, scale
            )
            text = head + "".join(lines)
            if c == 1 and n == 5:
                # killed after `last`, resumed from the checkpoint at last/2 after 10 minutes
                tree.restarted = run_id
                gap_us = 600 * 1_000_000
                resumed = range(last // 2 + LOG_INTERVAL, last + 1, LOG_INTERVAL)
                again, _, redone_us = _segment(
                    config, end + timedelta(microseconds=gap_us), resumed, rng, scale
                )
                (run_dir / f"slurm-{job}b.out").write_text(head + "".join(again))
                logged_us += redone_us + gap_us
            path = run_dir / f"slurm-{job}.out"
            if corrupt:
                tree.corrupt = run_id
                # what the job left is its trainer state, cut mid-write: no record can be read
                path = run_dir / "trainer_state.json"
                path.write_text('{"global_step": 20, "log_history": [{"loss": 2.5, "st')
            else:
                path.write_text(text)
                tree.gpu_hours[run_id] = config.world_size * logged_us / 1e6 / 3600
            (run_dir / "launch.sh").write_text("#!/bin/sh\nsrun python pretrain_gpt.py\n")
    tree.bytes = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    return tree
