"""Hostile inputs and outputs: JSON nested past any framework's, an output device that is
full or closed, values too long to show, names that would act on the terminal, and W&B
references that would leave the cache."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from loganalyzer import jsontext
from loganalyzer.cli import main
from loganalyzer.parsers.wandb import remote
from loganalyzer.render.clip import MAX_SHOWN, clip
from tests.conftest import FIXTURES
from tests.hostile import write_hostile_log

PLAIN = FIXTURES / "hf_trainer" / "plain"
DEEP = "[" * 100_000 + "]" * 100_000


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def test_json_depth_is_bounded() -> None:
    assert jsontext.loads(_nested(jsontext.MAX_DEPTH)) is not None
    for levels in (jsontext.MAX_DEPTH + 1, 100_000):
        with pytest.raises(jsontext.TooDeepError):
            jsontext.loads(_nested(levels))
    assert jsontext.depth({"a": [1, {"b": []}], "c": 2}) == 4
    assert jsontext.depth(7) == 0


@pytest.mark.parametrize("name", ["trainer_state.json", "config.json", "all_results.json"])
def test_an_output_dir_file_nested_100000_deep_is_a_one_line_error(
    tmp_path: Path, name: str
) -> None:
    root = tmp_path / "out"
    shutil.copytree(PLAIN, root)
    path = root / name
    if name == "trainer_state.json":
        path.write_text('{"global_step": 40, "log_history": ' + DEEP + "}")
    else:
        path.write_text('{"a": ' + DEEP + "}")
    result = CliRunner().invoke(main, ["summary", str(root / "trainer_state.json"), "--quiet"])
    assert result.exit_code == 1, result.output
    assert result.stderr == f"Error: {path}: JSON nested deeper than 100 levels; not read\n"


def test_a_deepspeed_config_nested_100000_deep_is_a_warning(tmp_path: Path) -> None:
    log = next((FIXTURES / "deepspeed").glob("*.log"))
    shutil.copy(log, tmp_path / log.name)
    (tmp_path / "ds_config.json").write_text('{"a": ' + DEEP + "}")
    result = CliRunner().invoke(main, ["summary", str(tmp_path / log.name), "--json"])
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert any("ds_config.json: not read (JSON nested deeper than 100" in w for w in warnings)


def test_a_wandb_value_nested_100000_deep_is_kept_as_its_text() -> None:
    from loganalyzer.parsers.wandb.records import loads

    assert loads(DEEP) == DEEP


HOSTILE_NAME = "run\x1b]52;c;cHduZWQ=\x07\u202eevil\x9d0;title\x9c"
RAW = ("\x1b", "\x07", "\u202e", "\x9d", "\x9c")


def test_a_hostile_folder_name_never_reaches_the_terminal_raw(tmp_path: Path) -> None:
    """An OSC 52 (clipboard write), a BEL, a right-to-left override and the 8-bit OSC and
    ST in folder names: escaped in summary's "reading" line, index's warnings and summary
    line, fleet's text; the same helper for every printer."""
    root = tmp_path / "root"
    good = root / HOSTILE_NAME
    shutil.copytree(PLAIN, good)
    broken = root / (HOSTILE_NAME + "-broken")
    broken.mkdir()
    (broken / "trainer_state.json").write_text('{"log_history": [{"step": 1, "loss"')
    dataset = tmp_path / "ds"
    runner = CliRunner()
    outputs = [
        runner.invoke(main, ["summary", str(good / "trainer_state.json")]),
        runner.invoke(main, ["index", str(root), "--out", str(dataset)]),
        runner.invoke(main, ["fleet", str(dataset)]),
        runner.invoke(main, ["summary", str(broken / "trainer_state.json")]),
    ]
    for result in outputs:
        for stream in (result.stdout, result.stderr):
            assert not any(c in stream for c in RAW), repr(stream)
    summary, index, fleet, failed = outputs
    assert "run\\x1b]52;c;cHduZWQ=\\x07\\u202eevil\\x9d0;title\\x9c" in summary.stderr
    assert "reading " in summary.stderr
    assert "warning: " in index.stderr and "\\u202eevil" in index.stderr
    assert "\\u202eevil" in fleet.stdout
    assert failed.exit_code == 1 and "\\u202eevil" in failed.stderr


def test_every_printer_goes_through_the_terminal_helper() -> None:
    """Nothing in the package prints but `loganalyzer.terminal.echo` (which escapes)."""
    package = Path(__file__).resolve().parents[1]
    printers = re.compile(r"click\.(echo|secho)\(|\bprint\(|sys\.std(out|err)\.write\(")
    found = [
        f"{path.relative_to(package)}:{number}"
        for folder in ("loganalyzer", "parsers")
        for path in sorted((package / folder).rglob("*.py"))
        if path.name != "terminal.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if printers.search(line) and not line.lstrip().startswith("#")
    ]
    assert found == []


def _cli(*args: str, **streams: object) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "loganalyzer", *args]
    return subprocess.run(command, text=True, check=False, **streams)  # type: ignore[call-overload,no-any-return]


STATE = str(PLAIN / "trainer_state.json")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("extra", [["--json"], ["--markdown"], []])
def test_stdout_on_a_full_device_is_a_one_line_error(extra: list[str]) -> None:
    with open("/dev/full", "w") as full:
        result = _cli("summary", STATE, "--quiet", *extra, stdout=full, stderr=subprocess.PIPE)
    assert result.returncode == 1
    assert result.stderr == "Error: cannot write to stdout (No space left on device)\n"


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_an_index_whose_stderr_is_full_still_writes_its_dataset(tmp_path: Path) -> None:
    """stderr carries only messages: its progress bar on a full device stopped the index
    (exit 1, no manifest) before any run was read."""
    root = tmp_path / "runs" / "plain"
    shutil.copytree(PLAIN, root)
    dataset = tmp_path / "index"
    with open("/dev/full", "w") as full:
        args = ("index", str(root.parent), "--out", str(dataset), "--gpu", "h100-sxm")
        result = _cli(*args, "--jobs", "1", stdout=subprocess.PIPE, stderr=full)
    assert result.returncode == 0
    assert (dataset / "manifest.parquet").is_file()


def test_a_closed_stdout_is_a_one_line_error() -> None:
    result = _cli(
        "summary",
        STATE,
        "--quiet",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        pass_fds=(),
        preexec_fn=lambda: os.close(1),
    )
    assert result.returncode == 1
    assert (
        result.stderr == "Error: stdout is closed: nothing can be printed (redirect it to a file)\n"
    )


def test_a_reader_that_closed_the_pipe_is_no_error() -> None:
    """`| head -1`: the reader leaves before the output is written."""
    reader = os.pipe()
    os.close(reader[0])
    with os.fdopen(reader[1], "w") as pipe:
        result = _cli("summary", STATE, "--quiet", "--json", stdout=pipe, stderr=subprocess.PIPE)
    assert (result.returncode, result.stderr) == (0, "")


def test_a_wandb_reference_never_reads_outside_the_cache(tmp_path: Path) -> None:
    """`wandb:../../evil` read `$XDG_CACHE_HOME/evil.json` as the run's cache (and a pull
    would have written it there)."""
    (tmp_path / "loganalyzer" / "wandb").mkdir(parents=True)
    history = [{"_step": i, "loss": 10 - i / 4, "_runtime": 2.0 * i} for i in range(1, 21)]
    planted = {"state": "finished", "updated": None, "config": {}, "summary": {}}
    planted |= {"metadata": {}, "history": history}
    (tmp_path / "evil.json").write_text(json.dumps(planted))
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env |= {"XDG_CACHE_HOME": str(tmp_path), "HOME": str(tmp_path)}
    env |= {"WANDB_BASE_URL": "http://127.0.0.1:9"}  # nothing listens: never reached
    result = _cli("summary", "wandb:../../evil", capture_output=True, env=env)
    assert result.returncode == 1
    assert "no W&B API key" in result.stderr


@given(
    st.one_of(st.none(), st.just("_default"), st.text(min_size=1)),
    st.text(min_size=1),
    st.text(min_size=1),
    st.sampled_from(["..", ".", "a/../..", "~", "%2E%2E"]),
)
def test_every_wandb_reference_has_its_own_cache_file_inside_the_cache(
    entity: str | None, project: str, run_id: str, hostile: str
) -> None:
    root = remote.cache_root().resolve()
    refs = [
        remote.RunRef(entity, project, run_id),
        remote.RunRef(hostile, hostile, hostile),
        remote.RunRef(entity, project + hostile, run_id),
    ]
    files = [remote.cache_file(ref) for ref in refs]
    for path in files:
        assert path.resolve().is_relative_to(root)
        assert path.resolve().parent.parent.parent == root
        assert re.fullmatch(r"[A-Za-z0-9_%-]+\.json", path.name)
    assert len(set(files)) == len(set(refs))


def _long_value_log(folder: Path, fill: str) -> Path:
    """The hostile Megatron log (tests/hostile.py) with a 200,000-character argument value."""
    path = write_hostile_log(folder)
    marker = "  tensorboard_dir ................................. "
    text = path.read_text().replace(marker, marker + fill * 200_000 + " ")
    path = folder / "long.log"
    path.write_text(text)
    return path


def test_a_long_config_value_is_cut_in_every_display_and_whole_in_the_data(
    tmp_path: Path,
) -> None:
    log = _long_value_log(tmp_path, "Z")
    (tmp_path / "other").mkdir()
    other = _long_value_log(tmp_path / "other", "Y")
    page = tmp_path / "report.html"
    runner = CliRunner()
    assert runner.invoke(main, ["report", str(log), "-o", str(page), "-q"]).exit_code == 0
    compared = runner.invoke(main, ["compare", str(log), str(other), "-q", "--all"])
    exported = runner.invoke(main, ["export", str(log), "-o", str(tmp_path / "t.csv"), "-q"])
    assert compared.exit_code == 0 and exported.exit_code == 0
    cut = re.compile(r"(Z{1000}|Y{1000})… \(200,\d{3} characters\)")
    html = page.read_text()
    assert cut.search(html) and "Z" * 1001 not in html
    assert len(html) < 5_000_000
    assert len(cut.findall(compared.stdout)) == 2 and "Z" * 1001 not in compared.stdout
    config = json.loads((tmp_path / "t.csv.config.json").read_text())
    assert "Z" * 200_000 in json.dumps(config)


def test_clip() -> None:
    assert clip("a" * MAX_SHOWN) == "a" * MAX_SHOWN
    assert clip("a" * 1234, 10) == "aaaaaaaaaa… (1,234 characters)"


def test_a_long_value_quoted_by_a_warning_is_cut_on_the_terminal(tmp_path: Path) -> None:
    """The bad log's second exp_name (a warning quotes it) made 200,000 characters long."""
    text = (FIXTURES / "bad" / "ansi_and_controls.log").read_text()
    first = text.index("  exp_name", text.index("exp_name") + 1)
    end = text.index("\n", first)
    log = tmp_path / "long.log"
    log.write_text(text[:first] + "  exp_name ... " + "Q" * 200_000 + text[end:])
    runner = CliRunner()
    for extra in (["--json"], []):
        result = runner.invoke(main, ["summary", str(log), *extra])
        assert result.exit_code == 0
        shown = result.stderr if extra else result.stdout
        assert re.search(r"Q… \(200,\d{3} characters\)", shown), extra
        assert "Q" * 1001 not in shown


@pytest.mark.parametrize(
    ("pattern", "said"),
    [("+".join(["[1]"] * 50_000), "is nested too deep to read"), ("[0,2]", "only 0 and 1")],
)
def test_a_layer_pattern_past_reading_is_a_warning(tmp_path: Path, pattern: str, said: str) -> None:
    """Megatron's `--moe-layer-freq` as printed in the arguments dump: a chain of 50,000
    `+` raised RecursionError in Python's own parser, a bad value a ValueError; both were
    internal errors."""
    log = write_hostile_log(tmp_path)
    layers = "  num_layers ...................................... 2\n"
    moe = f"  num_experts ..................................... 4\n  moe_layer_freq ... {pattern}\n"
    log.write_text(log.read_text().replace(layers, layers + moe))
    result = CliRunner().invoke(main, ["summary", str(log), "--json", "-q"])
    assert result.exit_code == 0, result.output
    warnings = json.loads(result.stdout)["warnings"]
    assert any("argument moe_layer_freq" in w and said in w for w in warnings)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize(
    "args",
    [
        ["export", STATE, "-o", "/dev/full", "--to", "parquet"],
        ["export", STATE, "-o", "/dev/full", "--to", "csv"],
        ["report", STATE, "-o", "/dev/full"],
        ["compare", STATE, STATE, "-o", "/dev/full"],
    ],
)
def test_an_output_file_on_a_full_device_is_a_one_line_error(args: list[str]) -> None:
    result = CliRunner().invoke(main, [*args, "-q"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: /dev/full: cannot write")
    assert "No space left on device" in result.stderr and "internal" not in result.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_a_fleet_page_on_a_full_device_is_a_one_line_error(tmp_path: Path) -> None:
    shutil.copytree(PLAIN, tmp_path / "root" / "run")
    runner = CliRunner()
    dataset = str(tmp_path / "ds")
    assert (
        runner.invoke(main, ["index", str(tmp_path / "root"), "--out", dataset, "-q"]).exit_code
        == 0
    )
    result = runner.invoke(main, ["fleet", dataset, "-o", "/dev/full"])
    assert (result.exit_code, result.stderr) == (
        1,
        "Error: /dev/full: cannot write (No space left on device)\n",
    )


@pytest.mark.parametrize("marker", ['{"schema": ' + DEEP + "}", "{", "[1]"])
def test_an_out_folder_whose_dataset_json_is_not_ours_is_refused(
    tmp_path: Path, marker: str
) -> None:
    shutil.copytree(PLAIN, tmp_path / "root" / "run")
    (tmp_path / "ds").mkdir()
    (tmp_path / "ds" / "dataset.json").write_text(marker)
    result = CliRunner().invoke(
        main, ["index", str(tmp_path / "root"), "--out", str(tmp_path / "ds"), "-q"]
    )
    assert result.exit_code == 2
    assert result.stderr.endswith("not a loganalyzer dataset (dataset.json)\n")


def test_a_pulled_wandb_config_nested_past_reading_is_refused() -> None:
    deep: dict[str, object] = {}
    for _ in range(200):  # a config W&B's client decoded (its own JSON, its own limit)
        deep = {"a": deep}
    pulled = remote.Pulled("finished", None, deep, {}, {}, [])
    assert remote._shape_problem(pulled) == "a run config nested deeper than 100 levels"
