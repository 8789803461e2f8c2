"""W&B inputs for the benchmark: an offline run written by `wandb` itself, and a run of the
same shape served by ID from the tests' loopback replay server (no network), pulled into
loganalyzer's cache by the real client.

Both log Megatron-LM's keys with `step=iteration`. The values are a function of the step;
wandb adds its own `_timestamp` and `_runtime` (the clock), which nothing here checks.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.harness import ROOT
from tests.wandb_replay import API, client_env, replay_server

ENTITY, PROJECT, RUN_ID = "bench-team", "bench", "b1gh1st0"
REFERENCE = f"wandb:{ENTITY}/{PROJECT}/{RUN_ID}"
SUMMARY = (sys.executable, "-m", "loganalyzer", "summary")
# Megatron-LM's wandb.log keys (training.py), the same in both runs.
WRITER = """
import sys, wandb
rows = int(sys.argv[1])
run = wandb.init(project="bench", name="megatron-bench", config={
    "num_layers": 32, "hidden_size": 4096, "num_attention_heads": 32, "seq_length": 4096,
    "global_batch_size": 1024, "bf16": True})
for step in range(1, rows + 1):
    wandb.log({
        "lm loss": 10.0 - step / rows, "iteration-time": 0.5 + (step % 7) / 100,
        "learning-rate": 1e-4 * (step % 1000) / 1000, "grad-norm": 1.0 + (step % 13) / 10,
        "loss-scale": 1.0, "batch-size": 1024.0, "num-zeros": float(step % 5),
        "params-norm": 300.0 + step / rows}, step=step)
run.finish()
"""


def write_offline_run(folder: Path, rows: int) -> Path:
    """An offline run of `rows` history rows written by the installed wandb; its `.wandb`."""
    folder.mkdir(parents=True, exist_ok=True)
    scratch = str(folder)
    env = dict(
        os.environ,
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        WANDB_CONSOLE="off",
        WANDB_DIR=scratch,
        WANDB_CACHE_DIR=scratch,
        WANDB_CONFIG_DIR=scratch,
    )
    subprocess.run([sys.executable, "-c", WRITER, str(rows)], env=env, check=True, timeout=1200)
    (log,) = folder.glob("wandb/offline-run-*/run-*.wandb")
    return log


def _row(step: int, rows: int) -> dict[str, float]:
    """The history row the writer above logs at `step`, as the API returns it."""
    return {
        "_step": step,
        "_timestamp": 1_795_000_000.0 + step * 0.5,
        "_runtime": step * 0.5,
        "lm loss": 10.0 - step / rows,
        "iteration-time": 0.5 + (step % 7) / 100,
        "learning-rate": 1e-4 * (step % 1000) / 1000,
        "grad-norm": 1.0 + (step % 13) / 10,
        "loss-scale": 1.0,
        "batch-size": 1024.0,
        "num-zeros": float(step % 5),
        "params-norm": 300.0 + step / rows,
    }


def served_run(rows: int) -> Any:
    """Answers for the replay server: the fixture run's responses, its name changed, with
    `rows` history rows (steps 1..rows) served page by page as the client asks for them."""
    recorded: dict[str, object] = json.loads((API / "tiny-team__tiny__3x7k2p9q.json").read_text())
    run = recorded["Run"]["data"]["project"]["run"]  # type: ignore[index]
    run.update(name=RUN_ID, historyLineCount=rows, historyKeys={"lastStep": rows, "keys": {}})

    def answer(operation: str, variables: dict[str, object]) -> object | None:
        if operation == "Run":
            return recorded["Run"]
        if operation == "RunHistoryKeys":
            return {"data": {"project": {"run": {"historyKeys": {"lastStep": rows, "keys": {}}}}}}
        if operation == "HistoryPage":
            low = max(1, int(str(variables.get("minStep", 0))))
            high = min(rows + 1, int(str(variables.get("maxStep", rows + 1))))
            page = [json.dumps(_row(step, rows)) for step in range(low, high)]
            return {"data": {"project": {"run": {"history": page}}}}
        return recorded.get(operation)  # the rest (viewer, files) as the fixture run's

    return answer


def pull(folder: Path, rows: int) -> str:
    """`summary --json --refresh` of the served run, through the real client, into the cache
    under `folder`; its stdout. The client gives up on a request left unanswered for
    `remote.answer_timeout()` seconds, which a heavily loaded machine can miss: the harness
    then stops with the client's message."""
    with replay_server(generate=served_run(rows)) as server:
        done = subprocess.run(
            [*SUMMARY, "-q", "--refresh", REFERENCE, "--json"],
            env=client_env(folder, server.base) | {"PYTHONPATH": str(ROOT)},
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode == 0:
        return done.stdout
    raise RuntimeError(f"pulling {REFERENCE} failed: {done.stderr.strip()[-300:]}")
