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

A run id is its folder's (root name and relative path), `#N` after it where the folder holds
several runs, or the W&B reference as listed. `<key>` is the run id made safe as a folder
name, plus a short hash that keeps two ids apart.
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


def run_key(run_id: str) -> str:
    """A folder name for a run id: readable, and unique per id."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", run_id.replace("/", "__"))[-80:]
    digest = hashlib.blake2b(run_id.encode(), digest_size=4).hexdigest()
    return f"{readable}-{digest}"
