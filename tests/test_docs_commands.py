"""Every command the README and the docs show runs as shown.

The commands name inputs by the names a user would have (`slurm-1234.out`, `logs/`); each name
stands for a bundled fixture of that kind, linked under that name in a scratch folder where the
command runs. A name that is not linked makes its command fail (exit 1: no such file), so a new
example must come with its input. The few commands that need the network, a cluster or a fresh
machine are listed in `NOT_RUN` with the test or job that runs them instead.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.conftest import FIXTURES, ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# Each name the examples use, and the bundled input that plays it.
INPUTS = {
    "slurm-1234.out": FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out",
    "logs": FIXTURES / "megatron" / "restart_dir",
    "before": FIXTURES / "megatron" / "restart_dir",
    "after": FIXTURES / "megatron" / "core_0_12_llama3_8b_throughput.log",
    "ds_train.log": FIXTURES / "deepspeed" / "info_level.log",
    "output_dir": FIXTURES / "hf_trainer" / "plain",
    "runs/tb": FIXTURES / "tensorboard" / "megatron",
    "wandb": FIXTURES / "wandb" / "current" / "wandb",
    "benchmarks/a.out": FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out",
    "benchmarks/b.log": FIXTURES / "megatron" / "core_0_12_llama3_8b_throughput.log",
    "runs/restarted": FIXTURES / "megatron" / "restart_dir",
    "runs/deepspeed": FIXTURES / "deepspeed" / "overflow_fp16.log",
}

# Commands run elsewhere: by CI itself, by other tests (against a local server), or not at all
# here because they need what a test machine has not (a cluster, a bucket).
NOT_RUN = {
    "pip install": "installs a package (CI installs the project itself)",
    "python3 -m venv": "the set-up commands: CI runs them on a fresh clone",
    "python -m bench": "benchmarks, not tests: minutes of generated input",
    "wandb:": "the W&B API: tests/test_wandb_remote.py runs it against a local server",
    "wandb-runs.txt": "W&B references: tests/test_fleet_runs.py indexes them from a local server",
    "--engine ray": "a Ray cluster: tests/test_fleet_index.py runs a local one",
}

# Gates exit 4 when the run does not pass them.
GATES = ("--fail-under-mfu", "--fail-on-crash")


def commands() -> list[tuple[str, str]]:
    """(page, command) for every command line in a shell block of the README and the docs."""
    found = []
    for page in PAGES:
        for block in re.findall(r"```(?:sh|bash)\n(.*?)```", page.read_text(), re.S):
            for line in block.replace("\\\n", " ").splitlines():
                command = line.split("  #")[0].strip()
                if command:
                    found.append((page.name, command))
    return found


def _runnable(command: str) -> bool:
    return not any(marker in command for marker in NOT_RUN)


def _declared_example() -> dict[str, str]:
    """The declared-format page's own example: its format file and the log it reads."""
    page = (ROOT / "docs" / "declared-formats.md").read_text()
    toml = page.split("```toml\n", 1)[1].split("```", 1)[0]
    log = page.split("A log it reads (`train.log` above):\n\n```text\n", 1)[1].split("```", 1)[0]
    return {"my_loop.toml": toml, "train.log": log}


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    for name, target in INPUTS.items():
        link = folder / name
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
    for name, text in _declared_example().items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_every_page_shows_commands_and_most_run() -> None:
    shown = commands()
    run = [command for _, command in shown if _runnable(command)]
    assert len(run) >= 20
    assert {page for page, _ in shown} >= {"README.md", "index.md", "fleet.md"}


def _run(page: str, command: str, scratch: Path) -> None:
    words = shlex.split(command)
    assert words[0] == "loganalyzer", f"{page}: {command!r} is not a loganalyzer command"
    target = None
    if ">" in words:  # `... > run.json`: what stdout would hold
        target = scratch / words[words.index(">") + 1]
        words = words[: words.index(">")]
    result = CliRunner().invoke(main, words[1:])
    allowed = {0, 4} if any(gate in words for gate in GATES) else {0}
    assert result.exit_code in allowed, f"{page}: {command}\n{result.stderr}{result.output}"
    assert result.exception is None or isinstance(result.exception, SystemExit)
    if target is not None:
        target.write_text(result.stdout)
        assert target.stat().st_size > 0


# A page's commands run in their order, in one test: `fleet` reads what `index` wrote.
@pytest.mark.parametrize("page", sorted({page for page, _ in commands()}))
def test_every_command_of_a_page_runs_as_shown(
    page: str, scratch: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(scratch)
    shown = [command for name, command in commands() if name == page and _runnable(command)]
    for command in shown:
        _run(page, command, scratch)
