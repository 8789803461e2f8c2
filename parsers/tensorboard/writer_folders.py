"""The sub-folders a SummaryWriter writes beside its own event file, read as part of its run.

torch's and tensorboardX's SummaryWriter write two things into folders of their own below
the writer's folder, each an event file of its own:

- `add_scalars(main_tag, {key: value})`: each key's series into `<main_tag>/<key>/`
  (tensorboardX 2.x: `os.path.join(logdir, main_tag, tag)`) or
  `<main_tag with "/" as "_">_<key>/` (torch.utils.tensorboard and tensorboardX 1.x:
  `fw_logdir + "/" + main_tag.replace("/", "_") + "_" + tag`), every event tagged
  `main_tag`. The folder's name qualifies the tag: the series is `<main_tag>/<key>`, and
  `add_scalars("throughput", {"samples_per_s": ...})` is not Megatron's `throughput`.
- `add_hparams(hparam_dict, metric_dict)`: the hyper-parameters (the hparams plugin's
  session-start record) and the metrics into `<str(time.time())>/` (or the run name given).

So an event file in a folder that holds event files of its own, whose path from that
folder is `<its tag>/<key>` or `<its tag>_<key>`, or that holds hparams one level below it,
was written by that folder's writer: it is read with that folder's event file (the latest
created no later than it, when a run was relaunched into the same folder), not as a run of
its own. Any other sub-folder (a run of its own, a relaunch into a new folder) is read as
before: on its own, then told apart or joined by the run-identity rules.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from loganalyzer.errors import InputError
from loganalyzer.parsers.tensorboard.events import Decoded, scalars
from loganalyzer.parsers.tensorboard.tfrecord import Framer, read_file

FILE_MARKER = "tfevents"
# The creation time in an event file's name: `events.out.tfevents.<seconds>.<host>...`.
CREATED = re.compile(r"tfevents\.(\d+)")
# How far above an event file its writer's folder is looked for: a main tag of up to
# this many "/"-separated parts, plus the key's folder.
MAX_DEPTH = 6


@dataclass(frozen=True)
class Child:
    """An event file a writer wrote in a sub-folder: what it is, and its tag renamed to the
    series it holds (add_scalars), none for hparams."""

    path: Path
    what: str
    renamed: dict[str, str]


def owner(path: Path) -> tuple[Path, Child] | None:
    """The event file that reads `path` as part of its run, and what `path` is to it; None
    when `path` is read on its own."""
    peeked: tuple[set[str], bool] | None = None
    for folder in list(path.parent.parents)[:MAX_DEPTH]:
        parents = event_files(folder)
        if not parents:
            continue
        peeked = peeked or _peek(path)
        child = _child(folder, path, peeked)
        if child is not None:
            return _reader(parents, path), child
    return None


def children(path: Path) -> list[Child]:
    """The event files below `path`'s folder that its writer wrote and `path` reads (of
    several event files there, each reads those created after it and before the next)."""
    folder = path.parent
    parents = event_files(folder)
    found = []
    for root, folders, files in os.walk(folder):
        depth = len(Path(root).relative_to(folder).parts)
        folders[:] = sorted(folders) if depth < MAX_DEPTH else []
        if depth == 0:
            continue
        for name in sorted(files):
            candidate = Path(root) / name
            if FILE_MARKER not in name or not candidate.is_file():
                continue
            if _reader(parents, candidate) != path:
                continue
            child = _child(folder, candidate, _peek(candidate))
            if child is not None:
                found.append(child)
    return found


def event_files(folder: Path) -> list[Path]:
    """The event files directly in `folder`, in the order they were created."""
    try:
        files = [p for p in folder.iterdir() if FILE_MARKER in p.name and p.is_file()]
    except OSError:
        return []
    return sorted(files, key=lambda p: (_created(p), p.name))


def _reader(parents: list[Path], child: Path) -> Path:
    """Of a folder's event files, the one that reads `child`: the latest created no later
    than it (the writer's own file is created before the sub-folders it writes)."""
    created = _created(child)
    earlier = [p for p in parents if _created(p) <= created]
    return earlier[-1] if earlier else parents[0]


def _created(path: Path) -> int:
    found = CREATED.search(path.name)
    return int(found.group(1)) if found else 0


def _child(folder: Path, path: Path, peeked: tuple[set[str], bool]) -> Child | None:
    """What `path` (below `folder`, its first tags and hparams `peeked`) is to `folder`'s
    writer, or None if it is not its."""
    relative = path.parent.relative_to(folder).as_posix()
    tags, hparams = peeked
    if hparams and "/" not in relative:
        return Child(path, "add_hparams", {})
    if len(tags) != 1:
        return None
    (tag,) = tags
    series = series_name(relative, tag)
    if series is None:
        return None
    return Child(path, f"add_scalars series {series!r}", {tag: series})


def series_name(relative: str, tag: str) -> str | None:
    """The series of an add_scalars folder (its path below the writer's folder) whose
    events carry `tag`, or None if the folder is not one of `tag`'s."""
    for prefix in (f"{tag}/", f"{tag.replace('/', '_')}_"):
        key = relative.removeprefix(prefix) if relative.startswith(prefix) else ""
        if key and "/" not in key:
            return f"{tag}/{key}"
    return None


def _peek(path: Path) -> tuple[set[str], bool]:
    """The scalar tags of the first chunk of an event file's records, and whether they
    hold the hparams plugin's hyper-parameters (what tells a writer's sub-folder); none
    for a file that cannot be read."""
    try:
        data, mapping = read_file(path)
    except InputError:
        return set(), False
    decoded = Decoded()
    first = next(iter(Framer(data, mapping)), None)
    names = set() if first is None else set(scalars(first, decoded)["name"].unique().to_list())
    del first, data
    if mapping is not None:
        mapping.close()
    return names, bool(decoded.hparams)
