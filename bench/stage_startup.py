"""Start-up: `loganalyzer --help`, and `summary` of the bundled example (the README's first
command, a 29 KB Megatron-LM log), each against the bare interpreter and `import polars`."""

from __future__ import annotations

from pathlib import Path

from bench.harness import PYTHON, ROOT, Case, Command

NAME = "startup"
EXAMPLE = ROOT / "fixtures" / "megatron" / "bigscience_gpt2_tp4_pp8.out"


def cases(workdir: Path, quick: bool) -> list[Case]:
    return [
        Case(NAME, "--help", 0, "", Command("loganalyzer --help", _loganalyzer("--help")), _bare()),
        Case(
            NAME,
            f"bundled example ({EXAMPLE.stat().st_size / 1000:.0f} KB)",
            0,
            "",
            Command(
                "loganalyzer summary",
                _loganalyzer("summary", str(EXAMPLE.relative_to(ROOT)), "--gpu", "v100-sxm2"),
                _summarised,
            ),
            _bare(),
        ),
    ]


def _loganalyzer(*args: str) -> list[str]:
    return [PYTHON, "-m", "loganalyzer", *args]


def _bare() -> tuple[Command, ...]:
    return (
        Command("python -c pass", [PYTHON, "-c", "pass"]),
        Command("python -c 'import polars'", [PYTHON, "-c", "import polars"]),
    )


def _summarised(output: str) -> str | None:
    """The terminal summary, with its MFU, was printed."""
    return None if "MFU" in output else "no MFU in the summary"
