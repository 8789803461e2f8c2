"""The W&B plugin for run folders: a `run-<id>.wandb` transaction log (offline or synced
runs, wandb 0.16 to today) into a Run, with no network; and runs named by ID or URL.

This module is what the registry loads for every command, so it imports neither numpy nor
the reading modules: `parse` imports `reader`, and detection reads a log's header only for a
`.wandb` file.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from loganalyzer.parsers.wandb.remote import parse_ref

if TYPE_CHECKING:  # polars (under Run) loads with the reading, not with the registry
    from loganalyzer.model import Run


class WandbParser:
    """W&B runs (the plugin API is in loganalyzer.plugin)."""

    name = "wandb"
    description = (
        "W&B runs: offline and synced run folders (run-<id>.wandb, wandb 0.16 to today), and"
        " runs by ID or URL through the W&B API (network; cached): history, config, summary,"
        " system metrics, GPU"
    )
    schemes = ("wandb", "https", "http")
    # the clients whose real output the tests read (fixtures/wandb, fixtures/wandb_api, the
    # shared generated HF Trainer run)
    tested_on = (
        "wandb 0.16.6 (offline .wandb)",
        "wandb 0.31.0 (offline .wandb; HF Trainer 4.57.6 WandbCallback)",
        "W&B API as the wandb 0.31.0 client queries it",
    )

    def detect(self, path: Path | str) -> float:
        if isinstance(path, str):
            return 0.95 if parse_ref(path) is not None else 0.0
        if not path.is_file() or path.suffix != ".wandb":
            return 0.0
        from loganalyzer.parsers.wandb.transaction_log import is_transaction_log

        try:
            with path.open("rb") as stream:
                return 0.95 if is_transaction_log(stream.read(7)) else 0.0
        except OSError:
            return 0.0

    def parse(self, path: Path | str) -> Run:
        from loganalyzer.parsers.wandb.reader import read_pulled_run, read_run_folder

        run: Run = (
            read_pulled_run(path, self.name)
            if isinstance(path, str)
            else read_run_folder(path, self.name)
        )
        return run
