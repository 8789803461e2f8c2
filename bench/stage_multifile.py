"""A run directory of 64 rank logs: `summary` of the directory against `summary` of one file
holding the same bytes (one process on one file), so the ratio is what reading several
files at once gains."""

from __future__ import annotations

import shutil
from pathlib import Path

from bench.generate import write_run_dir
from bench.harness import Case
from bench.stage_stdout import summary_command

NAME = "multifile"
FILES = 64
FULL_MB = 20
QUICK_MB = 2


def cases(workdir: Path, quick: bool) -> list[Case]:
    folder = workdir / "run"
    iterations = write_run_dir(folder, FILES, (QUICK_MB if quick else FULL_MB) << 20)
    joined = workdir / "run-joined.log"
    with joined.open("wb") as out:
        for part in sorted(folder.iterdir()):
            with part.open("rb") as source:
                shutil.copyfileobj(source, out)
    megabytes = joined.stat().st_size / 1e6
    return [
        Case(
            NAME,
            f"{FILES} logs, {megabytes:,.0f} MB in all",
            megabytes,
            "MB",
            summary_command(folder, iterations, "summary --json DIR"),
            (summary_command(joined, iterations, "summary --json one file"),),
        )
    ]
