"""The base model of a PEFT adapter: its `config.json`, found without the network.

A LoRA output_dir holds the adapter only; `adapter_config.json` names the base model in
`base_model_name_or_path`, a local folder or a Hugging Face hub ID. Its shape is looked for,
in this order, where the user's machine keeps it:

1. that name as a local path (a folder with `config.json`, or the file itself), taken as
   given and relative to the output_dir;
2. the local Hugging Face cache, as `huggingface_hub` lays it out:
   `$HF_HUB_CACHE` (else `$HF_HOME/hub`, else `~/.cache/huggingface/hub`)
   `/models--ORG--NAME/snapshots/<commit>/config.json`, the commit that `refs/<revision>`
   (`main` unless the adapter names a revision) points to.

Nothing is downloaded: loganalyzer uses no network for local runs.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

# A hub model ID: `NAME` or `ORG/NAME` (letters, digits, `-`, `_`, `.`).
HUB_ID = re.compile(r"[\w.-]{1,96}(?:/[\w.-]{1,96})?")
COMMIT = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class Found:
    """A base model's config.json and how it was found (said in the provenance)."""

    path: Path
    how: str


def hub_cache() -> Path:
    """The Hugging Face hub cache folder, resolved from the environment as huggingface_hub
    resolves it."""
    for variable in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(variable):
            return Path(os.environ[variable]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "huggingface" / "hub"


def find_base_config(root: Path, name: str, revision: str | None) -> tuple[Found | None, str]:
    """The base model's config.json, or None; and the places looked, for the warning."""
    for candidate in dict.fromkeys([Path(name).expanduser(), root / name]):
        try:
            path = candidate / "config.json" if candidate.is_dir() else candidate
            if path.name == "config.json" and path.is_file():
                return Found(path, f"the adapter's base model {name}, a local path"), ""
        except (OSError, ValueError):  # a name no file system holds (too long, a NUL)
            continue
    looked = f"no config.json at {name}"
    if not HUB_ID.fullmatch(name):
        return None, looked
    cache = hub_cache()
    folder = cache / f"models--{name.replace('/', '--')}"
    snapshot = _snapshot(folder, revision or "main")
    if snapshot is not None:
        how = f"the adapter's base model {name}, from the Hugging Face cache"
        return Found(snapshot, how), ""
    return None, f"{looked} nor in the Hugging Face cache {folder}"


def _snapshot(folder: Path, revision: str) -> Path | None:
    """The cached config.json of `revision` (a commit, or a branch or tag in refs/)."""
    commit = revision if COMMIT.fullmatch(revision) else None
    ref = folder / "refs" / revision
    if commit is None and ref.is_file():
        try:
            commit = ref.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            commit = None
    if commit is None or not COMMIT.fullmatch(commit):
        return None
    path = folder / "snapshots" / commit / "config.json"
    return path if path.is_file() else None
