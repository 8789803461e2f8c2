"""W&B runs by ID: the real wandb client against a loopback server replaying API responses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loganalyzer.load import load_run
from loganalyzer.parsers.wandb.remote import parse_ref
from loganalyzer.registry import load_registry
from tests.wandb_replay import replay_server

FAKE_KEY = "0123456789abcdef" * 2 + "01234567"
RUN = "wandb:tiny-team/tiny/3x7k2p9q"


def _env(tmp_path: Path, base: str, key: str | None = FAKE_KEY) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(
        HOME=str(tmp_path / "home"),
        XDG_CACHE_HOME=str(tmp_path / "cache"),
        WANDB_CONFIG_DIR=str(tmp_path / "wandb-config"),
        WANDB_CACHE_DIR=str(tmp_path / "wandb-cache"),
        WANDB_DATA_DIR=str(tmp_path / "wandb-data"),
        WANDB_BASE_URL=base,
        WANDB_SILENT="true",
    )
    if key is not None:
        env["WANDB_API_KEY"] = key
    return env


def _summary(env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    start = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "loganalyzer", "summary", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, time.monotonic() - start


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("wandb:tiny-team/tiny/3x7k2p9q", ("tiny-team", "tiny", "3x7k2p9q")),
        ("wandb:tiny/3x7k2p9q", (None, "tiny", "3x7k2p9q")),
        ("https://wandb.ai/tiny-team/tiny/runs/3x7k2p9q?nw=x", ("tiny-team", "tiny", "3x7k2p9q")),
        ("wandb:3x7k2p9q", None),
    ],
)
def test_run_references(source: str, expected: tuple[str | None, str, str] | None) -> None:
    ref = parse_ref(source)
    assert (None if ref is None else (ref.entity, ref.project, ref.run_id)) == expected


def test_a_run_is_pulled_whole_then_served_from_the_cache(tmp_path: Path) -> None:
    with replay_server() as server:
        env = _env(tmp_path, server.base)
        first, _ = _summary(env, "--json", RUN)
        assert first.returncode == 0, first.stderr
        assert "HistoryPage" in server.requests
        assert all(not r.startswith("GET ") or "wandb-metadata" in r for r in server.requests)
        document = json.loads(first.stdout)
        assert document["iterations"]["logged"] == 20
        assert document["run"]["gpu"]["key"].startswith("h100")
        assert document["run"]["provenance"]["gpu_name"] == "wandb metadata"
        assert document["run"]["provenance"]["num_gpus"] == "wandb metadata"
        assert document["run"]["num_gpus"] == 8
        assert FAKE_KEY not in first.stdout + first.stderr
        server.requests.clear()
        for key, value in env.items():
            os.environ[key] = value
        try:
            start = time.monotonic()
            run = load_run([RUN], load_registry()).run
            elapsed = time.monotonic() - start
        finally:
            for key in env:
                if key.startswith(("WANDB_", "XDG_")):
                    os.environ.pop(key, None)
        assert server.requests == []
        assert elapsed < 1.0
        assert run.table["loss"].to_list() == [10.0 - i / 4 for i in range(1, 21)]
        assert any("read from the local cache" in w for w in run.warnings)
        refreshed, _ = _summary(env, "-q", "--refresh", RUN)
        assert refreshed.returncode == 0
        assert "HistoryPage" in server.requests


def test_an_unknown_run_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with replay_server() as server:
        done, elapsed = _summary(_env(tmp_path, server.base), "-q", "wandb:tiny-team/tiny/nope")
    assert done.returncode == 1
    assert elapsed < 10
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("Error: wandb:tiny-team/tiny/nope: W&B could not be read")
    assert "check the entity, project and run ID" in done.stderr


def test_a_missing_key_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with replay_server() as server:
        done, elapsed = _summary(_env(tmp_path, server.base, key=None), "-q", RUN)
    assert done.returncode == 1
    assert elapsed < 10
    assert done.stderr.count("\n") == 1
    assert "WANDB_API_KEY" in done.stderr


def test_an_unreachable_server_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done, elapsed = _summary(_env(tmp_path, f"http://127.0.0.1:{port}"), "-q", RUN)
    assert done.returncode == 1
    assert elapsed < 10
    assert done.stderr.count("\n") == 1
    assert FAKE_KEY not in done.stderr


def test_parsers_lists_the_schemes_a_parser_claims() -> None:
    from click.testing import CliRunner

    from loganalyzer.cli import main

    rows = {
        p["name"]: p
        for p in json.loads(CliRunner().invoke(main, ["parsers", "--json"]).output)["parsers"]
    }
    assert rows["wandb"]["schemes"] == ["wandb", "https", "http"]
    assert rows["tensorboard"]["schemes"] == []
    assert "schemes: wandb: https: http:" in CliRunner().invoke(main, ["parsers"]).output


def test_an_existing_path_is_never_taken_for_a_uri(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from loganalyzer.registry import uri_readers

    monkeypatch.chdir(tmp_path)
    Path("wandb:notes").write_text("x\n")
    assert uri_readers(load_registry(), "wandb:notes") == {}
    assert set(uri_readers(load_registry(), "wandb:a/b")) == {"wandb"}
    assert uri_readers(load_registry(), "C:/logs/run.log") == {}
