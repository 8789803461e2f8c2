"""`loganalyzer index`: a tree of runs into a Parquet dataset, incrementally and in parallel."""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import click

from loganalyzer.commands.options import (
    model_options,
    overrides_from_options,
    slow_factor_option,
    warmup_option,
)
from loganalyzer.errors import UsageProblem
from loganalyzer.terminal import echo, warn

_INDEX_HELP = """Index every run under ROOTS into the Parquet dataset --out.

Each folder holding logs a parser recognises is read once, and its runs told apart as
`summary --split-runs` tells them (a folder may hold several runs; a run's restarts in
several files are one run). A ROOT that is a text file of W&B run references
(wandb:ENTITY/PROJECT/RUN_ID or run URLs, one a line, # comments) names runs pulled through
the W&B API (cached). Each run is analysed exactly as `summary` does (the model and hardware
options apply to every run), and the dataset gets its per-iteration and metrics tables
(Parquet), its summary document (JSON), with --reports its HTML report (as `report` writes
it), and a row in manifest.parquet (inputs with size, modification time and fingerprint;
status; error) and runs.parquet (headline figures). A second index reads only folders that
are new or changed, or were analysed by an older schema, with other options or without the
reports now asked for (all with --rebuild). A run that cannot be read is recorded with its
error; the rest goes on (exit 0), as does a folder whose worker process died (the
out-of-memory killer: `worker died: signal 9`) or that took longer than --run-timeout
(`timed out after N s`); such a run is read again when its files change, or with --rebuild.
A temporary folder or a dataset that cannot take what is written (full, not writable) stops
the index (exit 1), keeping the runs done.

Killed at any instant (kill -9, the out-of-memory killer), an index keeps every run it had
written: the next one recovers them, and clears what was left half-written. SIGTERM (what
slurm and Kubernetes send) and Ctrl-C stop it cleanly: the runs done are kept, and it exits
143 (SIGTERM) or 130 (Ctrl-C). One index at a time writes a dataset: a second one refuses
(exit 1, naming the pid and host of the one writing), or waits with --wait; a lock left by
an index that was killed is taken over with a warning.

ROOTS and --out may be local paths or fsspec URLs (s3://, gs://, file://, memory://).

\b
Examples:
  loganalyzer index /shared/runs --out fleet-index/ --gpu h100-sxm
  loganalyzer index /shared/runs --out fleet-index/ --gpu h100-sxm --reports
  loganalyzer index /shared/runs wandb-runs.txt --out fleet-index/
  loganalyzer index runs-2025q3/ runs-2025q4/ --out fleet-index/ --jobs 8
  loganalyzer index s3://bucket/runs --out s3://bucket/fleet-index --engine ray
  loganalyzer index /shared/runs --out fleet-index/ --rebuild --json
  loganalyzer index /shared/runs --out fleet-index/ --run-timeout 600 --wait
"""
RUN_TIMEOUT_S = 1800
EXIT_SIGINT = 130
EXIT_SIGTERM = 143


@click.command("index", help=_INDEX_HELP)
@click.argument("roots", nargs=-1, required=True)
@click.option("--out", "dataset", required=True, metavar="DATASET", help="The dataset folder.")
@click.option(
    "--engine",
    type=click.Choice(["pool", "ray"]),
    default="pool",
    show_default=True,
    help="A local process pool, or Ray (RAY_ADDRESS, else a local cluster).",
)
@click.option(
    "--jobs",
    type=click.IntRange(min=0),
    default=0,
    help="Worker processes (Ray CPUs for a local cluster); 0 = every local core.",
)
@click.option("--rebuild", is_flag=True, help="Analyse every run again.")
@click.option(
    "--run-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=RUN_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="Record a folder (its runs) still being read after this long as an error"
    " ('timed out after N s'), and go on with the others.",
)
@click.option(
    "--wait",
    is_flag=True,
    help="Wait for another index writing into --out to finish, instead of refusing.",
)
@click.option(
    "--reports",
    is_flag=True,
    help="Write each run's HTML report into the dataset (runs/<key>/report.html).",
)
@warmup_option
@slow_factor_option
@click.option("--json", "as_json", is_flag=True, help="Print what was done as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress or warnings on stderr.")
@model_options
def index_command(
    roots: tuple[str, ...],
    dataset: str,
    engine: str,
    jobs: int,
    rebuild: bool,
    run_timeout: float,
    wait: bool,
    reports: bool,
    warmup: int | None,
    slow_factor: float,
    as_json: bool,
    quiet: bool,
    **facts: Any,
) -> None:
    from loganalyzer.fleet.engines import make_engine
    from loganalyzer.fleet.indexer import build_index
    from loganalyzer.fleet.worker import Settings

    if dataset.startswith("memory://") and (engine == "ray" or jobs != 1):
        raise UsageProblem("a memory:// dataset lives in one process: pass --jobs 1")
    settings = Settings(overrides_from_options(**facts), warmup, slow_factor)
    progress = _Progress(quiet)
    say = _warner(quiet)
    try:
        with _sigterm_as_interrupt():
            result = build_index(
                list(roots),
                dataset,
                settings,
                make_engine(engine, jobs, run_timeout),
                rebuild=rebuild,
                reports=reports,
                wait=wait,
                planned=progress.planned,
                finished=progress.finished,
                say=say,
            )
    except (KeyboardInterrupt, _Terminated) as stop:
        progress.close()
        terminated = isinstance(stop, _Terminated)
        echo(
            f"Error: index interrupted ({'SIGTERM' if terminated else 'Ctrl-C'}):"
            f" the {progress.runs} runs done in it are kept; the next `index` goes on"
            " from there",
            err=True,
        )
        sys.exit(EXIT_SIGTERM if terminated else EXIT_SIGINT)
    progress.close()
    if not quiet:
        for run_id, error in result.failed:
            warn(f"{run_id}: {error}")
        reasons = ", ".join(f"{n} {why}" for why, n in sorted(result.reasons.items()))
        rate = result.bytes_analysed / 1e6 / result.seconds if result.seconds else 0.0
        echo(
            f"{result.found} runs found: {result.analysed} analysed"
            + (f" ({reasons})" if reasons else "")
            + f", {result.skipped} skipped as unchanged, {len(result.failed)} failed;"
            f" {result.bytes_analysed / 1e6:.3g} MB at {rate:.3g} MB/s in {result.seconds:.1f} s",
            err=True,
        )
    if as_json:
        echo(
            json.dumps(
                {
                    "dataset": dataset,
                    "found": result.found,
                    "analysed": result.analysed,
                    "skipped": result.skipped,
                    "reports": result.reports,
                    "reasons": dict(result.reasons),
                    "failed": [{"run_id": r, "error": e} for r, e in result.failed],
                    "folders_passed_over": result.folders_passed_over,
                    "bytes_analysed": result.bytes_analysed,
                    "seconds": result.seconds,
                },
                indent=2,
            )
        )


class _Terminated(BaseException):
    """SIGTERM, stopping the index as Ctrl-C does (not an Exception: nothing records it)."""


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (slurm's scancel and time limit, Kubernetes' pod deletion) stops the index as
    Ctrl-C does: the runs done are saved. A stop that comes while the tables are written
    waits for the write (`fleet.shield`). A second SIGTERM while they are saved is ignored
    (the SIGKILL that follows one cannot be)."""
    from loganalyzer.fleet.shield import stop_now

    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def terminate(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_now(_Terminated())

    def interrupt(signum: int, frame: Any) -> None:
        stop_now(KeyboardInterrupt())

    before = signal.signal(signal.SIGTERM, terminate), signal.signal(signal.SIGINT, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, before[0])
        signal.signal(signal.SIGINT, before[1])


def _warner(quiet: bool) -> Callable[[str], None]:
    def say(message: str) -> None:
        if not quiet:
            warn(message)

    return say


class _Progress:
    """Runs done, MB/s and ETA on stderr while the engine works."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.bar: Any = None
        self.began = time.perf_counter()
        self.done_bytes = 0
        self.runs = 0

    def planned(self, folders: int, size: int) -> None:
        if self.quiet or folders == 0:
            return
        self.began = time.perf_counter()
        self.bar = click.progressbar(
            length=folders,
            label=f"reading {folders} folders ({size / 1e6:.1f} MB)",
            file=sys.stderr,
            show_pos=True,
            show_eta=True,
            item_show_func=self._rate,
        )
        self._guarded(self.bar.__enter__)

    def finished(self, outcomes: list[Any]) -> None:
        self.runs += len(outcomes)
        if self.bar is None:
            return
        sizes = {s["url"]: s["size"] for o in outcomes for s in o.entry["sources"]}
        self.done_bytes += sum(int(size or 0) for size in sizes.values())
        self._guarded(self.bar.update, 1, outcomes)

    def close(self) -> None:
        if self.bar is not None:
            self._guarded(self.bar.__exit__, None, None, None)
            self.bar = None

    def _guarded(self, step: Callable[..., object], *args: object) -> None:
        """A step of the bar, which is dropped when stderr cannot take it (a full disk, a
        closed pipe): stderr carries only messages (`loganalyzer.terminal`), and an index
        must not stop for one."""
        try:
            step(*args)
        except OSError:
            self.bar = None

    def _rate(self, _: object) -> str:
        elapsed = time.perf_counter() - self.began
        return f"{self.done_bytes / 1e6 / elapsed:.3g} MB/s" if elapsed > 0 else ""
