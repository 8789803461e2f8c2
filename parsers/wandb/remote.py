"""W&B runs named by ID or URL, pulled with the `wandb` package's public API and cached.

`wandb:ENTITY/PROJECT/RUN_ID`, `wandb:PROJECT/RUN_ID` (the key's default entity) and
`https://…/ENTITY/PROJECT/runs/RUN_ID` name a run. Its config, summary, metadata (the GPU) and
its complete history (`scan_history`, never the sampled `history()`) are pulled once and kept
under the user's cache directory (`$XDG_CACHE_HOME/loganalyzer/wandb/…`): a finished run is
read from there with no network; a run that was still running is pulled again when it has
been updated since; `--refresh` always pulls.

Every failure (no key, unknown run, no permission, no network, rate limit, server error)
becomes one InputError line; calls time out after `TIMEOUT_S`. The API key is never shown.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loganalyzer.errors import InputError
from loganalyzer.sources import REFRESH_REMOTE as REFRESH

# Seconds any one W&B API call may take (the client's default is 19 s per attempt).
TIMEOUT_S = 4
# Seconds the first contact (credentials, the run's record) may take, retries included: the
# client retries a refused connection until its timeout, several times over.
CONNECT_DEADLINE_S = 4.0
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
    try:
        return _pull(source, ref, cached)
    except InputError:
        raise
    except Exception as exc:  # the client raises many kinds, not all wandb.Error
        raise InputError(f"{source}: {_explain(exc)}") from None


def _pull(source: str, ref: RunRef, cached: Pulled | None) -> Pulled:
    run = _first_contact(source, ref)
    state = str(run.state)
    updated = str(getattr(run, "heartbeatAt", None) or "") or None
    if cached is not None and not REFRESH.get() and cached.updated == updated:
        return cached
    rows: list[dict[str, Any]] = []
    for row in run.scan_history(page_size=1000):
        rows.append(dict(row))
        if len(rows) % 10_000 == 0:
            print(f"  {source}: {len(rows):,} history rows pulled", file=sys.stderr)
    metadata = run.metadata or {}
    pulled = Pulled(
        state=state,
        updated=updated,
        config=dict(run.config),
        summary=_plain(run.summary),
        metadata=metadata if isinstance(metadata, dict) else {},
        history=rows,
    )
    _write_cache(ref, pulled)
    return pulled


def _first_contact(source: str, ref: RunRef) -> Any:
    """The run's record from the API, or InputError once `CONNECT_DEADLINE_S` has passed.

    The call runs on a daemon thread: a client still retrying past the deadline is left
    behind and ends with the process."""
    import wandb

    outcome: dict[str, Any] = {}

    def contact() -> None:
        try:
            outcome["run"] = wandb.Api(timeout=TIMEOUT_S).run(ref.path())
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=contact, daemon=True)
    worker.start()
    worker.join(CONNECT_DEADLINE_S)
    if "error" in outcome:
        raise outcome["error"]
    if "run" not in outcome:
        base = os.environ.get("WANDB_BASE_URL", "the W&B server")
        raise InputError(
            f"{source}: no answer from {base} within {CONNECT_DEADLINE_S:.0f} s;"
            " check the network and WANDB_BASE_URL"
        )
    return outcome["run"]


def _plain(summary: Any) -> dict[str, Any]:
    """A run summary as plain JSON values (media and nested objects as they are)."""
    try:
        return {key: summary[key] for key in summary.keys()}  # noqa: SIM118 (not a dict)
    except Exception:
        return {}


def _cache_file(ref: RunRef) -> Path:
    return cache_root() / (ref.entity or "_default") / ref.project / f"{ref.run_id}.json"


def _read_cache(ref: RunRef) -> Pulled | None:
    try:
        values = json.loads(_cache_file(ref).read_text(encoding="utf-8"))
        return Pulled(**values, from_cache=True)
    except (OSError, ValueError, TypeError):
        return None


def _write_cache(ref: RunRef, pulled: Pulled) -> None:
    """Written whole to a temporary name first, so that an interrupted pull leaves no
    half-written cache behind."""
    path = _cache_file(ref)
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
    text = " ".join(str(exc).split()) or type(exc).__name__
    key = os.environ.get("WANDB_API_KEY")
    if key:
        text = text.replace(key, "***")
    lowered = text.lower()
    if "api key" in lowered or "login" in lowered:
        hint = "set WANDB_API_KEY or run `wandb login`"
    elif "could not find run" in lowered or "not found" in lowered or "invalid path" in lowered:
        hint = "check the entity, project and run ID"
    elif "permission" in lowered or "403" in lowered or "401" in lowered:
        hint = "the key has no access to this run"
    elif "429" in lowered or "rate" in lowered:
        hint = "W&B is rate-limiting; try again later"
    else:
        hint = "check the network and WANDB_BASE_URL"
    return f"W&B could not be read ({type(exc).__name__}: {text[:200]}); {hint}"
