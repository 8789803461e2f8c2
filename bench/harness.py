"""What every benchmark stage provides, and how a command is measured.

A stage is a module with a `NAME` and a `cases(workdir, quick)` function returning `Case`s:
inputs written under `workdir` (deterministically), the command under test, and the
baselines it is compared with on the same input in the same run. Every command runs in its
own process, so its peak RSS is its own (`os.wait4` reports it per child), `runs` times; the
table shows the median wall time and the largest peak RSS.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loganalyzer.cores import usable_cores

ROOT = Path(__file__).resolve().parents[1]
PYTHON = sys.executable


@dataclass(frozen=True)
class Command:
    """One measured command. A child may print `{"seconds": s}` as its last stdout line to
    report the time of the section that matters (without interpreter start-up or input
    generation); otherwise the wall time of the whole process is used. `check` reads the
    child's stdout and returns an error message if the result is wrong. A child may report
    several sections in that line (`{"seconds": s, "drawn_seconds": d}`): commands with the
    same argv and another `seconds_key` read theirs from the same runs, which run once."""

    label: str
    argv: Sequence[str]
    check: Callable[[str], str | None] | None = None
    seconds_key: str = "seconds"


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
    # The baselines run before the subject: their runs prepare its input (a first pull
    # fills the cache a re-read reads).
    baselines_first: bool = False
    # The baselines each keep one core busy (single-threaded readers) and run at the same
    # time, one per core (`measure_side_by_side`); the subject always runs alone.
    side_by_side: bool = False


@dataclass(frozen=True)
class Measurement:
    command: Command
    seconds: float  # median over the runs
    cpu_seconds: float  # median over the runs of user + system time, all threads
    peak_rss_mb: float  # the largest over the runs
    runs: int
    spent: float  # wall seconds of all its runs, whole processes (what the harness waited)
    cpu_spent: float  # CPU seconds of all its runs, whole processes
    reused: bool = False  # its runs were another command's (same argv), counted there
    alongside: bool = False  # ran side by side with the command before it, which counts the wait


def child_argv(*args: str) -> list[str]:
    """A `bench.children` subcommand run by this interpreter."""
    return [PYTHON, "-m", "bench.children", *args]


# A command is run again only while its runs so far and one more of their mean length fit in
# this (wall seconds, the default of `--repeat-within`): under 5 s a command runs 3 times,
# under 7.5 s twice, longer once (the 1 GB stdout commands, the 64 logs, EventAccumulator and
# tbparse on 3,000,000 events, the W&B first pull, one-process index), which keeps the whole
# harness within 10 minutes; the `runs` column says how many each had.
REPEAT_WITHIN_SECONDS = 15.0

# One run of a command: wall seconds, CPU seconds, peak RSS in MB (10^6 bytes, the unit of
# the input sizes), stdout.
RunResult = tuple[float, float, float, str]


def measure(
    command: Command,
    runs: int,
    repeat_within: float = REPEAT_WITHIN_SECONDS,
    shared: dict[tuple[str, ...], list[RunResult]] | None = None,
) -> Measurement:
    """Run `command` up to `runs` times, again only while its runs so far and one more of
    their mean length fit in `repeat_within` seconds; median seconds, largest peak RSS. Runs
    of the same argv already in `shared` are read again instead (their time is counted once,
    where they ran)."""
    key = tuple(command.argv)
    done = shared.get(key) if shared is not None else None
    if done is not None:
        return _measurement(command, done, None)
    done = []
    while len(done) < runs and (not done or _another_fits(done, repeat_within)):
        done.append(_run_once(command.argv))
    if shared is not None:
        shared[key] = done
    return _measurement(command, done, sum(r[0] for r in done))


def _measurement(
    command: Command, done: Sequence[RunResult], waited: float | None, alongside: bool = False
) -> Measurement:
    """The medians and peak of `done`, checked; `waited`, the wall seconds the harness spent
    on them (None: the runs are another command's, counted there)."""
    times: list[float] = []
    cpu: list[float] = []
    for seconds, cpu_seconds, _, output in done:
        if command.check is not None and (problem := command.check(output)):
            raise RuntimeError(f"{command.label}: wrong result: {problem}")
        times.append(_reported_seconds(output, seconds, command.seconds_key))
        cpu.append(_reported_seconds(output, cpu_seconds, "cpu_seconds"))
    return Measurement(
        command,
        statistics.median(times),
        statistics.median(cpu),
        max(r[2] for r in done),
        len(done),
        waited or 0.0,
        0.0 if waited is None else sum(r[1] for r in done),
        waited is None,
        alongside,
    )


# Commands run at the same time by `measure_side_by_side`, each started by a spawner of its
# own: the cores of the machine the harness was written for.
SIDE_BY_SIDE = 2


def measure_side_by_side(
    commands: Sequence[Command], runs: int, repeat_within: float = REPEAT_WITHIN_SECONDS
) -> list[Measurement]:
    """`measure` of commands that each keep one core busy, run at the same time, one per
    core: a round runs each once, side by side, and rounds go on while every command's runs
    and one more fit in `repeat_within` seconds. Each command keeps its own wall and CPU time
    and peak RSS; the time the harness waited (`spent`) is the rounds', counted on the first.
    More commands than SIDE_BY_SIDE, or fewer cores, and they run one after another."""
    if not 1 < len(commands) <= min(SIDE_BY_SIDE, usable_cores()):
        return [measure(command, runs, repeat_within) for command in commands]
    done: list[list[RunResult]] = [[] for _ in commands]
    waited = 0.0
    with ThreadPoolExecutor(len(commands)) as pool:
        while len(done[0]) < runs and (
            not done[0] or all(_another_fits(d, repeat_within) for d in done)
        ):
            started = time.perf_counter()
            ran = pool.map(_run_once, [c.argv for c in commands], range(len(commands)))
            for runs_of, result in zip(done, ran, strict=True):
                runs_of.append(result)
            waited += time.perf_counter() - started
    first, *others = zip(commands, done, strict=True)
    return [
        _measurement(*first, waited),
        *(_measurement(command, runs_of, 0.0, alongside=True) for command, runs_of in others),
    ]


def _another_fits(done: Sequence[RunResult], repeat_within: float) -> bool:
    """Whether one more run, as long as the mean of `done`, keeps them all within
    `repeat_within` wall seconds."""
    spent = sum(r[0] for r in done)
    return spent + spent / len(done) <= repeat_within


def _run_once(argv: Sequence[str], slot: int = 0) -> RunResult:
    """Wall seconds, CPU seconds, peak RSS in MB and stdout of one run of `argv`, started by
    spawner `slot` (`bench/spawner.py`: so the peak RSS is the command's, not this
    process's)."""
    with tempfile.TemporaryDirectory(prefix="bench-run-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        ran = _spawner(slot).run(list(argv), env, out, err)
        output = out.read_bytes().decode(errors="replace")
        if ran["exit"] != 0:
            message = err.read_bytes().decode(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(f"{' '.join(argv)} exited {ran['exit']}: {message}")
    # ru_maxrss: KiB on Linux; shown in MB of 10^6 bytes, as the inputs' sizes are, so that
    # a peak and a file size compare directly
    return ran["seconds"], ran["cpu_seconds"], ran["peak_kib"] * 1024 / 1e6, output


class _Spawner:
    """The harness's end of `bench/spawner.py`, started once, while this process is small."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [PYTHON, "-S", "-m", "bench.spawner"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        atexit.register(self.close)

    def close(self) -> None:
        """End of requests: the spawner's loop ends with its stdin."""
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def run(self, argv: list[str], env: dict[str, str], out: Path, err: Path) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        request = {"argv": argv, "env": env, "stdout": str(out), "stderr": str(err)}
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the spawner stopped (exit {self.process.wait()})")
        found: dict[str, Any] = json.loads(answer)
        return found


@functools.cache
def _spawner(slot: int) -> _Spawner:
    """The spawner of `slot`: one per command that may run at the same time."""
    return _Spawner()


def start_spawner() -> None:
    """Start the spawners now, before this process grows (call it first thing)."""
    for slot in range(SIDE_BY_SIDE):
        _spawner(slot)


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


def save(path: Path, all_rows: Sequence[Row], harness_seconds: float) -> None:
    """Keep a run's rows, so that the docs' table is generated from a measurement, not typed."""
    document = {
        "command": "python -m bench",
        "harness_seconds": round(harness_seconds),
        "rows": [dataclasses.asdict(row) for row in all_rows],
    }
    path.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def load_rows(path: Path) -> list[Row]:
    """The rows `save` kept."""
    document = json.loads(path.read_text(encoding="utf-8"))
    return [Row(**row) for row in document["rows"]]


def table(all_rows: Sequence[Row]) -> str:
    """A Markdown table, so that docs/performance.md holds it as printed."""
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
