"""`loganalyzer --help` start-up, against the bare interpreter and `import polars`."""

from __future__ import annotations

from pathlib import Path

from bench.harness import PYTHON, Case, Command

NAME = "startup"


def cases(workdir: Path, quick: bool) -> list[Case]:
    return [
        Case(
            NAME,
            "--help",
            0,
            "",
            Command("loganalyzer --help", [PYTHON, "-m", "loganalyzer", "--help"]),
            (
                Command("python -c pass", [PYTHON, "-c", "pass"]),
                Command("python -c 'import polars'", [PYTHON, "-c", "import polars"]),
            ),
        )
    ]
