"""What every benchmark stage provides, and how a command is measured.

A stage is a module with a `NAME` and a `cases(workdir, quick)` function returning `Case`s:
inputs written under `workdir` (deterministically), the command under test, and the
baselines it is compared with on the same input in the same run. Every command runs in its
own process, so its peak RSS is its own (`os.wait4` reports it per child), `runs` times; the
table shows the median wall time and the largest peak RSS.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


@dataclass(frozen=True)
class Command:
    """One measured command. A child may print `{"seconds": s}` as its last stdout line to
    report the time of the section that matters (without interpreter start-up or input
    generation); otherwise the wall time of the whole process is used. `check` reads the
    child's stdout and returns an error message if the result is wrong."""

    label: str
    argv: Sequence[str]
    check: Callable[[str], str | None] | None = None


@dataclass(frozen=True)
class Case:
    """An input, the command under test and its baselines. `amount` of `unit` (MB, records,
    events) is what throughput is counted in; 0 means only the time matters."""

    stage: str
    what: str
    amount: float
    unit: str
    subject: Command
    baselines: Sequence[Command] = field(default_factory=tuple)
    # Further (amount, unit) pairs shown beside the first throughput (runs/s and MB/s).
    also: Sequence[tuple[float, str]] = field(default_factory=tuple)


@dataclass(frozen=True)
class Measurement:
    command: Command
    seconds: float  # median over the runs
    cpu_seconds: float  # median over the runs of user + system time, all threads
    peak_rss_mb: float  # the largest over the runs
    runs: int
    spent: float  # wall seconds of all its runs, whole processes (what the harness waited)
    cpu_spent: float  # CPU seconds of all its runs, whole processes


def child_argv(*args: str) -> list[str]:
    """A `bench.children` subcommand run by this interpreter."""
    return [PYTHON, "-m", "bench.children", *args]


# A command is run again only while its runs so far took less than this (wall seconds): the
# slow baselines (EventAccumulator, tbparse, the per-field script on 1 GB) run once or twice,
# which keeps the whole harness within minutes; the fast commands get their several runs.
REPEAT_WITHIN_SECONDS = 40.0


def measure(command: Command, runs: int) -> Measurement:
    """Run `command` up to `runs` times (see REPEAT_WITHIN_SECONDS); median seconds, largest
    peak RSS."""
    times: list[float] = []
    cpu: list[float] = []
    peaks: list[float] = []
    spent = cpu_spent = 0.0
    while len(times) < runs and (not times or spent < REPEAT_WITHIN_SECONDS):
        seconds, cpu_seconds, peak, output = _run_once(command.argv)
        spent += seconds
        cpu_spent += cpu_seconds
        if command.check is not None and (problem := command.check(output)):
            raise RuntimeError(f"{command.label}: wrong result: {problem}")
        times.append(_reported_seconds(output, seconds))
        cpu.append(_reported_seconds(output, cpu_seconds, "cpu_seconds"))
        peaks.append(peak)
    return Measurement(
        command,
        statistics.median(times),
        statistics.median(cpu),
        max(peaks),
        len(times),
        spent,
        cpu_spent,
    )


def _run_once(argv: Sequence[str]) -> tuple[float, float, float, str]:
    """Wall seconds, CPU seconds, peak RSS in MB and stdout of one run of `argv`."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        start = time.perf_counter()
        process = subprocess.Popen(argv, stdout=out, stderr=err, cwd=ROOT, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        output = out.read().decode(errors="replace")
        if process.returncode != 0:
            message = err.read().decode(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"{' '.join(argv)} exited {process.returncode}: {message}")
    cpu_seconds = usage.ru_utime + usage.ru_stime
    return seconds, cpu_seconds, usage.ru_maxrss / 1024, output  # ru_maxrss: KiB on Linux


def _reported_seconds(output: str, measured: float, key: str = "seconds") -> float:
    """The child's own figure for its measured section (`{"seconds": s, "cpu_seconds": c}`
    as its last line), else the whole process's."""
    lines = output.strip().splitlines()
    if lines and lines[-1].startswith('{"seconds"'):
        return float(json.loads(lines[-1]).get(key, measured))
    return measured


@dataclass(frozen=True)
class Row:
    stage: str
    what: str
    command: str
    runs: int
    seconds: float
    cpu_seconds: float
    throughput: str
    peak_rss_mb: float
    ratio: str


def rows(case: Case, subject: Measurement, baselines: Sequence[Measurement]) -> list[Row]:
    """The table rows of one case: the subject first, then each baseline with the subject's
    speed-up over it (× faster; below 1 means slower) and its memory relative to it."""

    def throughput(m: Measurement) -> str:
        if not case.amount:
            return "—"
        pairs = [(case.amount, case.unit), *case.also]
        return ", ".join(
            f"{amount / m.seconds:,.{_digits(amount / m.seconds)}f} {unit}/s"
            for amount, unit in pairs
        )

    out = [
        Row(
            case.stage,
            case.what,
            subject.command.label,
            subject.runs,
            subject.seconds,
            subject.cpu_seconds,
            throughput(subject),
            subject.peak_rss_mb,
            "subject",
        )
    ]
    for base in baselines:
        speed = base.seconds / subject.seconds
        memory = subject.peak_rss_mb / base.peak_rss_mb
        out.append(
            Row(
                "",
                "",
                base.command.label,
                base.runs,
                base.seconds,
                base.cpu_seconds,
                throughput(base),
                base.peak_rss_mb,
                f"{speed:.3g}× speed, {memory:.2g}× RSS",
            )
        )
    return out


def _digits(rate: float) -> int:
    """Decimals enough for two significant figures of a small rate (3.4 runs/s)."""
    return 0 if rate >= 100 else 1 if rate >= 1 else 2


def table(all_rows: Sequence[Row]) -> str:
    """A Markdown table, so the README can hold it as printed."""
    head = (
        "stage",
        "input",
        "command",
        "runs",
        "wall s",
        "CPU s",
        "throughput",
        "peak RSS MB",
        "subject vs this",
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in all_rows:
        cells = (
            r.stage,
            r.what,
            r.command,
            str(r.runs),
            f"{r.seconds:.3f}",
            f"{r.cpu_seconds:.2f}",
            r.throughput,
            f"{r.peak_rss_mb:,.0f}",
            r.ratio,
        )
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
