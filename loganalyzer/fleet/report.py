"""The fleet document (schema loganalyzer.fleet/3): every run's row, the runs grouped by
configuration with regressions flagged, and GPU-hours lost by cause, computed with polars
lazy scans of the dataset's runs table (one row per run: the steps of all runs are never
loaded).

A run is a regression when its steady step time exceeds its group's recent median by more
than the group's noise:

    baseline  = median step time of the previous WINDOW runs of the group (at least HISTORY)
    noise     = (p75 - p25) / 1.349 of those runs (the IQR as a normal standard deviation)
    regressed = step_time > baseline + max(SIGMAS · noise, MIN_SLOWDOWN · baseline)

How runs ended (`endings`): the runs read (not those that could not be) counted by their
outcome's status and reason, with what each ending cost:

    gpu_hours            the GPU-hours those runs held, as their logs cover them (the budget)
    lost_gpu_hours       the GPU-hours their budgets lost (start-up, slow steps, restarts...)
    lost_hang_gpu_hours  of those, the hang before the ending (the budget's line: GPUs x
                         seconds from the last progress to the kill or timeout that ended
                         the run); `hang_unknown` counts hung runs without it

A crash or a kill also throws away the work since the last checkpoint; one run's log does not
say how much of it is redone (a resumed run's budget shows it as "redone work" when the
restart is in its log), so it is not counted as lost to the ending: the GPU-hours those runs
held are given instead. Runs indexed before outcomes existed have a null status.

A run failed (`failed`) when it could not be read, logged no iteration, or ended crashed,
hung or killed. A run whose log just stops (`unknown`) is counted among the endings but not
as failed: a log copied while its run went on, or cut before its end, stops the same way.
A rank or host recurs (`recurring`) when the outcomes of at least RECURRING failed runs name
it as where the failure was.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import datetime
from pathlib import PurePath
from typing import Any
from urllib.parse import quote

import polars as pl

from loganalyzer import __version__
from loganalyzer.analysis.goodput import LOST_CAUSES
from loganalyzer.analysis.outcome import FAILED_ENDINGS
from loganalyzer.errors import InputError
from loganalyzer.fleet.document import NO_ITERATIONS, RUNS_SCHEMA
from loganalyzer.fleet.layout import REPORT, RUNS, RUNS_DIR
from loganalyzer.fleet.storage import Location, locate

FLEET_SCHEMA = "loganalyzer.fleet/3"
WINDOW = 8
HISTORY = 3
SIGMAS = 3.0
MIN_SLOWDOWN = 0.05
MOST_LOST = 10
RECURRING = 2
# The order endings are listed in (worst first).
ENDING_ORDER = (*FAILED_ENDINGS, "unknown", "stopped", "completed")
NATIVE_PROTOCOLS = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "http", "https")


def scan_runs(dataset: Location) -> pl.LazyFrame:
    """A lazy scan of the dataset's runs table (polars reads object stores itself; other
    fsspec stores are read through fsspec), with the columns an older version did not write
    as nulls."""
    runs = _scan(dataset)
    present = runs.collect_schema().names()
    missing = [pl.lit(None, kind).alias(n) for n, kind in RUNS_SCHEMA.items() if n not in present]
    return runs.with_columns(missing) if missing else runs


def _scan(dataset: Location) -> pl.LazyFrame:
    where = dataset.join(RUNS)
    if not where.fs.exists(where.path):
        raise InputError(
            f"{dataset.url()}: no {RUNS} here; build the dataset with `loganalyzer index`"
        )
    # a path, never a pattern: a dataset folder may be named with `[`, `?` or `*`
    if where.local:
        return pl.scan_parquet(where.path, glob=False)
    protocol = where.fs.protocol if isinstance(where.fs.protocol, str) else where.fs.protocol[0]
    if protocol in NATIVE_PROTOCOLS:
        return pl.scan_parquet(where.url(), glob=False)
    with where.fs.open(where.path, "rb") as stream:
        return pl.read_parquet(stream.read()).lazy()


def build_fleet(dataset_url: str) -> dict[str, Any]:
    """The fleet document of the dataset at `dataset_url`."""
    runs = scan_runs(locate(dataset_url))
    ok = pl.col("status") == "ok"
    failed = _failed()
    flagged = _with_regressions(runs.filter(ok & pl.col("step_time_s").is_not_null()))
    totals = runs.select(
        pl.len().alias("runs"),
        ok.sum().alias("analysed"),
        failed.sum().alias("failed"),
        (pl.col("status") == "error").sum().alias("not_read"),
        (pl.col("status") == NO_ITERATIONS).sum().alias("no_iterations"),
        pl.col("lost_hang_gpu_hours").sum().alias("lost_hang_gpu_hours"),
        pl.col("gpu_hours").sum().alias("gpu_hours"),
        pl.col("lost_gpu_hours").sum().alias("lost_gpu_hours"),
        (ok & pl.col("gpu_hours").is_null()).sum().alias("runs_without_gpu_hours"),
        *[pl.col(f"lost_{c}_gpu_hours").sum().alias(c) for c in LOST_CAUSES],
    ).collect()
    total = totals.row(0, named=True)
    ordered = runs.join(
        flagged.lazy().select("run_id", "regression", "baseline_s", "slowdown"),
        on="run_id",
        how="left",
    ).sort(
        [ok, failed, pl.col("lost_gpu_hours"), pl.col("mfu")],
        descending=[False, True, True, False],
        nulls_last=True,
    )
    rows = ordered.drop("config").collect().to_dicts()
    regressions = _regressions(flagged)
    return {
        "schema": FLEET_SCHEMA,
        "tool_version": __version__,
        "dataset": dataset_url,
        "totals": {k: total[k] for k in TOTALS},
        "lost_by_cause_gpu_hours": {c: total[c] for c in LOST_CAUSES},
        "endings": _endings(runs),
        "recurring": _recurring(runs.filter(failed)),
        "most_lost": _most_lost(runs),
        "failed": _failed_runs(runs.filter(failed)),
        "regressions": regressions,
        "groups": _groups(flagged),
        "runs": _plain_rows(rows),
        "method": {
            "window": WINDOW,
            "history": HISTORY,
            "sigmas": SIGMAS,
            "min_slowdown": MIN_SLOWDOWN,
            "rule": "regressed when step_time > baseline + max(sigmas·noise, "
            "min_slowdown·baseline); baseline = median of the previous `window` runs of the "
            "same configuration (at least `history`), noise = IQR/1.349 of them",
        },
    }


TOTALS = (
    "runs",
    "analysed",
    "failed",
    "not_read",
    "no_iterations",
    "gpu_hours",
    "lost_gpu_hours",
    "lost_hang_gpu_hours",
    "runs_without_gpu_hours",
)


def _failed() -> pl.Expr:
    """A run that could not be read, logged no iteration, or ended in a failure."""
    return (pl.col("status") != "ok") | pl.col("outcome_status").is_in(FAILED_ENDINGS)


def _endings(runs: pl.LazyFrame) -> list[dict[str, Any]]:
    """The runs read, counted by ending (status and reason), worst first, with the GPU-hours
    they held, their budgets lost and their hangs held."""
    status = pl.col("outcome_status")
    rank = status.replace_strict(
        {s: n for n, s in enumerate(ENDING_ORDER)}, default=len(ENDING_ORDER), return_dtype=pl.Int64
    )
    counted = (
        runs.filter(pl.col("status") != "error")
        .group_by("outcome_status", "outcome_reason")
        .agg(
            pl.len().alias("runs"),
            pl.col("gpu_hours").sum(),
            pl.col("lost_gpu_hours").sum(),
            pl.col("lost_hang_gpu_hours").sum(),
            ((status == "hung") & ~(pl.col("lost_hang_gpu_hours") > 0).fill_null(False))
            .sum()
            .alias("hang_unknown"),
            rank.first().alias("order"),
        )
        .sort("order", "runs", "outcome_reason", descending=[False, True, False])
        .drop("order")
        .rename({"outcome_status": "status", "outcome_reason": "reason"})
        .collect()
    )
    return _plain_rows(counted.to_dicts())


def _recurring(failed: pl.LazyFrame) -> dict[str, list[dict[str, Any]]]:
    """The ranks and hosts named as where the failure was by at least RECURRING failed runs,
    most runs first, with those runs."""
    found = {}
    for field, name in (("outcome_rank", "rank"), ("outcome_host", "host")):
        counted = (
            failed.filter(pl.col(field).is_not_null())
            .group_by(field)
            .agg(pl.len().alias("runs"), pl.col("run_id").sort().alias("run_ids"))
            .filter(pl.col("runs") >= RECURRING)
            .sort(["runs", field], descending=[True, False])
            .rename({field: name})
            .collect()
        )
        found[f"{name}s"] = counted.to_dicts()
    return found


def _failed_runs(failed: pl.LazyFrame) -> list[dict[str, Any]]:
    """The failed runs, in run-id order: how each ended and its error line (the outcome's
    message, else the error the index recorded)."""
    listed = failed.select(
        "run_id",
        "status",
        pl.col("outcome_status").alias("ending"),
        pl.col("outcome_reason").alias("reason"),
        pl.col("outcome_exception").alias("exception"),
        pl.col("outcome_rank").alias("rank"),
        pl.col("outcome_host").alias("host"),
        pl.col("outcome_last_iteration").alias("last_iteration"),
        "hang_s",
        "lost_hang_gpu_hours",
        "gpu_hours",
        pl.coalesce("outcome_message", "error").alias("error"),
    ).sort("run_id")
    return _plain_rows(listed.collect().to_dicts())


def _with_regressions(ok_runs: pl.LazyFrame) -> pl.DataFrame:
    """Analysed runs in time order within their configuration, with the baseline, noise and
    verdict of each."""
    prior = pl.col("step_time_s").shift(1).over("config_key")

    def rolling(q: float) -> pl.Expr:
        return prior.rolling_quantile(q, window_size=WINDOW, min_samples=HISTORY).over("config_key")

    baseline = rolling(0.5)
    noise = (rolling(0.75) - rolling(0.25)) / 1.349
    threshold = pl.max_horizontal(SIGMAS * noise, MIN_SLOWDOWN * baseline)
    return (
        ok_runs.sort("config_key", "started", "run_id", nulls_last=True)
        .with_columns(
            baseline.alias("baseline_s"), noise.alias("noise_s"), threshold.alias("threshold_s")
        )
        .with_columns(
            (pl.col("step_time_s") > pl.col("baseline_s") + pl.col("threshold_s"))
            .fill_null(False)
            .alias("regression"),
            (pl.col("step_time_s") / pl.col("baseline_s") - 1).alias("slowdown"),
        )
        .collect()
    )


def _regressions(flagged: pl.DataFrame) -> list[dict[str, Any]]:
    """Each regressed run with its baseline and the config difference that came with it:
    the settings every run of the window shared and this run changed."""
    found = []
    for group in flagged.partition_by("config_key", maintain_order=True):
        rows = group.to_dicts()
        for n, row in enumerate(rows):
            if not row["regression"]:
                continue
            window = rows[max(0, n - WINDOW) : n]
            found.append(
                {
                    "run_id": row["run_id"],
                    "config_key": row["config_key"],
                    "config_label": row["config_label"],
                    "started": row["started"],
                    "step_time_s": row["step_time_s"],
                    "baseline_s": row["baseline_s"],
                    "noise_s": row["noise_s"],
                    "threshold_s": row["threshold_s"],
                    "slowdown": row["slowdown"],
                    "mfu": row["mfu"],
                    "previous_run": window[-1]["run_id"] if window else None,
                    "config_changes": _changes(row, window),
                }
            )
    return _plain_rows(sorted(found, key=lambda r: -float(r["slowdown"])))


def _changes(row: Mapping[str, Any], window: list[dict[str, Any]]) -> list[dict[str, Any]]:
    mine = json.loads(row["config"] or "{}")
    before = [json.loads(r["config"] or "{}") for r in window]
    changes = []
    for key in sorted(set(mine) | set().union(*before)):
        values = {json.dumps(b.get(key), default=str) for b in before}
        if len(values) == 1 and json.dumps(mine.get(key), default=str) not in values:
            changes.append({"key": key, "before": before[-1].get(key), "after": mine.get(key)})
    return changes


def _groups(flagged: pl.DataFrame) -> list[dict[str, Any]]:
    summary = (
        flagged.group_by("config_key", maintain_order=True)
        .agg(
            pl.col("config_label").first().alias("label"),
            pl.len().alias("runs"),
            pl.col("step_time_s").median().alias("median_step_time_s"),
            pl.col("mfu").median().alias("median_mfu"),
            pl.col("gpu_hours").sum().alias("gpu_hours"),
            pl.col("regression").sum().alias("regressions"),
            pl.struct("run_id", "started", "step_time_s", "mfu", "regression").alias("points"),
        )
        .sort("gpu_hours", descending=True, nulls_last=True)
    )
    return _plain_rows(summary.to_dicts())


def _most_lost(runs: pl.LazyFrame) -> list[dict[str, Any]]:
    top = (
        runs.filter(pl.col("lost_gpu_hours") > 0)
        .sort("lost_gpu_hours", descending=True)
        .head(MOST_LOST)
        .select(
            "run_id",
            "lost_gpu_hours",
            "gpu_hours",
            *[f"lost_{c}_gpu_hours" for c in LOST_CAUSES],
        )
        .collect()
    )
    return _plain_rows(top.to_dicts())


def _plain_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: _plain(v) for k, v in row.items()} for row in rows]


def _plain(value: Any) -> Any:
    """Datetimes as ISO 8601 text, for JSON."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def report_links(document: Mapping[str, Any], html_path: str | None) -> dict[str, str]:
    """Run id to the run's own report, for the runs that have one in the dataset: a relative
    link from the page's folder when both are local (so that the dataset, with the page
    inside it or beside it, can be moved or zipped), else the report's URL."""
    dataset = locate(document["dataset"])
    links = {}
    for row in document["runs"]:
        report = dataset.join(RUNS_DIR, row["key"], REPORT)
        if not report.fs.exists(report.path):
            continue
        if report.local and html_path is not None:
            start = os.path.dirname(os.path.abspath(html_path))
            relative = PurePath(os.path.relpath(report.path, start)).as_posix()
            links[row["run_id"]] = quote(relative)
        else:
            links[row["run_id"]] = report.url()
    return links
