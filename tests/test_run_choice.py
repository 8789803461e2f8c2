"""`report`, `export` and `compare` read runs as `summary` does: sources that hold several runs
are refused with the runs listed, `--split-runs` and `--run N` choose, `--refresh` pulls W&B
runs again; the options are the same ones (loganalyzer.commands.options)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.conftest import FIXTURES
from tests.test_wandb_remote import RUN
from tests.wandb_replay import client_env, replay_server

RESTARTS = FIXTURES / "megatron" / "restart_dir"
HIDDEN = "  hidden_size ..................................... 256"


def _two_runs(tmp_path: Path) -> Path:
    """A folder of two runs: the restart fixture's second launch given another model shape."""
    folder = tmp_path / "two"
    folder.mkdir()
    first, second = sorted(RESTARTS.iterdir())
    (folder / first.name).write_text(first.read_text())
    (folder / second.name).write_text(second.read_text().replace(HIDDEN, HIDDEN[:-3] + "512"))
    return folder


def _listing(folder: Path) -> str:
    return (
        f"Error: {folder} holds 2 different runs (model shape, GPUs, parallelism or iteration "
        "total differ, or the iteration counter starts again from 1):\n"
        f"  run 1: {folder}/slurm-1001.out: layers 2, hidden 256, 8 GPUs, TP=2 PP=2 DP=2 CP=1, "
        "iterations 10–50 of 100 (5 records)\n"
        f"  run 2: {folder}/slurm-1002.out: layers 2, hidden 512, 8 GPUs, TP=2 PP=2 DP=2 CP=1, "
        "iterations 40–100 of 100 (7 records)\n"
    )


@pytest.mark.parametrize(
    ("command", "hint"),
    [
        (["summary"], "Pick one with --run N, or report each with --split-runs."),
        (["report", "-o", "{out}/r.html"], "Pick one with --run N, or write a report for each"),
        (["export", "-o", "{out}/s.csv"], "Pick one with --run N, or export each with"),
    ],
)
def test_several_runs_are_refused_with_the_list(
    tmp_path: Path, command: list[str], hint: str
) -> None:
    folder = _two_runs(tmp_path)
    args = [part.replace("{out}", str(tmp_path)) for part in command]
    result = CliRunner().invoke(main, [*args, "-q", str(folder)])
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(_listing(folder) + hint)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["two"]  # nothing written


def test_compare_refuses_a_source_of_several_runs(tmp_path: Path) -> None:
    folder = _two_runs(tmp_path)
    result = CliRunner().invoke(main, ["compare", "-q", str(folder), str(RESTARTS)])
    assert result.exit_code == 1
    assert result.stderr == _listing(folder) + (
        "compare takes one run per SOURCE: name each run's files as a SOURCE of its own.\n"
    )


def test_compare_takes_each_run_of_the_folder_as_a_source(tmp_path: Path) -> None:
    folder = _two_runs(tmp_path)
    first, second = sorted(str(p) for p in folder.iterdir())
    result = CliRunner().invoke(main, ["compare", "-q", "--json", first, second])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["config_differences"]["hidden_size"] == ["256", "512"]


def test_report_split_runs_writes_one_report_per_run(tmp_path: Path) -> None:
    folder = _two_runs(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    result = CliRunner().invoke(
        main, ["report", "--split-runs", str(folder), "-o", str(out / "r.html")]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == ["r-run1.html", "r-run2.html"]
    wrote = [line for line in result.stderr.splitlines() if line.startswith("wrote ")]
    assert [line.split(" (")[0] for line in wrote] == [
        f"wrote {out}/r-run1.html",
        f"wrote {out}/r-run2.html",
    ]
    assert wrote[1].endswith(
        f"MB): run 2 of 2, {folder}/slurm-1002.out: layers 2, hidden 512, 8 GPUs, "
        "TP=2 PP=2 DP=2 CP=1, iterations 40–100 of 100 (7 records)"
    )
    assert "slurm-1001.out" in (out / "r-run1.html").read_text()
    assert "slurm-1002.out" not in (out / "r-run1.html").read_text()
    assert "slurm-1002.out" in (out / "r-run2.html").read_text()


def test_report_run_n_writes_that_run_to_the_output(tmp_path: Path) -> None:
    folder = _two_runs(tmp_path)
    output = tmp_path / "r.html"
    result = CliRunner().invoke(
        main, ["report", "-q", "--run", "2", str(folder), "-o", str(output)]
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    page = output.read_text()
    assert "slurm-1002.out" in page
    assert "slurm-1001.out" not in page


def test_export_split_runs_and_run_n(tmp_path: Path) -> None:
    folder = _two_runs(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    result = CliRunner().invoke(
        main, ["export", "-q", "--split-runs", str(folder), "-o", str(out / "s.csv")]
    )
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.iterdir()) == [
        "s-run1.csv",
        "s-run1.csv.config.json",
        "s-run2.csv",
        "s-run2.csv.config.json",
    ]
    assert (out / "s-run1.csv").read_text().count("\n") == 1 + 5
    assert (out / "s-run2.csv").read_text().count("\n") == 1 + 7
    config = json.loads((out / "s-run2.csv.config.json").read_text())
    assert config["config"]["hidden_size"]["value"] == 512
    chosen = CliRunner().invoke(
        main, ["export", "--run", "1", str(folder), "-o", str(tmp_path / "one.csv")]
    )
    assert chosen.exit_code == 0, chosen.output
    assert chosen.stderr.splitlines()[-1] == (
        f"wrote {tmp_path}/one.csv (5 rows) and {tmp_path}/one.csv.config.json"
    )


@pytest.mark.parametrize("command", ["summary", "report", "export"])
def test_split_runs_and_run_together_are_a_usage_error(tmp_path: Path, command: str) -> None:
    folder = _two_runs(tmp_path)
    output = [] if command == "summary" else ["-o", str(tmp_path / f"x.{command}.csv")]
    both = CliRunner().invoke(main, [command, "--split-runs", "--run", "1", str(folder), *output])
    assert both.exit_code == 2
    assert "give --split-runs or --run N, not both" in both.stderr
    too_far = CliRunner().invoke(main, [command, "--run", "3", str(folder), *output])
    assert too_far.exit_code == 2
    assert "3: the sources hold 2 runs" in too_far.stderr


def test_the_options_are_the_same_ones_everywhere() -> None:
    """One definition each: the same name, type and help wherever a command has it."""
    commands = {name: main.commands[name] for name in ("summary", "report", "export", "compare")}

    def option(command: click.Command, name: str) -> dict[str, object] | None:
        found = next((p for p in command.params if p.name == name), None)
        if found is None:
            return None
        info = found.to_info_dict()
        return {k: info[k] for k in ("opts", "type", "help", "default", "is_flag")}

    for name in ("run_number", "refresh", "forced_format", "quiet"):
        shown = [option(command, name) for command in commands.values()]
        has = [s for s in shown if s is not None]
        assert all(s == has[0] for s in has), name
    assert all(option(c, "refresh") is not None for c in commands.values())
    assert option(commands["compare"], "run_number") is None  # one run per SOURCE
    for name in ("summary", "report", "export"):
        assert option(commands[name], "run_number") is not None
        assert option(commands[name], "split_runs") is not None


def test_refresh_pulls_again_for_export_and_report(tmp_path: Path) -> None:
    """Through real processes: export pulls the run and caches it, report reads the cache,
    report --refresh pulls again."""
    with replay_server() as server:
        env = client_env(tmp_path, server.base)

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [sys.executable, "-m", "loganalyzer", *args, "-q", RUN],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )

        pulled = run("export", "-o", str(tmp_path / "w.csv"))
        assert pulled.returncode == 0, pulled.stderr
        assert "HistoryPage" in server.requests
        assert (tmp_path / "w.csv").read_text().count("\n") == 1 + 20
        server.requests.clear()
        cached = run("report", "-o", str(tmp_path / "w.html"))
        assert cached.returncode == 0, cached.stderr
        assert server.requests == []
        refreshed = run("report", "--refresh", "-o", str(tmp_path / "w.html"))
        assert refreshed.returncode == 0, refreshed.stderr
        assert "HistoryPage" in server.requests
