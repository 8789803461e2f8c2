"""How the run ended: its ending facts (`Run.endings`, read by the parsers) weighed against
its progress (the last iteration, the iteration total, the pace).

Only facts after the last progress count: an earlier launch's crash is that launch's ending.
Among them, in this order:
- a failure (an exception, an NCCL error, a NaN check, a CUDA error, an out-of-memory)
  decides, unless a scheduler's kill or the framework's own end came first (the errors that
  follow a kill are its consequences); the first failure in the log decides (in each file
  the first line, across files the earliest time), and the other ranks that failed are
  counted;
- a scheduler's kill (slurm's CANCELLED, its node failure) decides: `killed`, or `hung`
  when the last progress is far longer ago than the pace (`HANG_PACES` log intervals and at
  least `HANG_FLOOR_S`), which needs both times;
- a clean stop the run asked for (Megatron's --exit-duration-in-mins, --exit-interval,
  --exit-signal-handler): `stopped`;
- the framework's own end, or the last iteration at the iteration total: `completed`;
- a launcher's report alone (a non-zero exit, a signal, torchrun's root cause): `crashed`
  (an abort: SIGABRT, SIGSEGV...) or `killed` (SIGTERM, SIGKILL, SIGINT: from outside);
- else `unknown`: the log just stops; `hung` (reason null) when the lines it printed after
  its last progress (a monitor's, a logger's) span far longer than the pace.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

import polars as pl

from loganalyzer.model import EndingFact, Endings

# No progress for this many log intervals (at the steady pace) before a kill is a hang...
HANG_PACES = 10
# ... and never for less than this: PyTorch's NCCL watchdog waits 10 minutes by default
# (600,000 ms) before it calls a collective stuck.
HANG_FLOOR_S = 600.0
# The error line quoted as the outcome's message, at most.
MESSAGE_LIMIT = 300

# Failures: the kinds of line that say the program itself broke.
FAILURE_KINDS = frozenset({"exception", "nccl", "nan", "cuda", "oom"})
# Exceptions a launcher raises when a child died, or a process raises on a signal: they
# report an ending (the child's, a kill), they are not its cause.
LAUNCHER_EXCEPTIONS = frozenset(
    {"ChildFailedError", "CalledProcessError", "SignalException", "KeyboardInterrupt"}
)
# Signals sent from outside (a scheduler, an operator), against those a process dies of.
# (SIGKILL is not among them: with no scheduler line, it is most often the host's
# out-of-memory killer.)
OUTSIDE_SIGNALS = frozenset({"SIGTERM", "SIGINT", "SIGHUP"})
# Endings that are failures: a run that ended so did not do what it was launched for. A log
# that just stops (`unknown`) is not one: a log copied while its run went on stops the same way.
FAILED_ENDINGS = ("crashed", "hung", "killed")
# The verdict's severity of each ending: a crash or a hang costs the run; a kill and an
# ending the log does not say need a look; the rest is what was asked for.
ENDING_SEVERITY = {
    "crashed": "critical",
    "hung": "critical",
    "killed": "warning",
    "unknown": "warning",
    "stopped": "info",
    "completed": "info",
}
SCHEDULER_REASONS = {
    "TIME LIMIT": "time_limit",
    "PREEMPTION": "preempted",
    "NODE FAILURE": "node_failure",
}
_NAN = re.compile(r"found (?:NaN|Inf)|NaN or Inf|Unexpected result nan|\bis NaN\b")
_OOM = re.compile(r"out of memory|OutOfMemory|oom[_-]kill", re.IGNORECASE)
_NCCL_TIMEOUT = re.compile(
    r"Watchdog caught|collective operation timeout|Timeout\(ms\)|detected by watchdog"
    r"|watchdog got stuck"
)
_CUDA = re.compile(
    r"CUDA error|illegal memory access|\bXid\b|ECC error|device-side assert|Cuda failure",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Evidence:
    """A line of the log that the outcome rests on, and what it is to the outcome."""

    role: str  # decides | traceback | launcher | last_record (an unknown ending's)
    file: str
    line: int
    text: str | None  # None for an iteration record (the table holds no line text)


@dataclass(frozen=True)
class Outcome:
    """How the run ended. Times are ISO 8601 UTC; `hang_s` needs the last progress's time
    and the ending's."""

    status: str  # completed | stopped | crashed | hung | killed | unknown
    reason: str | None
    exception: str | None = None
    message: str | None = None
    rank: int | None = None
    host: str | None = None
    collective: dict[str, int | str] | None = None
    last_iteration: int | None = None
    train_iters: int | None = None
    at: str | None = None
    hang_s: float | None = None
    # "exact" from the last record's time; "at_least" from the first line printed after it
    hang_bound: str | None = None
    evidence: list[Evidence] = field(default_factory=list)
    # the other ranks whose failures were read, and how many failure lines there were
    other_ranks: list[int] = field(default_factory=list)
    failure_lines: int = 0


@dataclass(frozen=True)
class Progress:
    """The run's last progress, as the per-iteration table has it."""

    last_iteration: int | None
    train_iters: int | None
    at: datetime | None  # the last record's timestamp
    after: dict[str, int]  # by file: the line of its last record
    line_pace_s: float | None  # seconds between log lines at the steady pace
    last_record: tuple[str, int] | None = None  # the last record's file and line


def progress_of(table: pl.DataFrame, train_iters: int | None, pace_s: float | None) -> Progress:
    """The last record's iteration and time, and each file's last record line."""
    if table.height == 0:
        return Progress(None, train_iters, None, {}, None)
    # a segment's first record covers the iterations before it: not the logging interval
    later = pl.col("segment").is_first_distinct().not_()
    last = table.select(
        pl.col("iteration").last(),
        pl.col("timestamp").last(),
        pl.col("interval").filter(later).median(),
        pl.col("source").last(),
        pl.col("line").last(),
    ).row(0)
    by_file = (
        table.select("source", "line")
        .drop_nulls()
        .group_by("source")
        .agg(pl.col("line").max())
        .iter_rows()
    )
    interval = last[2] or 1.0
    return Progress(
        last_iteration=last[0],
        train_iters=train_iters,
        at=last[1],
        after={source: line for source, line in by_file},
        line_pace_s=pace_s * interval if pace_s else None,
        last_record=(last[3], last[4]) if last[3] is not None and last[4] is not None else None,
    )


def launch_endings(
    table: pl.DataFrame,
    endings: Endings,
    train_iters: int | None,
    pace_s: float | None,
    files: Sequence[str],
) -> dict[int, Outcome]:
    """By segment after the first: how the launch before it ended, decided as `decide`
    decides a run's ending, over the facts between that launch's last record and this
    launch's first (in the earlier launch's file; to its end where the next launch is in
    another file)."""
    if table.height == 0:
        return {}
    later = pl.col("segment").is_first_distinct().not_()
    interval = table.select(pl.col("interval").filter(later).median()).item() or 1.0
    bounds = (
        table.group_by("segment", maintain_order=True)
        .agg(
            pl.col("iteration", "timestamp", "source", "line").last(),
            pl.col("source").first().alias("first_source"),
            pl.col("line").first().alias("first_line"),
        )
        .rows(named=True)
    )
    found: dict[int, Outcome] = {}
    for before, launch in itertools.pairwise(bounds):
        source, line = before["source"], before["line"]
        if source is None or line is None:
            continue
        until = launch["first_line"] if launch["first_source"] == source else None
        facts = tuple(
            f
            for f in endings.facts
            if f.source == source and f.line > line and (until is None or f.line < until)
        )
        progress = Progress(
            last_iteration=before["iteration"],
            train_iters=train_iters,
            at=before["timestamp"],
            after={source: line},
            line_pace_s=pace_s * interval if pace_s else None,
            last_record=(source, line),
        )
        found[launch["segment"]] = decide(Endings(facts), progress, files)
    return found


def _after(fact: EndingFact, line: int) -> bool:
    """Whether a fact comes after the last record, at `line`: a line below it, or a failure
    glued after the record on its own line (an NCCL watchdog after a progress bar's frame:
    the bar is NeMo 1's record); what the record's line itself says (its time, HF's final
    metrics) is not after it."""
    return fact.line > line or (fact.line == line and _is_failure(fact))


def decide(endings: Endings, progress: Progress, files: Sequence[str]) -> Outcome:
    """The outcome from the facts after the last progress (see the module docstring);
    `files` in the run's order, to tell which file's first failure came first."""
    tail = [f for f in endings.facts if _after(f, progress.after.get(f.source, 0))]
    progress = _with_bar(progress, tail)
    failures = [f for f in tail if _is_failure(f)]
    first_failure = _earliest(_first(failures, files), failures)
    scheduler = _first([f for f in tail if f.kind == "scheduler"], files) or _first(
        [f for f in tail if f.kind == "node_failed"], files
    )
    done = _plainest([f for f in tail if f.kind == "done"], files)
    stop = _first([f for f in tail if f.kind == "stop"], files)
    reached = (
        progress.last_iteration is not None
        and progress.train_iters is not None
        and progress.last_iteration >= progress.train_iters
    )
    if (
        first_failure is not None
        and not _before(scheduler, first_failure)
        and (not _before(done, first_failure) or _after_done_matters(first_failure))
    ):
        return _crashed(first_failure, failures, tail, progress)
    if scheduler is not None and not _before(done, scheduler):
        return _killed(_with_reason(scheduler, tail), tail, progress)
    if stop is not None:
        how = str(stop.detail.get("how"))
        return _outcome("stopped", how, stop, tail, progress)
    if done is not None or reached:
        # the framework's own end is its loop reaching its total
        outcome = _outcome("completed", "train_iters_reached", done, tail, progress)
        if done is None and progress.last_record is not None:
            file, line = progress.last_record
            outcome = _replace(outcome, evidence=[Evidence("last_record", file, line, None)])
        return outcome
    launcher = _launcher_first(tail, files)
    if launcher is not None:
        return _launcher_ending(launcher, tail, progress)
    return _unknown(tail, progress)


def _with_bar(progress: Progress, tail: list[EndingFact]) -> Progress:
    """The progress a bar glued to an ending line shows, past the last record: the step the
    error came after. A bar of another total than the run's (an evaluation's, a data
    loader's) is not the training loop's."""
    counts = [
        int(f.detail["iteration"])
        for f in tail
        if f.kind == "progress"
        and (progress.train_iters is None or f.detail.get("total") == progress.train_iters)
    ]
    if not counts:
        return progress
    last = max(counts)
    if progress.last_iteration is not None and last <= progress.last_iteration:
        return progress
    return dataclasses.replace(progress, last_iteration=last)


def _with_reason(first: EndingFact, tail: list[EndingFact]) -> EndingFact:
    """The line of the first kill that says why: slurm prints a STEP and a JOB line for one
    kill, in either order and minutes apart, and only one may say `DUE TO` (a preemption
    cancels the step first, then the job `DUE TO PREEMPTION` after its grace time)."""
    if first.kind != "scheduler" or "reason" in first.detail:
        return first
    job = str(first.detail.get("job", "")).split(".")[0]
    said = [
        f
        for f in tail
        if f.kind == "scheduler"
        and f.source == first.source
        and "reason" in f.detail
        and str(f.detail.get("job", "")).split(".")[0] == job
    ]
    return said[0] if said else first


def _launcher_first(tail: list[EndingFact], files: Sequence[str]) -> EndingFact | None:
    """The launcher's report that says most: torchrun's root cause, else a non-zero exit,
    else a signal, else the launcher's exception."""
    for kinds in (("elastic_root",), ("exit",), ("signal",), ("exception",)):
        found = _first([f for f in tail if f.kind in kinds and _is_launcher_failure(f)], files)
        if found is not None:
            return found
    return None


def _unknown(tail: list[EndingFact], progress: Progress) -> Outcome:
    """The log stops with no ending line. When lines printed after the last progress (a
    monitor's, a logger's) span far longer than the pace, the run hung: for at least that
    long (how it ended, the log does not say)."""
    clocks = sorted((f.at, f.line, f) for f in tail if f.at is not None)
    if clocks:
        (first_at, _, _), (last_at, _, last) = clocks[0], clocks[-1]
        bound = "at_least"
        if progress.at is not None and progress.at <= first_at:
            first_at, bound = progress.at, "exact"
        span = (last_at - first_at).total_seconds()
        if span > _hang_threshold(progress):
            outcome = _outcome("hung", None, last, tail, progress)
            return _replace(outcome, hang_s=span, hang_bound=bound, at=last_at.isoformat())
    outcome = _outcome("unknown", None, None, tail, progress)
    if progress.last_record is not None:
        file, line = progress.last_record
        outcome = _replace(outcome, evidence=[Evidence("last_record", file, line, None)])
    return outcome


def _earliest(first: EndingFact | None, failures: list[EndingFact]) -> EndingFact | None:
    """Among the failures of the first one's kind in its file, the one glog's clock puts
    first (ranks print out of time order), where they all have it."""
    if first is None or "clock" not in first.detail:
        return first
    same = [
        f
        for f in failures
        if f.source == first.source and f.kind == first.kind and "clock" in f.detail
    ]
    return min(same, key=lambda f: (str(f.detail["clock"]), f.line))


def _is_failure(fact: EndingFact) -> bool:
    if fact.kind not in FAILURE_KINDS:
        return False
    return fact.detail.get("exception") not in LAUNCHER_EXCEPTIONS


def _is_launcher_failure(fact: EndingFact) -> bool:
    if fact.kind == "exit":  # a non-zero code, or W&B's crashed or failed state
        return fact.detail.get("code") not in (None, 0) or "state" in fact.detail
    return fact.kind in ("signal", "elastic_root") or (
        fact.kind == "exception" and fact.detail.get("exception") in LAUNCHER_EXCEPTIONS
    )


def _after_done_matters(failure: EndingFact) -> bool:
    """A failure after the framework's own end still fails the program (a crash saving the
    model, an exception at exit), unless it is only an NCCL teardown complaint."""
    return failure.kind != "nccl"


def _first(facts: list[EndingFact], files: Sequence[str]) -> EndingFact | None:
    """The first fact: in each file the first line; across files the earliest time where
    each file's first has one, else the file named first."""
    firsts: dict[str, EndingFact] = {}
    for fact in facts:
        if fact.source not in firsts or fact.line < firsts[fact.source].line:
            firsts[fact.source] = fact
    if not firsts:
        return None
    order = {name: index for index, name in enumerate(files)}
    candidates = sorted(firsts.values(), key=lambda f: order.get(f.source, len(order)))
    if all(f.at is not None for f in candidates):
        return min(candidates, key=lambda f: f.at or datetime.min)
    return candidates[0]


def _plainest(facts: list[EndingFact], files: Sequence[str]) -> EndingFact | None:
    """Of the framework's end lines in the file `_first` would choose, the plainest
    statement (`endings`: a sentence, then a metrics block, the metrics, a launcher's
    report), the first of its kind."""
    first = _first(facts, files)
    if first is None:
        return None
    same = [f for f in facts if f.source == first.source]
    return min(same, key=lambda f: (int(f.detail.get("said", 0)), f.line))


def _before(earlier: EndingFact | None, later: EndingFact) -> bool:
    """Whether `earlier` came first: by line in one file, by time across files (unknown
    times: not first)."""
    if earlier is None:
        return False
    if earlier.source == later.source:
        return earlier.line < later.line
    return earlier.at is not None and later.at is not None and earlier.at < later.at


def _reason(fact: EndingFact) -> str:
    text = fact.text
    if fact.kind == "nan" or _NAN.search(text):
        return "nan"
    if (
        fact.kind == "oom"
        or _OOM.search(text)
        or "OutOfMemory" in str(fact.detail.get("exception"))
    ):
        return "oom"
    if "op" in fact.detail or _NCCL_TIMEOUT.search(text):
        return "nccl_timeout"
    if fact.kind == "cuda" or _CUDA.search(text):
        return "cuda_error"
    return "exception"


def _crashed(
    failure: EndingFact, failures: list[EndingFact], tail: list[EndingFact], progress: Progress
) -> Outcome:
    reason = _reason(failure)
    exception = _exception_of(failure, failures)
    outcome = _outcome("crashed", reason, failure, tail, progress, exception=exception)
    ranks = sorted({f.rank for f in failures if f.rank is not None and f.rank != outcome.rank})
    collective = _collective(failure, failures) if reason == "nccl_timeout" else None
    return _replace(outcome, other_ranks=ranks, failure_lines=len(failures), collective=collective)


def _exception_of(failure: EndingFact, failures: list[EndingFact]) -> str | None:
    """The failure's exception class: its own line's, else that of the first exception
    line after it from the same rank (a glog line, then the traceback that it raised)."""
    if "exception" in failure.detail:
        return str(failure.detail["exception"])
    for fact in failures:
        same = fact.source == failure.source and fact.rank == failure.rank
        if same and fact.line > failure.line and "exception" in fact.detail:
            return str(fact.detail["exception"])
    return None


def _collective(failure: EndingFact, failures: list[EndingFact]) -> dict[str, int | str] | None:
    for fact in (failure, *failures):
        if "seq" in fact.detail:
            return {
                key: fact.detail[key]
                for key in ("op", "seq", "timeout_ms", "ran_ms")
                if key in fact.detail
            }
    return None


def _killed(scheduler: EndingFact, tail: list[EndingFact], progress: Progress) -> Outcome:
    printed = scheduler.detail.get("reason")
    if scheduler.kind == "node_failed":
        printed = "NODE FAILURE"
    reason = SCHEDULER_REASONS.get(str(printed), "cancelled") if printed else "cancelled"
    outcome = _outcome("killed", reason, scheduler, tail, progress)
    if reason == "node_failure" and outcome.host is None:
        named = [f for f in tail if f.kind == "node_failed"] or [
            f for f in tail if f.kind in ("exit", "signal") and f.host
        ]
        outcome = _replace(outcome, host=named[0].host if named else None)
    if outcome.hang_s is None and scheduler.at is not None and progress.at is None:
        ended = scheduler.at
        times = [
            f.at
            for f in tail
            if f.at is not None and f.at <= ended and f.kind not in ("scheduler", "node_failed")
        ]
        if times:
            # the first line printed after the last progress: the hang lasted at least since
            hang = (ended - min(times)).total_seconds()
            outcome = _replace(outcome, hang_s=hang, hang_bound="at_least")
    if outcome.hang_s is not None and outcome.hang_s > _hang_threshold(progress):
        outcome = _replace(outcome, status="hung")
    return outcome


def _hang_threshold(progress: Progress) -> float:
    return max(HANG_PACES * (progress.line_pace_s or 0.0), HANG_FLOOR_S)


def _launcher_ending(fact: EndingFact, tail: list[EndingFact], progress: Progress) -> Outcome:
    """A launcher's report with no failure of the program's own in the text."""
    signal = fact.detail.get("signal")
    code = fact.detail.get("code")
    if signal is None and isinstance(code, int) and code < 0:
        signal = _SIGNAL_NAMES.get(-code, f"signal {-code}")
    if signal is not None:
        status = "killed" if signal in OUTSIDE_SIGNALS else "crashed"
        return _outcome(status, "signal", fact, tail, progress)
    exception = fact.detail.get("exception")
    return _outcome(
        "crashed",
        "exception" if exception else None,
        fact,
        tail,
        progress,
        exception=str(exception) if exception else None,
    )


_SIGNAL_NAMES = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL"}
_SIGNAL_NAMES |= {11: "SIGSEGV", 15: "SIGTERM", 8: "SIGFPE", 4: "SIGILL"}


def _outcome(
    status: str,
    reason: str | None,
    decisive: EndingFact | None,
    tail: list[EndingFact],
    progress: Progress,
    exception: str | None = None,
) -> Outcome:
    root = next((f for f in tail if f.kind == "elastic_root"), None)
    rank = decisive.rank if decisive is not None else None
    host = decisive.host if decisive is not None else None
    at = decisive.at if decisive is not None else None
    if status == "crashed" and root is not None:
        rank = rank if rank is not None else root.rank
        host = host or root.host
        at = at or root.at
    if status == "crashed" and (rank is None or host is None):
        task = next((f for f in tail if f.kind == "exit" and "task" in f.detail), None)
        if task is not None:
            rank = rank if rank is not None else int(task.detail["task"])
            host = host or task.host
    hang = (at - progress.at).total_seconds() if at and progress.at else None
    hang = hang if hang is not None and hang >= 0 else None
    return Outcome(
        status=status,
        reason=reason,
        exception=exception,
        message=decisive.text[:MESSAGE_LIMIT] if decisive is not None else None,
        rank=rank,
        host=host,
        last_iteration=progress.last_iteration,
        train_iters=progress.train_iters,
        at=at.isoformat() if at else None,
        hang_s=hang,
        hang_bound="exact" if hang is not None else None,
        evidence=_evidence(decisive, tail, root),
    )


def _evidence(
    decisive: EndingFact | None, tail: list[EndingFact], root: EndingFact | None
) -> list[Evidence]:
    """The deciding line, the first traceback line before it (of its rank, in its file),
    and torchrun's root cause."""
    if decisive is None:
        return []
    found = [Evidence("decides", decisive.source, decisive.line, decisive.text)]
    before = [
        f
        for f in tail
        if f.kind == "traceback" and f.source == decisive.source and f.line <= decisive.line
    ]
    same_rank = [f for f in before if f.rank == decisive.rank]
    if same_rank or before:
        traceback = (same_rank or before)[0]
        found.append(Evidence("traceback", traceback.source, traceback.line, traceback.text))
    if root is not None and root is not decisive:
        found.append(Evidence("launcher", root.source, root.line, root.text))
    return found


def _replace(outcome: Outcome, **changes: object) -> Outcome:
    return dataclasses.replace(outcome, **changes)  # type: ignore[arg-type]
