"""A loopback HTTP server that answers the W&B client with the responses in
fixtures/wandb_api/ (one file per run, keyed by the GraphQL operation the client sends), and
records every request it gets."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from tests.conftest import FIXTURES

API = FIXTURES / "wandb_api"
_OPERATION = re.compile(r"query\s+(\w+)")


class Replay:
    """The server's address and the requests it received."""

    def __init__(self, server: ThreadingHTTPServer) -> None:
        self.base = f"http://127.0.0.1:{server.server_address[1]}"
        self.requests: list[str] = []


def _responses(entity: str, project: str, run: str, base: str) -> dict[str, object] | None:
    path = API / f"{entity}__{project}__{run}.json"
    if not path.exists():
        return None
    loaded: dict[str, object] = json.loads(path.read_text().replace("{BASE}", base))
    return loaded


# Answers a GraphQL operation from its variables, or None to answer from the fixtures: the
# benchmark serves a large generated run this way.
Answer = Callable[[str, dict[str, object]], object | None]


@contextmanager
def replay_server(generate: Answer | None = None) -> Iterator[Replay]:
    holder: list[Replay] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", 0)))
            replay = holder[0]
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
            if self.path == "/files/wandb-metadata.json":
                self._send((API / "wandb-metadata.json").read_bytes())
            else:
                self.send_response(404)
                self.end_headers()

        def _send(self, payload: bytes) -> None:
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    holder.append(Replay(server))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield holder[0]
    finally:
        server.shutdown()
        server.server_close()


__all__ = ["Path", "Replay", "replay_server"]
