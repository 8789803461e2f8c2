"""The README's set-up command and pasted output are what the tool does today."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.conftest import ROOT, scrub

README = (ROOT / "README.md").read_text()
EXAMPLE = re.search(r"```text\n\$ loganalyzer (summary [^\n]+)\n(.*?)```", README, re.S)
# A crashed run's first lines, in the section on how runs end.
ENDING = re.search(r"```console\n\$ loganalyzer (summary [^\n]+)\n(.*?)```", README, re.S)


def test_readme_example_output_is_what_summary_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    assert EXAMPLE, "README lost its example output block"
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, [*EXAMPLE[1].split(), "-q"])
    assert result.exit_code == 0
    assert scrub(result.stdout) == scrub(EXAMPLE[2])


def test_readme_first_command_runs_the_same_example() -> None:
    assert EXAMPLE
    setup = [line for line in README.splitlines() if line.startswith("python3 -m venv")]
    assert setup[0].endswith(f".venv/bin/loganalyzer {EXAMPLE[1]}")
    assert setup[1].endswith(".venv/bin/python -m pytest")


def test_readme_ending_example_is_how_summary_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ENDING, "README lost its example of a crashed run's first lines"
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, [*ENDING[1].split(), "-q"])
    assert result.exit_code == 0
    shown = ENDING[2].splitlines()
    assert result.stdout.splitlines()[: len(shown)] == shown
