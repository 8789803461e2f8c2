"""The command line asks polars' allocator (jemalloc) to give freed memory back promptly: set
before polars loads (polars adds its own defaults in front of it), never over a user's own
setting, and written so that jemalloc takes it."""

from __future__ import annotations

import os
import subprocess
import sys

from loganalyzer.allocator import ALLOCATOR_ENV, prompt_return
from loganalyzer.cores import usable_cores
from tests.conftest import FIXTURES

EXAMPLE = str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out")
# After the CLI ran in a fresh interpreter: the setting polars' library read.
PROBE = (
    "import os; from click.testing import CliRunner; from loganalyzer.cli import main; "
    f"result = CliRunner().invoke(main, ['summary', {EXAMPLE!r}, '--json']); "
    "assert result.exit_code == 0, result.output; "
    f"print(os.environ[{ALLOCATOR_ENV!r}])"
)


def _setting_after_a_summary(environment: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, env=environment
    )
    return done.stdout.strip()


def _environment_without_setting() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name != ALLOCATOR_ENV}


def test_the_setting_is_in_place_before_polars_loads() -> None:
    setting = _setting_after_a_summary(_environment_without_setting())
    # polars puts its defaults in front of a setting it finds when it loads: ours was there
    assert setting.endswith("," + prompt_return())


def test_a_users_own_setting_is_kept() -> None:
    environment = {**_environment_without_setting(), ALLOCATOR_ENV: "narenas:2"}
    setting = _setting_after_a_summary(environment)
    assert setting.endswith(",narenas:2")
    assert prompt_return() not in setting


def test_jemalloc_takes_the_setting() -> None:
    # jemalloc prints its options at exit with stats_print; an invalid pair would be reported
    environment = {
        **_environment_without_setting(),
        ALLOCATOR_ENV: prompt_return() + ",stats_print:true",
    }
    done = subprocess.run(
        [sys.executable, "-c", "import polars as pl; pl.DataFrame({'a': [1]})"],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    assert "opt.dirty_decay_ms: 100 " in done.stderr
    assert "opt.muzzy_decay_ms: 0 " in done.stderr
    assert f"opt.narenas: {usable_cores()}\n" in done.stderr
    assert "Invalid conf" not in done.stderr


def test_polars_defaults_inherited_from_a_parent_are_replaced() -> None:
    # a parent that imported polars (a script, `python -m bench`) passes polars' own setting on
    parent = subprocess.run(
        [sys.executable, "-c", f"import os, polars; print(os.environ[{ALLOCATOR_ENV!r}])"],
        capture_output=True,
        text=True,
        check=True,
        env=_environment_without_setting(),
    ).stdout.strip()
    setting = _setting_after_a_summary({**_environment_without_setting(), ALLOCATOR_ENV: parent})
    assert setting.endswith("," + prompt_return())
