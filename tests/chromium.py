"""Headless Chromium driven over the DevTools protocol, for the report's browser tests and
bench: open a file with networking cut off, and see what it logged, requested and ran.

Debian's `chromium` is started with a fresh profile, no background networking, and a proxy
and resolver that lead nowhere, so a request the page makes fails and is recorded instead of
reaching anything.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from websockets.sync.client import ClientConnection, connect

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--mute-audio",
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--remote-debugging-port=0",
    "--window-size=1280,900",
]
READY = (
    "new Promise(resolve => { const check = () => "
    "document.documentElement.getAttribute('data-charts-ready') === 'yes' "
    "? resolve(performance.now()) : setTimeout(check, 5); check(); })"
)


def chromium_path() -> str | None:
    """The Chromium binary, if installed."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@dataclass
class Opened:
    """What a page did while it opened: its console errors, requests and dialogs."""

    url: str
    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    ready_ms: float | None = None


class Page:
    """One tab, over its DevTools websocket."""

    def __init__(self, socket: ClientConnection) -> None:
        self.socket = socket
        self.last_id = 0
        self.opened: Opened | None = None

    def send(self, method: str, timeout: float = 60.0, **params: Any) -> dict[str, Any]:
        """Call a DevTools method and return its result; events seen meanwhile are recorded."""
        self.last_id += 1
        self.socket.send(json.dumps({"id": self.last_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("id") == self.last_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result
            self._event(message)

    def wait_for_event(self, method: str, timeout: float) -> dict[str, Any]:
        """Read messages until an event `method` arrives; others are recorded as usual."""
        deadline = time.monotonic() + timeout
        while True:
            message = json.loads(self.socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            self._event(message)
            if message.get("method") == method:
                params: dict[str, Any] = message.get("params", {})
                return params

    def _event(self, message: dict[str, Any]) -> None:
        if self.opened is None:
            return
        method, params = message.get("method"), message.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if url != self.opened.url and not url.startswith("data:"):
                self.opened.requests.append(url)
        elif method == "Runtime.exceptionThrown":
            details = params["exceptionDetails"]
            self.opened.errors.append(
                str(details.get("exception", {}).get("description") or details.get("text"))
            )
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            self.opened.errors.append(" ".join(str(a.get("value")) for a in params["args"]))
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            self.opened.errors.append(params["entry"].get("text", ""))
        elif method == "Page.javascriptDialogOpening":
            self.opened.dialogs.append(params.get("message", ""))
            self.socket.send(
                json.dumps(
                    {
                        "id": 0,
                        "method": "Page.handleJavaScriptDialog",
                        "params": {"accept": False},
                    }
                )
            )

    def open(self, path: Path, timeout: float = 60.0) -> Opened:
        """Load a file and wait until its charts are drawn (or the timeout)."""
        self.opened = Opened(path.resolve().as_uri())
        for domain in ("Page", "Runtime", "Network", "Log"):
            self.send(f"{domain}.enable")
        self.send("Page.navigate", url=self.opened.url)
        self.wait_for_event("Page.loadEventFired", timeout)
        result = self.send(
            "Runtime.evaluate",
            timeout=timeout,
            expression=READY,
            awaitPromise=True,
            returnByValue=True,
        )
        self.opened.ready_ms = result.get("result", {}).get("value")
        self.evaluate("0")  # drain the events that came before the answer
        return self.opened

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        """A PNG of the first screen (or the whole page)."""
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["captureBeyondViewport"] = True
            params["clip"] = {
                "x": 0,
                "y": 0,
                "width": size["width"],
                "height": size["height"],
                "scale": 1,
            }
        data = self.send("Page.captureScreenshot", **params)["data"]
        path.write_bytes(base64.b64decode(data))
        return path


@contextmanager
def chromium(binary: str | None = None) -> Iterator[Page]:
    """A headless Chromium with a fresh profile, and its one tab."""
    binary = binary or chromium_path()
    if binary is None:
        raise FileNotFoundError("chromium is not installed (apt-get install chromium)")
    # Chromium's helper processes may still write the profile while it is removed: a file
    # left behind is no failure of the page under test.
    with tempfile.TemporaryDirectory(
        prefix="loganalyzer-chromium-", ignore_cleanup_errors=True
    ) as profile:
        process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "HOME": profile},
        )
        try:
            port = _debugging_port(Path(profile), process)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
                targets = json.load(answer)
            url = next(t["webSocketDebuggerUrl"] for t in targets if t["type"] == "page")
            with connect(url, max_size=None, open_timeout=10) as socket:
                page = Page(socket)
                page.send(
                    "Emulation.setDeviceMetricsOverride",
                    width=1280,
                    height=900,
                    deviceScaleFactor=1,
                    mobile=False,
                )
                yield page
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _debugging_port(profile: Path, process: subprocess.Popen[bytes]) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if marker.exists():
            text = marker.read_text().split()
            if text:
                return int(text[0])
        if process.poll() is not None:
            raise RuntimeError(f"chromium exited with code {process.returncode} at start-up")
        time.sleep(0.05)
    raise TimeoutError("chromium did not open its DevTools port within 30 s")


@contextmanager
def screen(width: int, height: int) -> Iterator[Page]:
    """A tab whose viewport is `width` x `height` (a first screen to judge); without
    Chromium the test is skipped, or failed under CI, which must install it."""
    if chromium_path() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("chromium is not installed; CI must install it (apt-get install chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    with chromium() as tab:
        tab.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )
        yield tab
