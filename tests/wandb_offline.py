"""Real W&B offline runs for the tests, written by `wandb` itself in a child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def write_offline_run(script: str, scratch: Path) -> Path:
    """Run `script` (which calls `wandb.init` and `run.finish`) offline under `scratch`, with
    no console capture and no settings of the machine's, and return its `.wandb` file."""
    env = dict(
        os.environ,
        WANDB_MODE="offline",
        WANDB_SILENT="true",
        WANDB_CONSOLE="off",
        WANDB_DIR=str(scratch),
        WANDB_CACHE_DIR=str(scratch / "cache"),
        WANDB_CONFIG_DIR=str(scratch / "config"),
    )
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=120)
    (path,) = (scratch / "wandb").glob("offline-run-*/run-*.wandb")
    return path
