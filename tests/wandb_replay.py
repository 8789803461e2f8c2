"""A loopback HTTP server that answers the W&B client with the responses in
fixtures/wandb_api/ (one file per run, keyed by the GraphQL operation the client sends), and
records every request it gets; or, from a chosen operation on, misbehaves as a broken server
does (`FAULTS`: never answers, garbage, an HTML gateway error, JSON of the wrong shape, a rate
limit that never lifts)."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.conftest import FIXTURES

API = FIXTURES / "wandb_api"
# A key of the shape W&B issues (40 hex characters); the replay server takes any.
FAKE_KEY = "0123456789abcdef" * 2 + "01234567"
_OPERATION = re.compile(r"query\s+(\w+)")

# What a broken server sends: (HTTP status, content type, body); None holds the connection
# open and never answers.
FAULTS: dict[str, tuple[int, str, bytes] | None] = {
    "silent": None,
    "not-json": (200, "application/json", b"this is not JSON at all\n"),
    "truncated-json": (200, "application/json", b'{"data": {"viewer": {"id": "VXNlcjox", "ent'),
    "html-502": (
        502,
        "text/html",
        b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway"
        b"</h1></center><hr><center>nginx</center></body></html>\n",
    ),
    "wrong-shape": (200, "application/json", b'[{"data": 7}, "viewer", null]'),
    "wrong-types": (
        200,
        "application/json",
        b'{"data": {"viewer": "nobody", "project": {"run": {"state": [], "config": 5,'
        b' "history": {"rows": 1}, "historyKeys": "none", "files": 3}}}}',
    ),
    "rate-limited": (429, "application/json", b'{"errors": [{"message": "rate limit exceeded"}]}'),
}


class Replay:
    """The server's address and the requests it received."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.base = f"http://127.0.0.1:{server.server_address[1]}"
        self.requests: list[str] = []
        # when the first connection came, and when the first request was answered wrongly
        # (time.monotonic()); the client had started by then
        self.first_contact: float | None = None
        self.broken_since: float | None = None


def _responses(entity: str, project: str, run: str, base: str) -> dict[str, object] | None:
    path = API / f"{entity}__{project}__{run}.json"
    if not path.exists():
        return None
    loaded: dict[str, object] = json.loads(path.read_text().replace("{BASE}", base))
    return loaded


def client_env(folder: Path, base: str, key: str | None = FAKE_KEY) -> dict[str, str]:
    """The environment of a process whose W&B client talks to `base`: wandb's own files and
    loganalyzer's cache under `folder`, none of the caller's WANDB_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("WANDB_")}
    env.update(
        HOME=str(folder / "home"),
        XDG_CACHE_HOME=str(folder / "cache"),
        WANDB_CONFIG_DIR=str(folder / "wandb-config"),
        WANDB_CACHE_DIR=str(folder / "wandb-cache"),
        WANDB_DATA_DIR=str(folder / "wandb-data"),
        WANDB_BASE_URL=base,
        WANDB_SILENT="true",
    )
    if key is not None:
        env["WANDB_API_KEY"] = key
    return env


# Answers a GraphQL operation from its variables, or None to answer from the fixtures: the
# benchmark serves a large generated run this way.
Answer = Callable[[str, dict[str, object]], object | None]


@contextmanager
def replay_server(
    fault: str | None = None,
    from_operation: str | None = None,
    generate: Answer | None = None,
) -> Iterator[Replay]:
    """Serve the recorded run (or what `generate` answers); with `fault` (a key of FAULTS),
    answer every request that way, or only from the first request for `from_operation` on
    (the earlier ones answered as recorded)."""
    holder: list[Replay] = []
    broken = threading.Event()
    if fault is not None and from_operation is None:
        broken.set()
    release = threading.Event()  # lets a silent handler end when the server shuts down

    class Handler(BaseHTTPRequestHandler):
        def setup(self) -> None:
            if holder[0].first_contact is None:
                holder[0].first_contact = time.monotonic()
            super().setup()

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            replay = holder[0]
            if self.path == "/graphql" and from_operation is not None:
                found = _OPERATION.search(json.loads(body).get("query", ""))
                if found is not None and found.group(1) == from_operation:
                    broken.set()
            if broken.is_set() and fault is not None:
                replay.requests.append(f"{fault} {self.path}")
                replay.broken_since = replay.broken_since or time.monotonic()
                self._misbehave(FAULTS[fault])
                return
            if self.path != "/graphql":
                replay.requests.append(f"POST {self.path}")
                self._send(b"")
                return
            request = json.loads(body)
            found = _OPERATION.search(request.get("query", ""))
            operation = found.group(1) if found else "?"
            replay.requests.append(operation)
            variables = request.get("variables") or {}
            generated = None if generate is None else generate(operation, variables)
            if generated is not None:
                self._send(json.dumps(generated).encode())
                return
            run = variables.get("name") or variables.get("runName") or variables.get("run")
            entity = variables.get("entity") or "tiny-team"
            recorded = _responses(
                entity, variables.get("project", "tiny"), run or "3x7k2p9q", replay.base
            )
            if recorded is None:
                answer: object = {"data": {"project": {"run": None}}}
            else:
                answer = recorded.get(operation, {"data": {}})
            self._send(json.dumps(answer).encode())

        def do_GET(self) -> None:
            holder[0].requests.append(f"GET {self.path}")
            if broken.is_set() and fault is not None:
                holder[0].broken_since = holder[0].broken_since or time.monotonic()
                self._misbehave(FAULTS[fault])
                return
            if self.path == "/files/wandb-metadata.json":
                self._send((API / "wandb-metadata.json").read_bytes())
            else:
                self.send_response(404)
                self.end_headers()

        def _send(self, payload: bytes, status: int = 200, kind: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("content-type", kind)
            self.send_header("content-length", str(len(payload)))
            if status == 429:
                self.send_header("retry-after", "1")
            self.end_headers()
            self.wfile.write(payload)

        def _misbehave(self, answer: tuple[int, str, bytes] | None) -> None:
            if answer is None:
                release.wait(120)  # the client gives up first, or the test ends
                self.close_connection = True
                return
            self._send(answer[2], *answer[:2])

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder.append(Replay(server))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        release.set()
        server.shutdown()
        server.server_close()


__all__ = ["FAKE_KEY", "Path", "Replay", "client_env", "replay_server"]
