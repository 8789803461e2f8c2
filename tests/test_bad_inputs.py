"""Every input of the hostile corpus through every command, as a user runs it: a subprocess
with a time and a memory limit, answering with its documented outcome and never a traceback.

The table is `tests/bad_inputs.py`; docs/troubleshooting.md is generated from it.
"""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path

import click
import pytest

from loganalyzer.cli import main
from loganalyzer.registry import load_registry
from tests.bad_inputs import CASES, PENDING, Case, troubleshooting_markdown
from tests.conftest import ROOT, UPDATE

# Address space, which counts what polars' allocator reserves and never touches (a summary of
# a small log reserves ~0.9 GB); resident memory is asserted separately, from rusage.
ADDRESS_SPACE_LIMIT = 2 << 30
RESIDENT_LIMIT_KB = 600 * 1024
# What must never reach a terminal unescaped (tab and newline are layout).
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]")
REPORTING_COMMANDS = ("summary", "report", "export")  # whichever of them the CLI has
# export writes the tables as read, without the analysis: it says what it wrote, not the
# analysis's warnings, so the documented message is checked on the analysing commands
ANALYSING_COMMANDS = ("summary", "report")
OUTPUT_SUFFIX = {"report": ".html", "export": ".parquet"}  # export tells the format by it


def _available(needs: str) -> bool:
    kind, _, name = needs.partition(":")
    if kind == "parser":
        return name in load_registry().parsers
    if kind == "option":
        summary = main.commands["summary"]
        return any(param.name == name for param in summary.params)
    return kind == "core"


def _commands() -> list[str]:
    return [name for name in REPORTING_COMMANDS if name in main.commands]


def _argv(command: str, sources: list[str], scratch: Path) -> list[str]:
    """The command line of `command` on `sources`: JSON on stdout where the command has
    `--json`, its output file in the scratch folder where it has an output option."""
    argv = [sys.executable, "-m", "loganalyzer", command, *sources]
    params = {param.name: param for param in main.commands[command].params}
    if "as_json" in params:
        argv.append("--json")
    for name in ("output", "out", "output_path"):
        option = params.get(name)
        if isinstance(option, click.Option):
            argv += [option.opts[0], str(scratch / f"{command}{OUTPUT_SUFFIX.get(command, '')}")]
            break
    return argv


def _limits() -> None:
    """Runs in the child before exec: bound its memory (its time is bounded by the parent)."""
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))


def run_case(case: Case, command: str, scratch: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        _argv(command, case.arguments(scratch), scratch),
        capture_output=True,
        timeout=case.seconds,
        preexec_fn=_limits,
        cwd=scratch,
        check=False,
    )
    # decoded by hand: text mode would turn a raw '\r' into a newline and hide it
    return subprocess.CompletedProcess(
        done.args,
        done.returncode,
        done.stdout.decode("utf-8", errors="replace"),
        done.stderr.decode("utf-8", errors="replace"),
    )


def assert_outcome(case: Case, command: str, done: subprocess.CompletedProcess[str]) -> None:
    where = f"{case.name} through {command}"
    assert "Traceback" not in done.stderr + done.stdout, f"{where}: {done.stderr[-2000:]}"
    assert "internal error" not in done.stderr, f"{where}: {done.stderr[-2000:]}"
    assert done.returncode == case.exit_code, f"{where}: {done.stderr[-2000:]}"
    raw = RAW_CONTROL.search(done.stdout + done.stderr)
    assert raw is None, f"{where}: a raw {raw[0]!r} reached the terminal"
    if case.message and command in ANALYSING_COMMANDS:
        assert case.message in done.stderr, f"{where}: {done.stderr[-2000:]}"
    if case.exit_code:  # an error is one line, naming the input
        errors = [line for line in done.stderr.splitlines() if line.startswith("Error: ")]
        assert len(errors) == 1, f"{where}: {done.stderr[-2000:]}"
    if command == "summary" and case.records is not None:
        assert json.loads(done.stdout)["iterations"]["logged"] == case.records, where
    if command == "export" and case.records is not None:  # every record kept reaches the file
        import polars as pl

        written = Path(str(done.args[done.args.index("-o") + 1]))
        assert pl.read_parquet(written).height == case.records, where


@pytest.mark.parametrize("command", _commands())
@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_bad_input_gets_its_documented_outcome(case: Case, command: str, tmp_path: Path) -> None:
    """Each a subprocess of its own, on the worker the test is given (a module fixture that
    started all 141 at once ran them on every xdist worker that took one of these tests)."""
    assert_outcome(case, command, run_case(case, command, tmp_path))
    # the largest resident size of any child so far: this one's, unless an earlier was larger
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    assert peak_kb < RESIDENT_LIMIT_KB, f"{case.name}: a child reached {peak_kb >> 10} MB"


def test_corpus_covers_at_least_thirty_kinds_with_unique_names() -> None:
    names = [case.name for case in CASES + PENDING]
    assert len(names) == len(set(names))
    assert len(CASES) >= 30


def test_every_committed_bad_fixture_is_a_row() -> None:
    used = {case.source for case in CASES if isinstance(case.source, str)}
    committed = {p.name for p in (ROOT / "fixtures" / "bad").iterdir() if p.is_file()}
    assert committed - {"README.md"} == used


def test_active_rows_need_only_what_is_registered() -> None:
    missing = [case.name for case in CASES if not _available(case.needs)]
    assert not missing, f"{missing} need what is not registered: move them to PENDING"


def test_pending_rows_wait_only_for_what_is_missing() -> None:
    """A pending row whose reader or option now exists must move into CASES and run."""
    ready = sorted({case.needs for case in PENDING if _available(case.needs)})
    assert not ready, (
        f"{ready} now exist: move their rows from PENDING to CASES in tests/bad_inputs.py "
        "and check their documented outcome"
    )


def test_docs_troubleshooting_is_generated_from_the_table() -> None:
    readme_path = ROOT / "docs" / "troubleshooting.md"
    readme = readme_path.read_text()
    start = "<!-- troubleshooting table: generated from tests/bad_inputs.py -->\n"
    section = re.compile(f"({re.escape(start)})(.*?)(<!-- end -->)", re.S)
    found = section.search(readme)
    assert found, "docs/troubleshooting.md lost its generated troubleshooting table"
    table = troubleshooting_markdown()
    if UPDATE:
        readme_path.write_text(section.sub(lambda m: m[1] + table + m[3], readme))
        return
    assert found[2] == table, "docs/troubleshooting.md is stale: LOGANALYZER_UPDATE_GOLDENS=1"
