"""The README's set-up commands and the outputs pasted in it and in the docs are what the tool
does today."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.conftest import ROOT, scrub

README = (ROOT / "README.md").read_text()
DOCS = ROOT / "docs"
OUTPUT_BLOCK = r"```{kind}\n\$ loganalyzer (summary [^\n]+)\n(.*?)```"
# The README shows the opening of the bundled example's summary, ended by a line "…".
SHORT = re.search(OUTPUT_BLOCK.format(kind="text"), README, re.S)
# Getting started shows the whole of it.
WHOLE = re.search(OUTPUT_BLOCK.format(kind="text"), (DOCS / "index.md").read_text(), re.S)
# A crashed run's first lines, on the page about how runs end.
ENDING = re.search(OUTPUT_BLOCK.format(kind="console"), (DOCS / "endings.md").read_text(), re.S)


def _summary(command: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, [*command.split(), "-q"])
    assert result.exit_code == 0
    return result.stdout


def test_getting_started_example_is_what_summary_prints(monkeypatch: pytest.MonkeyPatch) -> None:
    assert WHOLE, "docs/index.md lost its example output block"
    assert scrub(_summary(WHOLE[1], monkeypatch)) == scrub(WHOLE[2])


def test_readme_example_is_the_opening_of_the_same_output(monkeypatch: pytest.MonkeyPatch) -> None:
    assert SHORT and WHOLE, "README lost its example output block"
    assert SHORT[1] == WHOLE[1]
    shown = scrub(SHORT[2]).splitlines()
    assert shown[-1] == "…"
    printed = scrub(_summary(SHORT[1], monkeypatch)).splitlines()
    assert printed[: len(shown) - 1] == shown[:-1]


def test_readme_first_command_runs_the_same_example() -> None:
    assert SHORT
    setup = [line for line in README.splitlines() if line.startswith("python3 -m venv")]
    assert setup[0].endswith(f".venv/bin/loganalyzer {SHORT[1]}")
    assert setup[1].endswith(".venv/bin/python -m pytest -n auto")


def test_readme_stays_short() -> None:
    assert len(README.splitlines()) <= 150


def test_ending_example_is_how_summary_opens(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ENDING, "docs/endings.md lost its example of a crashed run's first lines"
    shown = ENDING[2].splitlines()
    assert _summary(ENDING[1], monkeypatch).splitlines()[: len(shown)] == shown
