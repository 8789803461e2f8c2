"""W&B: `summary --json` of a large offline run written by `wandb` itself, against reading
every history value of the same `.wandb` file with wandb's protobuf classes; and the re-read
of a run pulled by ID from loganalyzer's cache, against its first pull (through the tests'
loopback replay server: no network)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.harness import PYTHON, Case, Command, child_argv
from bench.stage_stdout import summary_command
from bench.wandb_inputs import REFERENCE, write_offline_run

NAME = "wandb"
FULL_ROWS = 50_000
QUICK_ROWS = 5_000
# Where the re-read would go if it asked the server: a closed port, so it would fail.
NOWHERE = "http://127.0.0.1:9"


def cases(workdir: Path, quick: bool) -> list[Case]:
    rows = QUICK_ROWS if quick else FULL_ROWS
    log = write_offline_run(workdir / "offline", rows)
    megabytes = log.stat().st_size / 1e6
    # The first pulls (timed, before the re-read: `baselines_first`) fill the cache the
    # re-read reads.
    pulled = workdir / "pulled"
    reread = Command(
        "summary --json wandb:… (cached)",
        [
            "env",
            f"XDG_CACHE_HOME={pulled / 'cache'}",
            f"WANDB_BASE_URL={NOWHERE}",
            PYTHON,
            "-m",
            "loganalyzer",
            "summary",
            "-q",
            REFERENCE,
            "--json",
        ],
        check=summary_command(log, rows).check,
    )
    first_pull = Command(
        "first pull by ID (loopback server)",
        child_argv("wandb-pull", str(pulled), str(rows)),
        check=summary_command(log, rows).check,
    )
    return [
        Case(
            NAME,
            f"offline run by wandb, {rows:,} rows, {megabytes:,.1f} MB",
            rows,
            "rows",
            summary_command(log, rows),
            (
                Command(
                    "wandb protobuf + json, history values",
                    child_argv("wandb-reference", str(log)),
                    check=_history_rows(rows),
                ),
            ),
        ),
        Case(
            NAME,
            f"run pulled by ID, {rows:,} rows",
            rows,
            "rows",
            reread,
            (first_pull,),
            baselines_first=True,
        ),
    ]


def _history_rows(expected: int) -> Callable[[str], str | None]:
    def check(output: str) -> str | None:
        found = int(output.split()[0])
        return None if found == expected else f"{found} history rows read, {expected} logged"

    return check
