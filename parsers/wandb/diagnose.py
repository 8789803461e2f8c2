"""What is wrong with a W&B server the client gave up on, in words a user can act on.

The `wandb` client reports a server that answers garbage, an HTML gateway page or a rate limit
as a failed login, a timeout or a validation error of its own. One plain GraphQL request,
sent without the API key, tells these apart: nothing listening, no answer, an HTTP error
status, a body that is not JSON, JSON that is not a GraphQL response.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from http import HTTPStatus

from loganalyzer import jsontext

# Seconds the diagnosing request may take.
PROBE_TIMEOUT_S = 2.0
_QUERY = b'{"query": "query Probe { viewer { id } }"}'


def diagnose(base_url: str, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """What the server at `base_url` does wrong, or None when it answers like a GraphQL
    server (the problem is then the key, the run or the client, as its own error says)."""
    request = urllib.request.Request(
        base_url.rstrip("/") + "/graphql",
        data=_QUERY,
        headers={"content-type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            body = answer.read(64 * 1024)
    except urllib.error.HTTPError as exc:
        return _status(exc.code, base_url)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, TimeoutError):
            return f"{base_url} did not answer a plain request within {timeout:g} s either"
        return f"{base_url} cannot be reached ({reason})"
    return _body(body, base_url)


def _status(code: int, base_url: str) -> str | None:
    if code in (HTTPStatus.UNAUTHORIZED, HTTPStatus.FORBIDDEN):
        return None  # expected of a request without the key
    try:
        phrase = HTTPStatus(code).phrase
    except ValueError:
        phrase = "an unknown status"
    if code == HTTPStatus.TOO_MANY_REQUESTS:
        return f"{base_url} answers HTTP 429 {phrase}: W&B is rate-limiting; try again later"
    if code >= 500:
        return f"{base_url} answers HTTP {code} {phrase}: the server is failing; try again later"
    return f"{base_url} answers HTTP {code} {phrase}; is WANDB_BASE_URL a W&B server?"


def _body(body: bytes, base_url: str) -> str | None:
    try:
        document = jsontext.loads(body)
    except ValueError:
        head = " ".join(body[:40].decode("utf-8", "replace").split())
        return (
            f"{base_url} answers with something that is not JSON ({head!r}); "
            "is WANDB_BASE_URL a W&B server?"
        )
    if not isinstance(document, dict) or not ({"data", "errors"} & document.keys()):
        return (
            f"{base_url} answers JSON that is not a GraphQL response; "
            "is WANDB_BASE_URL a W&B server?"
        )
    return None
