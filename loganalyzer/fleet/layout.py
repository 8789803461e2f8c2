"""The dataset's layout (schema loganalyzer.index/2), documented in the README:

    DATASET/
      dataset.json            {"schema": "loganalyzer.index/2", "tool_version": ...}
      manifest.parquet        one row per run: its inputs, status and error (MANIFEST_SCHEMA)
      runs.parquet            one row per run: its headline figures (document.RUNS_SCHEMA)
      files.parquet           every file seen under the roots, and its parser ("" for none)
      runs/<key>/summary.json         the run's summary document (loganalyzer.summary/1.x)
      runs/<key>/iterations.parquet   its per-iteration table, with a run_id column first
      runs/<key>/metrics.parquet      its long metrics table, with a run_id column first
      runs/<key>/report.html          with --reports: its HTML report, as `report` writes it
      runs/<key>/entry.json           the run's manifest entry and runs row, renamed into place
                                      with its tables (what a killed index is recovered from)
      index.lock                      while an index writes: its pid, host and start
      index.pending                   while an index writes: it has not saved the manifest yet

A run id names where a run was read: its folder's name (the root's name and the folder's path
relative to the root, `/` between) or the W&B reference as listed with its password masked,
with `#N` after it where the folder holds several runs (`run_id`). In the name (`unit_name`),
`%` is written `%25` and `#` `%23`, so the `#N` of a run is the only `#` an id holds: the second
run of folder `x` (`x#2`) and a folder named `x#2` (`x%232`) never share an id.

`<key>` is the run id made safe as a folder name, never starting with `.` (its last 80
characters; `/` as `__`, other characters but letters, digits, `.`, `_` and `-` as `_`), then
`-` and 16 hex digits of the BLAKE2b hash of the whole id (`run_key`). The index's own
temporary and backup folders under `runs/` all start with `.` (`temporary_name`,
`backup_name`) and the clean-up takes only those (`is_leftover`), so no run's folder is ever
taken for one.
"""

from __future__ import annotations

import hashlib
import re

INDEX_SCHEMA = "loganalyzer.index/2"
DATASET_JSON = "dataset.json"
MANIFEST = "manifest.parquet"
RUNS = "runs.parquet"
FILES = "files.parquet"
RUNS_DIR = "runs"
SUMMARY = "summary.json"
ITERATIONS = "iterations.parquet"
METRICS = "metrics.parquet"
REPORT = "report.html"
RECORD = "entry.json"
LOCK = "index.lock"
PENDING = "index.pending"


# What the index's own folders under runs/ start with: a run being written, a run's previous
# folder being replaced. Both start with `.`, which no key does.
TEMPORARY = ".tmp-"
BACKUP = ".old-"
KEY_SLUG = 80


def unit_name(name: str) -> str:
    """A folder's (or reference's) name as it starts a run id: `%` and `#` escaped, so that
    `#` only ever separates a run's number."""
    return name.replace("%", "%25").replace("#", "%23")


def run_id(unit: str, number: int, runs: int) -> str:
    """The id of the `number`-th of the `runs` runs read from `unit` (a `unit_name`)."""
    return unit if runs == 1 else f"{unit}#{number}"


def run_key(run_id: str) -> str:
    """A folder name for a run id: readable, unique per id (a 64-bit hash of all of it, not
    of the part kept readable), and never starting with `.`."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", run_id.replace("/", "__"))[-KEY_SLUG:]
    digest = hashlib.blake2b(run_id.encode("utf-8", "surrogatepass"), digest_size=8)
    return f"{readable.lstrip('.') or 'run'}-{digest.hexdigest()}"


def temporary_name(key: str, pid: int) -> str:
    """Where a worker writes a run's folder before renaming it into place."""
    return f"{TEMPORARY}{key}-{pid}"


def backup_name(key: str, pid: int) -> str:
    """Where a run's previous folder goes while its new one is renamed into place."""
    return f"{BACKUP}{key}-{pid}"


def is_leftover(name: str) -> bool:
    """A folder under runs/ that an interrupted index left (a temporary or a backup): never
    a run's key, which does not start with `.`."""
    return name.startswith((TEMPORARY, BACKUP))
