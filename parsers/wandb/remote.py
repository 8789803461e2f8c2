"""W&B runs named by ID or URL, pulled with the `wandb` package's public API and cached.

`wandb:ENTITY/PROJECT/RUN_ID`, `wandb:PROJECT/RUN_ID` (the key's default entity) and
`https://…/ENTITY/PROJECT/runs/RUN_ID` name a run. Its config, summary, metadata (the GPU) and
its complete history (`scan_history`, never the sampled `history()`) are pulled once and kept
under the user's cache directory (`$XDG_CACHE_HOME/loganalyzer/wandb/…`): a finished run is
read from there with no network; a run that was still running is pulled again when it has
been updated since; `--refresh` always pulls.

A missing key is said before any request (`credentials`). Every other failure (unknown run,
no permission, no network, rate limit, server error, garbage) becomes one InputError line:
the pull ends as soon as W&B leaves a request unanswered for `TIMEOUT_S` seconds, enforced
here whatever the client's retries, and `loganalyzer.parsers.wandb.diagnose` names what the
server did wrong. The API key is never shown.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import threading
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loganalyzer import jsontext
from loganalyzer.errors import InputError
from loganalyzer.parsers.wandb.credentials import base_url, missing_key
from loganalyzer.sources import REFRESH_REMOTE as REFRESH
from loganalyzer.terminal import echo

# Seconds W&B may leave a request unanswered (the first contact: login check and run record;
# each page of history; the metadata file), retries included, before the pull ends with an
# error; the client's own default is 19 s per attempt, retried for minutes.
TIMEOUT_S = 10.0
# Seconds the client's service may take to stop once a pull is over.
RELEASE_S = 1.0
# Set to wait longer for a slow server.
TIMEOUT_VARIABLE = "LOGANALYZER_WANDB_TIMEOUT"
# Run states after which a run changes no more: its cache is used without asking the server.
FINAL_STATES = ("finished", "crashed", "failed", "killed")

_SOURCE = re.compile(r"^wandb:(?:(?P<entity>[^/:]+)/)?(?P<project>[^/:]+)/(?P<run>[^/?#:]+)/?$")
_URL = re.compile(
    r"^https?://[^/]+/(?P<entity>[^/]+)/(?P<project>[^/]+)/runs/(?P<run>[^/?#]+)/?(?:[?#].*)?$"
)


@dataclass(frozen=True)
class RunRef:
    """A run's path; entity None means the API key's default entity."""

    entity: str | None
    project: str
    run_id: str

    def path(self) -> str:
        return "/".join(p for p in (self.entity, self.project, self.run_id) if p)


def parse_ref(source: str) -> RunRef | None:
    found = _SOURCE.match(source) or _URL.match(source)
    if found is None:
        return None
    return RunRef(found.group("entity"), found.group("project"), found.group("run"))


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "loganalyzer" / "wandb"


@dataclass
class Pulled:
    """What was pulled of a run (or read back from the cache)."""

    state: str
    updated: str | None
    config: dict[str, Any]
    summary: dict[str, Any]
    metadata: dict[str, Any]
    history: list[dict[str, Any]]
    from_cache: bool = False


def pull(source: str, ref: RunRef) -> Pulled:
    """The run from the cache when it is final and no refresh is asked, else from W&B."""
    cached = _read_cache(ref)
    if cached is not None and cached.state in FINAL_STATES and not REFRESH.get():
        return cached
    pulled = _pull_within_deadline(source, ref, cached)
    if pulled is not cached:
        _write_cache(ref, pulled)
    return pulled


class _Answers:
    """When W&B last answered and what is awaited next: the pulling thread tells, the
    caller's thread watches."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.awaited = "the login check and the run's record"

    def answered(self, awaited: str) -> None:
        self.last = time.monotonic()
        self.awaited = awaited


def answer_timeout() -> float:
    """Seconds W&B may leave any one request unanswered: LOGANALYZER_WANDB_TIMEOUT, else
    TIMEOUT_S."""
    try:
        chosen = float(os.environ.get(TIMEOUT_VARIABLE, TIMEOUT_S))
    except ValueError:
        raise InputError(
            f"{TIMEOUT_VARIABLE}={os.environ[TIMEOUT_VARIABLE]!r} is not a number of seconds"
        ) from None
    if not 0 < chosen < float("inf"):
        raise InputError(f"{TIMEOUT_VARIABLE} must be a positive number of seconds")
    return chosen


def _pull_within_deadline(source: str, ref: RunRef, cached: Pulled | None) -> Pulled:
    """The pull runs on a daemon thread; this thread ends it with InputError as soon as W&B
    has left a request unanswered for `answer_timeout()` seconds, whatever the client's own
    timeouts and retries (they differ between wandb versions, and some are unbounded). A
    client still waiting is left behind and ends with the process."""
    limit = answer_timeout()
    if (looked := missing_key()) is not None:
        raise InputError(
            f"{source}: no W&B API key: run `wandb login` or set WANDB_API_KEY (looked in {looked})"
        )
    import wandb  # before the clock starts: importing is not waiting for W&B

    answers = _Answers()
    outcome: dict[str, Any] = {}
    if REFRESH.get():  # a context variable: the pulling thread does not see the caller's
        cached = None

    def work() -> None:
        try:
            outcome["pulled"] = _pull(wandb, ref, cached, limit, answers, source)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=work, name=f"pull {source}", daemon=True)
    worker.start()
    while worker.is_alive() and time.monotonic() - answers.last < limit:
        worker.join(0.05)
    _release_client(wandb)
    if "pulled" in outcome:
        pulled: Pulled = outcome["pulled"]
        return pulled
    error = outcome.get("error")
    if isinstance(error, InputError):
        raise error
    # urllib's HTTP client loads only when a pull fails, not with the registry
    from loganalyzer.parsers.wandb.diagnose import diagnose

    base = base_url()
    found = diagnose(base)
    if error is None:
        waited = f"no answer from {base} within {limit:g} s to the request for {answers.awaited}"
        hint = found or (
            f"check the network and WANDB_BASE_URL, or set {TIMEOUT_VARIABLE} to wait longer"
        )
        raise InputError(f"{source}: W&B could not be read: {waited}; {hint}")
    if found is not None:
        failed = f"the request for {answers.awaited} failed"
        raise InputError(f"{source}: W&B could not be read: {failed}: {found}")
    raise InputError(f"{source}: {_explain(error)}")


def _release_client(wandb: Any) -> None:
    """Stop the client's background service now, waiting `RELEASE_S` at most: left to the
    end of the process, wandb waits for it without a bound (it may still be retrying a
    request, or sending its telemetry to a server that does not answer). The service ends by
    itself when this process does."""

    def teardown() -> None:
        with contextlib.suppress(BaseException):  # what it failed at no longer matters
            wandb.teardown()

    if hasattr(wandb, "teardown"):
        stopping = threading.Thread(target=teardown, name="stop wandb", daemon=True)
        stopping.start()
        stopping.join(RELEASE_S)


def _pull(
    wandb: Any, ref: RunRef, cached: Pulled | None, limit: float, answers: _Answers, source: str
) -> Pulled:
    """The run from W&B; `cached` (None to pull whatever happens) when it is unchanged."""
    # the client's own timeout a little longer than ours, so that the deadline here, not a
    # race with the client, decides how a silent server is reported
    run = wandb.Api(timeout=math.ceil(limit) + 1).run(ref.path())
    answers.answered("the run's history")
    state = str(run.state)
    updated = str(getattr(run, "heartbeatAt", None) or "") or None
    if cached is not None and cached.updated == updated:
        return cached
    rows: list[dict[str, Any]] = []
    for row in run.scan_history(page_size=1000):
        answers.answered("the run's history")
        rows.append(dict(row))
        if len(rows) % 10_000 == 0:
            echo(f"  {source}: {len(rows):,} history rows pulled", err=True)
    answers.answered("the run's summary and metadata file")
    config = run.config
    summary = _plain(run.summary)
    metadata = run.metadata or {}
    pulled = Pulled(
        state=state,
        updated=updated,
        config=dict(config),
        summary=summary,
        metadata=metadata if isinstance(metadata, dict) else {},
        history=rows,
    )
    problem = _shape_problem(pulled)
    if problem is not None:
        raise InputError(
            f"{source}: W&B answered {problem}; is WANDB_BASE_URL a W&B server, "
            "and is the wandb package current?"
        )
    return pulled


def _shape_problem(pulled: Pulled) -> str | None:
    """What in a pulled (or cached) run is not of the shape W&B gives, or None."""
    if not isinstance(pulled.state, str):
        return "a run state that is not text"
    for name in ("config", "summary", "metadata"):
        if not isinstance(getattr(pulled, name), dict):
            return f"a run {name} that is not a mapping"
        if jsontext.depth(getattr(pulled, name)) > jsontext.MAX_DEPTH:
            return f"a run {name} nested deeper than {jsontext.MAX_DEPTH} levels"
    if not isinstance(pulled.history, list):
        return "a history that is not a list"
    if not all(isinstance(row, dict) for row in pulled.history):
        return "history rows that are not mappings"
    return None


def _plain(summary: Any) -> dict[str, Any]:
    """A run summary as plain JSON values (media and nested objects as they are)."""
    try:
        return {key: summary[key] for key in summary.keys()}  # noqa: SIM118 (not a dict)
    except Exception:
        return {}


def cache_file(ref: RunRef) -> Path:
    """Where a run is cached: one folder level per part of its reference, each part
    percent-encoded but for letters, digits, `-` and `_` (`.` too, so that no part is `..`
    and no part holds a `/`), so that every reference maps to its own file inside the
    cache, whatever it is spelled with (`wandb:../../evil` would reach outside). A
    reference without an entity (the key's default one) is under `@default`, which no
    encoded name can be."""
    root = cache_root()
    entity = "@default" if ref.entity is None else _file_name(ref.entity)
    parts = (entity, _file_name(ref.project), _file_name(ref.run_id))
    path = root.joinpath(*parts).with_suffix(".json")
    if not path.resolve().is_relative_to(root.resolve()):  # cannot happen; never written
        raise InputError(f"wandb:{ref.path()}: no cache file for it inside {root}")
    return path


def _file_name(part: str) -> str:
    """A reference's part as a file name: only [A-Za-z0-9_-] and %XX (UTF-8 bytes)."""
    return urllib.parse.quote(part, safe="").replace(".", "%2E").replace("~", "%7E")


def _read_cache(ref: RunRef) -> Pulled | None:
    """The cached run, or None when there is none or it is damaged (it is pulled again)."""
    try:
        values = jsontext.loads(cache_file(ref).read_text(encoding="utf-8"))
        cached = Pulled(**values, from_cache=True)
    except (OSError, ValueError, TypeError):
        return None
    return cached if _shape_problem(cached) is None else None


def _write_cache(ref: RunRef, pulled: Pulled) -> None:
    """Written whole to a temporary name first, so that an interrupted pull leaves no
    half-written cache behind."""
    path = cache_file(ref)
    values = {
        "state": pulled.state,
        "updated": pulled.updated,
        "config": pulled.config,
        "summary": pulled.summary,
        "metadata": pulled.metadata,
        "history": pulled.history,
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        partial.write_text(json.dumps(values, default=str), encoding="utf-8")
        partial.replace(path)
    except OSError:
        pass  # a cache that cannot be written only costs the next pull


def _explain(exc: BaseException) -> str:
    """One line saying what went wrong and what to do; never the key."""
    from loganalyzer.secrets import mask_secrets

    text = mask_secrets(" ".join(str(exc).split()) or type(exc).__name__)
    # the hint comes from the words, not from numbers in an address (a port 44031 is no 403)
    lowered = _URL_IN_TEXT.sub("", text).lower()
    if "api key" in lowered or "login" in lowered:
        hint = "set WANDB_API_KEY or run `wandb login`"
    elif "could not find run" in lowered or "not found" in lowered or "invalid path" in lowered:
        hint = "check the entity, project and run ID"
    elif "permission" in lowered or re.search(r"\b40[13]\b", lowered):
        hint = "the key has no access to this run"
    elif re.search(r"\b429\b|rate.limit", lowered):
        hint = "W&B is rate-limiting; try again later"
    elif isinstance(exc, _UNEXPECTED_ANSWER) or _UNEXPECTED_WORDS.search(lowered):
        hint = "W&B answered something of an unexpected shape; is the wandb package current?"
    else:
        hint = "check the network and WANDB_BASE_URL"
    return f"W&B could not be read ({type(exc).__name__}: {text[:200]}); {hint}"


_URL_IN_TEXT = re.compile(r"\b\w+://\S+")
# How the client (Python, or its Go core) words an answer of the wrong shape.
_UNEXPECTED_WORDS = re.compile(r"validation error|cannot unmarshal|unable to convert")
# What the client raises when an answer is not what it expects.
_UNEXPECTED_ANSWER = (KeyError, TypeError, AttributeError, IndexError, ValueError)
