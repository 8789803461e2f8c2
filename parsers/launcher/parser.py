"""The plugin: detection by the ending lines at either end of the file, and a Run of them."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from loganalyzer.endings import candidates, read_endings
from loganalyzer.errors import InputError, NothingReadError
from loganalyzer.model import ITERATION_SCHEMA, Run, SourceInfo, empty_metrics
from loganalyzer.sources import open_binary, text_head
from loganalyzer.textlog import scanned_chunks

# Below every framework parser's score: a file any of them reads is theirs.
DETECT_SCORE = 0.05
# The end of a file read for detection besides its head: an ending is at the end.
TAIL_BYTES = 64 * 1024
# Lines that say a run ended, strongly enough to claim a file (not a mere "Error").
ENDING_MARKERS = re.compile(
    r"Traceback \(most recent call last\)|CANCELLED AT|ChildFailedError"
    r"|Root Cause \(first observed failure\)|Watchdog caught collective operation timeout"
    r"|exits with return code|srun: error|exited with exit code|failed \(exitcode: "
    r"|found NaN in local grad norm|Unexpected result nan|CUDA out of memory"
    r"|CUDA error: |\[after training is done\]|exiting program (?:after|at iteration)"
    r"|terminate called after throwing|exitCode: [1-9-]|detected by watchdog"
    r"|watchdog got stuck"
)


class LauncherParser:
    """How a run ended, from a text log no framework parser reads (the plugin API is in
    loganalyzer.plugin)."""

    name = "launcher"
    description = (
        "how a run ended, from any text log: tracebacks, slurm, torchrun, DeepSpeed/pdsh "
        "launcher lines (a log with no records of a known format)"
    )
    # the launchers and schedulers whose real lines the tests read (fixtures/launcher,
    # fixtures/endings)
    tested_on = (
        "slurm srun/slurmstepd (cancel, time limit, preemption, node failure)",
        "torchrun elastic agent (torch 2.4 ChildFailedError, exitcode lines)",
        "deepspeed launcher (2020, 2023)",
        "PyTorch NCCL watchdog (torch 1.x and 2.x wordings)",
        "Kubeflow training operator (PyTorchJob)",
    )

    def detect(self, path: Path) -> float:
        head = text_head(path)
        if head is None:
            return 0.0
        if ENDING_MARKERS.search(head) or ENDING_MARKERS.search(_tail(path)):
            return DETECT_SCORE
        return 0.0

    def parse(self, path: Path) -> Run:
        source = str(path)
        endings = read_endings(scanned_chunks(path, candidates), source)
        if not endings.facts:
            raise NothingReadError(f"{source}: no traceback, launcher or scheduler line found")
        return Run(
            framework="unknown",
            config={},
            table=pl.DataFrame(schema=dict(ITERATION_SCHEMA)),
            metrics=empty_metrics(),
            sources=[SourceInfo(source, self.name, 0)],
            warnings=[f"{source}: no records of a known format: only how the run ended is read"],
            endings=endings,
        )


def _tail(path: Path) -> str:
    """The last `TAIL_BYTES` of a plain file, decoded ('' for a compressed or unreadable
    one: its head is all detection reads)."""
    try:
        size = path.stat().st_size
        if size <= TAIL_BYTES:
            return ""  # the head held it all
        with open_binary(path) as stream:
            if stream.read(2) == b"\x1f\x8b":
                return ""
            stream.seek(size - TAIL_BYTES)
            return stream.read(TAIL_BYTES).decode("utf-8", errors="replace")
    except (OSError, ValueError, InputError):
        return ""
