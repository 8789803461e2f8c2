"""The command line: exact output, exit codes, stdout/stderr separation, a real subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.errors import UnrecognisedSourceError
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES

SAMPLE = str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out")


def test_parsers_lists_the_builtin_parsers() -> None:
    result = CliRunner().invoke(main, ["parsers"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    # names are padded to the longest registered name (a declared format's among them)
    (line,) = [" ".join(line.split()) for line in lines if line.startswith("megatron ")]
    assert line.startswith(
        "megatron Megatron-LM (2021 to today) and Megatron-DeepSpeed stdout logs [loganalyzer]"
        " tested on: Megatron-LM of 2021 (BigScience), "
    )


def test_parsers_json() -> None:
    result = CliRunner().invoke(main, ["parsers", "--json"])
    doc = json.loads(result.output)
    assert {"deepspeed", "hf_trainer", "megatron", "tensorboard", "wandb"} <= {
        p["name"] for p in doc["parsers"]
    }
    assert doc["broken"] == {}


def test_summary_json_goes_to_stdout_and_progress_to_stderr() -> None:
    result = CliRunner().invoke(main, ["summary", "--json", SAMPLE])
    assert result.exit_code == 0
    doc = json.loads(result.stdout)
    assert doc["schema"] == "loganalyzer.summary/1.3"
    assert "reading" in result.stderr
    assert "reading" not in result.stdout


def test_unrecognised_file_exits_3_with_the_scores(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("nothing a parser knows\n")
    result = CliRunner().invoke(main, ["summary", str(path)])
    assert result.exit_code == 3
    # every registered parser's score, the declared formats' among them
    scores = ", ".join(f"{name}=0.00" for name in sorted(load_registry().parsers))
    builtin = ("maxtext", "megatron", "nanotron", "nemo", "torchtitan", "nanogpt", "litgpt")
    assert all(f"{name}=0.00" in scores for name in builtin)
    assert result.stderr == (
        f"Error: {path}: no registered parser recognises this file ({scores}); "
        "`loganalyzer parsers` lists the formats read (a parser plugin adds others)\n"
    )


def test_missing_file_exits_1_with_one_line() -> None:
    result = CliRunner().invoke(main, ["summary", "does-not-exist.log"])
    assert result.exit_code == 1
    assert result.stderr == "Error: does-not-exist.log: no such file or directory\n"


def test_unknown_format_exits_3() -> None:
    result = CliRunner().invoke(main, ["summary", "--format", "nope", SAMPLE])
    assert result.exit_code == 3
    known = ", ".join(sorted(load_registry().parsers))
    assert f"unknown format 'nope'; registered parsers: {known}" in result.stderr
    assert "deepspeed, hf_trainer" in known


def test_usage_error_exits_2() -> None:
    result = CliRunner().invoke(main, ["summary"])
    assert result.exit_code == 2


def test_directory_lists_what_it_ignores(tmp_path: Path) -> None:
    (tmp_path / "run.out").write_bytes(Path(SAMPLE).read_bytes())
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "launch.sh").write_text("cd /opt/Megatron-LM && torchrun pretrain_gpt.py\n")
    result = CliRunner().invoke(main, ["summary", "--json", str(tmp_path)])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["ignored"] == [
        {
            "path": str(tmp_path / "launch.sh"),
            "reason": f"{tmp_path / 'launch.sh'}: no Megatron iteration lines or arguments found",
        },
        {"path": str(tmp_path / "notes.txt"), "reason": "no parser recognises it"},
    ]
    assert f"ignored {tmp_path / 'notes.txt'}: no parser recognises it" in result.stderr


def test_forced_format_on_a_directory_passes_over_what_it_cannot_read(tmp_path: Path) -> None:
    (tmp_path / "run.out").write_bytes(Path(SAMPLE).read_bytes())
    (tmp_path / "notes.txt").write_text("hello\n")
    result = CliRunner().invoke(
        main, ["summary", "-q", "--json", "--format", "megatron", str(tmp_path)]
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout)["iterations"]["logged"] == 20


def test_truncated_gzip_keeps_its_head_and_fake_gzip_exits_1(tmp_path: Path) -> None:
    import gzip

    cut = tmp_path / "cut.log.gz"
    cut.write_bytes(gzip.compress(Path(SAMPLE).read_bytes())[:2000])
    result = CliRunner().invoke(main, ["summary", str(cut)])
    assert result.exit_code == 0
    # the terminal summary lists its warnings itself
    assert f"{cut}: the compressed data ends early at offset 2000" in result.stdout
    fake = tmp_path / "fake.gz"
    fake.write_bytes(b"\x1f\x8bnot really gzip")
    result = CliRunner().invoke(main, ["summary", str(fake)])
    assert result.exit_code == 1
    assert result.stderr.startswith(f"Error: {fake}: cannot be read (")


def test_help_has_examples() -> None:
    result = CliRunner().invoke(main, ["summary", "--help"])
    assert "Examples:" in result.output
    assert "loganalyzer summary logs/ --json > summary.json" in result.output


def test_real_subprocess_never_shows_a_traceback(tmp_path: Path) -> None:
    binary = tmp_path / "junk.log"
    binary.write_bytes(b"\x00\xff" * 5000)
    done = subprocess.run(
        [sys.executable, "-m", "loganalyzer", "summary", str(binary)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 3
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    ok = subprocess.run(
        [sys.executable, "-m", "loganalyzer", "summary", "--json", SAMPLE],
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(ok.stdout)["iterations"]["logged"] == 20


def test_quiet_summary_writes_nothing_to_stderr() -> None:
    result = CliRunner().invoke(main, ["summary", "-q", SAMPLE, "--gpu", "v100-sxm2"])
    assert result.exit_code == 0
    assert result.stderr == ""
    assert "warning(s) on stderr" not in result.stdout


def test_empty_file_exits_1(tmp_path: Path) -> None:
    empty = tmp_path / "empty.log"
    empty.write_text("")
    result = CliRunner().invoke(main, ["summary", str(empty)])
    assert result.exit_code == 1
    assert result.stderr == f"Error: {empty}: the file is empty\n"


def test_broken_timers_printing_nan_or_inf_are_not_analysed(tmp_path: Path) -> None:
    line = " iteration {:8d}/     100 | elapsed time per iteration (ms): {} | lm loss: {} |"
    times = ["100.0", "nan", "101.0", "inf", "99.0", "100.5"]
    log = tmp_path / "run.log"
    log.write_text("\n".join(line.format(i, t, "nan") for i, t in enumerate(times, 1)) + "\n")
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(log)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["iterations"]["logged"] == 6
    assert doc["step_time_s"]["max"] == 0.101
    assert doc["slow_steps"] == []
    text = CliRunner().invoke(main, ["summary", "-q", str(log)])
    assert text.exit_code == 0


def test_a_reader_closing_the_pipe_early_is_not_an_error(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import loganalyzer.cli as cli

    def closed_pipe(*args: object, **kwargs: object) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(cli.click, "echo", closed_pipe)
    with pytest.raises(SystemExit) as done:
        cli.main(["parsers"], standalone_mode=False)
    assert done.value.code == 0
    assert "Error" not in capfd.readouterr().err


def test_debug_works_after_the_subcommand_too(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("nothing a parser reads\n")
    result = CliRunner().invoke(main, ["summary", str(path), "--debug"])
    assert isinstance(result.exception, UnrecognisedSourceError)  # raised, not turned to a line
    result = CliRunner().invoke(main, ["summary", str(path)])
    assert result.exit_code == 3 and "Traceback" not in result.output


def test_micro_batch_size_flag_feeds_the_pipeline_bubble() -> None:
    """The 30B run logs micro-batch 1 (4 micro-batches at PP=8); --micro-batch-size 2 halves
    them, and the bubble (p-1)/(m + p-1) grows from 7/11 to 7/9."""
    base = ["summary", "-q", "--json", SAMPLE, "--gpu", "v100-sxm2"]
    logged = json.loads(CliRunner().invoke(main, base).stdout)
    flagged = json.loads(CliRunner().invoke(main, [*base, "--micro-batch-size", "2"]).stdout)
    bubble = [
        next(s for s in doc["waterfall"]["steps"] if s["name"] == "pipeline bubble")["factor"]
        for doc in (logged, flagged)
    ]
    assert bubble == pytest.approx([1 - 7 / 11, 1 - 7 / 9])
    assert any("--micro-batch-size 2 overrides the log's 1" in w for w in flagged["warnings"])
