"""W&B runs by ID: the real wandb client against a loopback server replaying API responses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from subprocess import PIPE

import pytest

from loganalyzer.load import load_run
from loganalyzer.parsers.wandb.diagnose import PROBE_TIMEOUT_S
from loganalyzer.parsers.wandb.remote import TIMEOUT_S, TIMEOUT_VARIABLE, parse_ref
from loganalyzer.registry import load_registry
from tests.wandb_replay import FAKE_KEY, Replay, client_env, replay_server

RUN = "wandb:tiny-team/tiny/3x7k2p9q"


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
        env = client_env(tmp_path, server.base)
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


# Seconds a process may take to exit once the error is printed (wandb stops its service),
# on a loaded machine.
EXIT_MARGIN_S = 5.0

# Seconds W&B may leave a request unanswered where no first contact has to succeed: the error
# line is the diagnosing request's whatever the client did by then.
QUICK = 1


def _startup_s() -> float:
    """Seconds a process takes to start and import what a W&B pull needs, measured now: the
    part of a command's time that is not waiting for W&B."""
    start = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", "import wandb, loganalyzer.cli, loganalyzer.load"],
        check=True,
        timeout=60,
    )
    return time.monotonic() - start


def test_an_unknown_run_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with replay_server() as server:
        done, _ = _summary(client_env(tmp_path, server.base), "-q", "wandb:tiny-team/tiny/nope")
        ended = time.monotonic()
    assert done.returncode == 1
    assert server.first_contact is not None
    assert ended - server.first_contact < TIMEOUT_S + PROBE_TIMEOUT_S + EXIT_MARGIN_S
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("Error: wandb:tiny-team/tiny/nope: W&B could not be read")
    assert "check the entity, project and run ID" in done.stderr


def test_a_missing_key_is_said_before_any_request(tmp_path: Path) -> None:
    with replay_server() as server:
        done, _ = _summary(client_env(tmp_path, server.base, key=None), "-q", RUN)
    assert done.returncode == 1
    assert server.first_contact is None
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"Error: {RUN}: no W&B API key: run `wandb login` or set")
    assert "WANDB_API_KEY" in done.stderr


def test_a_missing_key_is_said_rather_than_an_unreachable_server(tmp_path: Path) -> None:
    done, _ = _summary(client_env(tmp_path, "http://127.0.0.1:9", key=None), "-q", RUN)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert "no W&B API key" in done.stderr
    assert "cannot be reached" not in done.stderr


def test_a_key_in_netrc_or_the_settings_file_is_used(tmp_path: Path) -> None:
    with replay_server() as server:
        env = client_env(tmp_path, server.base, key=None)
        host = server.base.split("://")[1]
        netrc = tmp_path / "netrc"
        netrc.write_text(f"machine {host}\n  login user\n  password {FAKE_KEY}\n")
        netrc.chmod(0o600)
        done, _ = _summary(env | {"NETRC": str(netrc)}, "-q", RUN)
        assert done.returncode == 0, done.stderr
    settings = Path(env["WANDB_CONFIG_DIR"]) / "settings"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(f"[default]\nbase_url = {server.base}\napi_key = {FAKE_KEY}\n")
    no_server, _ = _summary(env | {"LOGANALYZER_WANDB_TIMEOUT": "2"}, "-q", "--refresh", RUN)
    assert no_server.returncode == 1
    assert "no W&B API key" not in no_server.stderr


def test_an_unreachable_server_is_one_line_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = client_env(tmp_path, f"http://127.0.0.1:{port}") | {TIMEOUT_VARIABLE: str(QUICK)}
    startup = _startup_s()
    done, elapsed = _summary(env, "-q", RUN)
    assert done.returncode == 1
    assert elapsed < startup + QUICK + PROBE_TIMEOUT_S + EXIT_MARGIN_S
    assert done.stderr.count("\n") == 1
    assert "cannot be reached" in done.stderr
    assert FAKE_KEY not in done.stderr


# A broken server (tests.wandb_replay.FAULTS; from the first request, or only from the first
# request for an operation on), the seconds W&B may leave a request unanswered, and what the
# error line must say. The cases with the longer timeout need the client's first contact to
# succeed, which takes a few seconds on a loaded machine: they run after the others (named by
# the diagnosing request whatever the load), not beside them.
BROKEN_SERVERS: list[tuple[str, str | None, int, tuple[str, ...]]] = [
    (
        "silent",
        None,
        QUICK,
        ("the request for the login check", "{base} did not answer a plain request within 2 s"),
    ),
    ("not-json", None, QUICK, ("{base} answers with something that is not JSON ('this is not",)),
    (
        "truncated-json",
        None,
        QUICK,
        ("""{base} answers with something that is not JSON ('{"data":""",),
    ),
    ("html-502", None, QUICK, ("{base} answers HTTP 502 Bad Gateway: the server is failing",)),
    ("wrong-shape", None, QUICK, ("{base} answers JSON that is not a GraphQL response",)),
    (
        "rate-limited",
        None,
        QUICK,
        ("{base} answers HTTP 429 Too Many Requests: W&B is rate-limit",),
    ),
    ("wrong-types", None, 8, ("W&B answered something of an unexpected shape",)),
    (
        "silent",
        "HistoryPage",
        8,
        ("the request for the run's history", "{base} did not answer a plain request within 2 s"),
    ),
    (
        "rate-limited",
        "HistoryPage",
        8,
        ("the request for the run's history", "{base} answers HTTP 429 Too Many Requests"),
    ),
]


@dataclass
class Ended:
    """How a summary against a broken server ended."""

    done: subprocess.CompletedProcess[str]
    base: str
    broken_since: float | None
    ended: float


def _run_against(cases: dict[int, tuple[Replay, dict[str, str]]]) -> dict[int, Ended]:
    """`summary` against each server at once, until each ends (or 120 s pass: the test of a
    hung case fails)."""
    command = [sys.executable, "-m", "loganalyzer", "summary", "-q", RUN]
    running = {
        index: (server, subprocess.Popen(command, env=env, stdout=PIPE, stderr=PIPE, text=True))
        for index, (server, env) in cases.items()
    }
    ended: dict[int, Ended] = {}
    deadline = time.monotonic() + 120
    while running and time.monotonic() < deadline:
        for index, (server, process) in list(running.items()):
            if process.poll() is not None:
                finished = time.monotonic()
                stdout, stderr = process.communicate()
                done = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
                ended[index] = Ended(done, server.base, server.broken_since, finished)
                del running[index]
        time.sleep(0.02)
    for _, process in running.values():
        process.kill()
        process.wait()
    return ended


@pytest.fixture(scope="module")
def broken_servers(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Ended]:
    """How every BROKEN_SERVERS case ended, by its index."""
    ended: dict[int, Ended] = {}
    with ExitStack() as stack:
        cases = {}
        for index, (fault, operation, timeout, _) in enumerate(BROKEN_SERVERS):
            server = stack.enter_context(replay_server(fault, operation))
            env = client_env(tmp_path_factory.mktemp(fault), server.base)
            cases[index] = (server, env | {TIMEOUT_VARIABLE: str(timeout)})
        together = {i: case for i, case in cases.items() if BROKEN_SERVERS[i][2] == QUICK}
        ended.update(_run_against(together))
        ended.update(_run_against({i: cases[i] for i in cases.keys() - together.keys()}))
    return ended


@pytest.mark.parametrize(
    ("index", "timeout", "expected"),
    [(index, timeout, expected) for index, (_, _, timeout, expected) in enumerate(BROKEN_SERVERS)],
    ids=[f"{fault}-from-{operation or 'start'}" for fault, operation, _, _ in BROKEN_SERVERS],
)
def test_a_broken_server_ends_in_one_line_within_the_bound(
    broken_servers: dict[int, Ended], index: int, timeout: int, expected: tuple[str, ...]
) -> None:
    """The bound is enforced by loganalyzer, not by the client's retries (wandb retries a
    rate limit or a gateway error for minutes): from the first request answered wrongly to
    the end of the process is at most the answer timeout, the diagnosing request and the
    exit."""
    assert index in broken_servers, "still running after 120 s"
    run = broken_servers[index]
    done = run.done
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"Error: {RUN}: W&B could not be read")
    for words in expected:
        assert words.replace("{base}", run.base) in done.stderr
    assert "Traceback" not in done.stderr
    assert FAKE_KEY not in done.stderr
    assert run.broken_since is not None
    assert run.ended - run.broken_since < timeout + PROBE_TIMEOUT_S + EXIT_MARGIN_S


def test_the_documented_bound_is_the_one_enforced() -> None:
    from click.testing import CliRunner

    from loganalyzer.cli import main

    shown = " ".join(CliRunner().invoke(main, ["summary", "--help"]).output.split())
    assert f"unanswered for {TIMEOUT_S:g} s ({TIMEOUT_VARIABLE})" in shown
    assert f"{PROBE_TIMEOUT_S:g} s later at most" in shown


@pytest.mark.parametrize("value", ["soon", "0", "-1", "inf", "nan"])
def test_a_bad_timeout_setting_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    from click.testing import CliRunner

    from loganalyzer.cli import main

    monkeypatch.setenv(TIMEOUT_VARIABLE, value)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    result = CliRunner().invoke(main, ["summary", "-q", RUN])
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: {TIMEOUT_VARIABLE}")
    assert result.output.count("\n") == 1


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
