"""stdout logs: `loganalyzer summary --json` on a large Megatron-LM log of each format,
against `grep -c` and the per-field script on the same file."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from bench.generate import write_log
from bench.harness import PYTHON, ROOT, Case, Command

NAME = "stdout"
FULL_MB = 1024
QUICK_MB = 100


def summary_command(
    target: Path, iterations: int, label: str = "loganalyzer summary --json"
) -> Command:
    """`loganalyzer summary TARGET --json`, checked against the iteration lines written."""
    return Command(
        label,
        [PYTHON, "-m", "loganalyzer", "summary", "-q", str(target), "--json"],
        check=_logged(iterations),
    )


def _logged(expected: int) -> Callable[[str], str | None]:
    def check(output: str) -> str | None:
        logged = json.loads(output)["iterations"]["logged"]
        return None if logged == expected else f"{logged} iterations logged, {expected} written"

    return check


def cases(workdir: Path, quick: bool) -> list[Case]:
    size_mb = QUICK_MB if quick else FULL_MB
    found = []
    for kind, what in (("current", "Megatron-LM core 0.12"), ("legacy", "Megatron-LM 2021")):
        path = workdir / f"{kind}.log"
        iterations = write_log(path, size_mb << 20, kind)
        megabytes = path.stat().st_size / 1e6
        found.append(
            Case(
                NAME,
                f"{what}, {megabytes:,.0f} MB, {iterations:,} iterations",
                megabytes,
                "MB",
                summary_command(path, iterations),
                (
                    Command("grep -c iteration", ["grep", "-c", "iteration", str(path)]),
                    Command(
                        "per-field script",
                        [PYTHON, str(ROOT / "bench" / "field_script.py"), str(path)],
                        check=lambda out, n=iterations: (
                            None if int(out) == n else f"{out.strip()} lines"
                        ),
                    ),
                ),
            )
        )
    return found
