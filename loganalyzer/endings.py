"""Ending evidence in a log's text, for every text parser: the lines that say how a run ended.

A multi-gigabyte log has a handful of such lines, so a chunk's lines are first picked by
literal tests (`candidates`, polars over the whole chunk), and only those few are read in
Python (`read_endings`). What is read is the line's shape (`EndingFact.kind`) and what it
states; which line decides the run's outcome is the analysis's business
(`loganalyzer.analysis.outcome`).

Kinds:
  traceback      `Traceback (most recent call last):`
  exception      `torch.OutOfMemoryError: CUDA out of memory...` (detail: exception class);
                 a C++ abort (`terminate called after throwing an instance of
                 'c10::CUDAError'`) told at its `what():` line
  nccl           an NCCL watchdog or communicator error line (detail: op, seq, timeout_ms,
                 ran_ms when printed)
  nan            Megatron's `found NaN in local grad norm` and other NaN/Inf checks
  cuda           a CUDA error line outside an exception (`CUDA error: ...`, Xid, ECC)
  oom            an out-of-memory line outside an exception (slurm's oom_kill event)
  elastic_root   torchrun's `Root Cause (first observed failure):` with the block's fields
  exit           a process's exit status (torchrun `failed (exitcode: N)`, DeepSpeed's
                 launcher `exits with return code = N`, pdsh, srun `Exited with exit code N`,
                 the Kubernetes training operator's `pod P container C exitCode: N`)
  signal         a signal received (`Received Signals.SIGTERM death signal`, `Signal 6
                 (SIGABRT) received`, `Main process received SIGTERM`, `Killed`)
  scheduler      slurm's `*** JOB|STEP N ON host CANCELLED AT t [DUE TO reason] ***`
                 (detail: scope, reason; the host there is the batch host, not `host`)
  node_failed    srun's `srun: error: Node failure on host`: the node that failed
  done           the framework's own end: Megatron's `[after training is done]`, HF's
                 `TrainOutput(...)`, its final `train_runtime` metrics, `Training completed`,
                 DeepSpeed's launcher `exits successfully`
  stop           Megatron's clean exits (detail: how = exit_duration | exit_interval |
                 exit_signal): `exiting program after N minutes`, `... at iteration N`,
                 `... after receiving SIGTERM`
  clock          any other line that prints a full date and time, among each chunk's last
                 lines: how long a log went on after its last progress
  progress       a tqdm bar's count on a line that holds ending evidence (detail: iteration,
                 total): an error glued to a bar (`... 13/620 [01:07<50:20, 4.98s/it][rank0]:
                 [E1123 ...] ... Watchdog caught ...`) came after that step, whatever the
                 parser made of the bar
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime, timezone

import polars as pl

from loganalyzer.model import EndingFact, Endings
from loganalyzer.textlog import ANSI, LAUNCHER_PREFIX

# Literal tests that pick the candidate lines (case-sensitive, Aho-Corasick over a chunk).
LITERALS = (
    "Traceback (most recent call last)",
    "Error",
    "Exception",
    "KeyboardInterrupt",
    "SystemExit",
    "out of memory",
    "Watchdog caught",
    "detected by watchdog",
    "watchdog got stuck",
    "collective operation timeout",
    "NCCL error",
    "NCCL communicator",
    "ncclInternalError",
    "ncclSystemError",
    "ncclUnhandledCudaError",
    "ncclRemoteError",
    "found NaN",
    "found Inf",
    "NaN or Inf",
    "Unexpected result nan",
    "CUDA error",
    "Xid",
    "ECC error",
    "device-side assert",
    "Root Cause (first observed failure)",
    "  time      : ",
    "  host      : ",
    "  rank      : ",
    "  exitcode  : ",
    "  traceback : ",
    "(exitcode:",
    "exits with return code",
    "exits successfully",
    "exited with exit code",
    "Exited with exit code",
    "death signal",
    "received SIGTERM",
    "received SIGINT",
    ") received by PID",
    "Killed",
    "CANCELLED AT",
    "srun: error",
    "oom_kill",
    "oom-kill",
    "after training is done",
    "TrainOutput(",
    "'train_runtime'",
    "Training completed",
    "`Trainer.fit` stopped: `max_",
    "***** train metrics *****",
    "exiting program",
    "terminate called after throwing",
    "what():",
    "Assertion `",
    "exitCode:",
    "Timeout(ms)=",
)

# The line's characters held in a fact: the decisive line is quoted, not stored whole.
TEXT_LIMIT = 2000
# Candidate lines a chunk keeps at most (the first and last halves): every rank of a large
# job prints the same lines; the rest are counted.
CHUNK_CANDIDATES = 4096
# Facts of one kind held per file: the first and the last this many.
HELD_PER_KIND = 32

_PREFIX = re.compile(LAUNCHER_PREFIX)
# NeMo-Run's task label before torchrun's: `i.pretrain/0 [default2]:[rank2]: ...`.
_TASK_LABEL = re.compile(r"^[\w.-]+/\d+\s+(?=\[)")
# A line that starts with a full date and time (a logger's, a monitor's), maybe labelled.
STAMP_AT_START = r"^\S{0,32}?\[?\d{4}-\d\d-\d\d[ T_]\d\d:\d\d:\d\d"
# The lines at the end of each chunk searched for such a time: a hang's span is at the end.
CLOCK_TAIL_LINES = 256
_ANSI = re.compile(ANSI)
# A launcher label torchrun prints before a glog header: `[rank5]:[E602 11:17:52.18 ...]`.
_GLOG = re.compile(r"^\[?[EWIF](?:\d{3,4} \d\d:\d\d:\d\d(?:\.\d+)?)?\s*\d*\s*[\w.]+:\d+\]\s*")
_EXCEPTION = re.compile(
    r"^\.?(?:[A-Za-z_]\w*\.)*(?P<name>[A-Z]\w*(?:Error|Exception|Interrupt|Exit))"
    r"(?::\s*(?P<message>.*))?$"
)
_WORK = re.compile(
    r"WorkNCCL\(SeqNum=(?P<seq>\d+),\s*OpType=(?P<op>\w+)"
    r"(?:[^)]*?Timeout\(ms\)=(?P<timeout>\d+))?[^)]*\)(?:\s*ran for (?P<ran>\d+) milliseconds)?"
)
_RANK = re.compile(r"\[Rank (\d+)\]|\bRank (\d+)(?::|,| found)|\bon rank (\d+)\b")
# The node a NaN check or an error names: Megatron's `Device: 3, node: host`, the rerun
# state machine's `Rank 15, node host, device 15`.
_NODE = re.compile(r"\bnode:? ([A-Za-z][\w.-]*[\w])")
_TERMINATE = re.compile(r"terminate called after throwing an instance of '(?:\w+::)*(\w+)'")
_DEVICE_ASSERT = re.compile(r"\.cu:\d+: .*Assertion `.*` failed")
_POD_EXIT = re.compile(r"pod (?P<pod>[\w.-]+) container \S+ exitCode: (?P<code>-?\d+)")
_NCCL = re.compile(
    r"Watchdog caught|collective operation timeout|NCCL (?:error|communicator)|nccl\w+Error"
    r"|detected by watchdog|watchdog got stuck"
)
# torch 2.5's `failure detected by watchdog at work sequence id: 120049`
_WORK_SEQUENCE = re.compile(r"work sequence id: (\d+)")
_NAN = re.compile(r"found (?:NaN|Inf)|NaN or Inf|Unexpected result nan")
_CUDA = re.compile(
    r"CUDA error|illegal memory access|\bXid\b|ECC error|device-side assert", re.IGNORECASE
)
_OOM = re.compile(r"out of memory|oom[_-]kill", re.IGNORECASE)
_ELASTIC_FIELD = re.compile(
    r"^\s+(?P<field>time|host|rank|exitcode|traceback)\s*: (?P<value>.*?)\s*$"
)
_EXIT = re.compile(
    r"failed \(exitcode: (?P<a>-?\d+)\)(?: local_rank: (?P<local>\d+))?"
    r"|exits with return code = (?P<b>-?\d+)"
    r"|(?P<host>[\w.-]+): (?:ssh )?exited with exit code (?P<c>-?\d+)"
    r"|srun: error: (?P<srunhost>[\w.-]+): tasks? (?P<task>\d+)(?:[-,\d]*): "
    r"(?:Exited with exit code (?P<d>-?\d+)|(?P<killed>Killed)|(?P<what>.+))",
    re.IGNORECASE,
)
_SIGNAL = re.compile(
    r"Signals?\.(?P<a>SIG[A-Z]+)|Signal (?P<num>\d+) \((?P<b>SIG[A-Z]+)\) received"
    r"|received (?P<c>SIG[A-Z]+)|(?:^|\s)(?P<killed>Killed)(?:\s|$)"
)
_SCHEDULER = re.compile(
    r"\*\*\* (?P<scope>JOB|STEP) (?P<job>[\w.+-]+) ON (?P<host>\S+) CANCELLED AT (?P<at>\S+)"
    r"(?: DUE (?:TO|to) (?P<reason>[A-Za-z][A-Za-z ]*[A-Za-z]))?[^*]*\*\*\*"
    r"|srun: error: Node failure on (?P<failed>[\w.-]+)"
)
# tqdm's `{n}/{total} [{elapsed}<`: the elapsed clock `MM:SS` or `H:MM:SS` (as the HF
# Trainer's, Lightning's `Epoch 0:   6%|██  | 32040/500150 [6:28:43<94:39:17, ...`).
_BAR = re.compile(r"(?<![\d/])(\d+)/(\d+) \[(?:\d+:)?\d+:\d\d<")
_STOP = re.compile(
    r"exiting program (?:after (?P<minutes>[\d.]+) minutes|at iteration (?P<iteration>\d+)"
    r"|after receiving (?P<signal>SIG\w+))"
)
# The framework's own end, the plainest statement first (`detail["said"]`): a sentence that
# training ended, the script's metrics block, the final metrics themselves, a launcher's
# report that its process exited well.
_DONE = (
    # PyTorch Lightning's fit loop (NeMo 1 and 2): "`Trainer.fit` stopped: `max_steps=N` reached."
    re.compile(r"\[after training is done\]|Training completed|`Trainer\.fit` stopped: `max_"),
    re.compile(r"\*\*\*\*\* train metrics \*\*\*\*\*"),
    re.compile(r"TrainOutput\(|'train_runtime'"),
    re.compile(r"exits successfully"),
)
_STAMP = re.compile(r"(\d{4}-\d\d-\d\d)[ T_](\d\d:\d\d:\d\d(?:[.,]\d+)?)")
# glog's month, day and time (no year): comparable within one log.
_GLOG_CLOCK = re.compile(r"^\[?[EWIF](\d{3,4}) (\d\d:\d\d:\d\d(?:\.\d+)?)")


def candidates(frame: pl.DataFrame) -> pl.DataFrame:
    """The chunk's lines (line, text) that may be ending evidence: literal tests over every
    line, bounded to `CHUNK_CANDIDATES` (the first and last halves), and the lines among
    the chunk's last `CLOCK_TAIL_LINES` that start with a date and time (`clock` facts:
    what a log printed after its last progress tells how long it went on)."""
    text = pl.col("text")
    found = frame.select("line", "text").filter(text.str.contains_any(list(LITERALS)))
    if found.height > CHUNK_CANDIDATES:
        half = CHUNK_CANDIDATES // 2
        found = pl.concat([found.head(half), found.tail(half)])
    stamped = (
        frame.select("line", "text")
        .tail(CLOCK_TAIL_LINES)
        .filter(text.str.contains(STAMP_AT_START))
    )
    if stamped.height == 0:
        return found
    return pl.concat([found, stamped]).unique("line", keep="first").sort("line")


def read_endings(lines: Iterable[pl.DataFrame], source: str) -> Endings:
    """The ending facts of a file from its chunks' `candidates`, in line order."""
    frames = [frame for frame in lines if frame.height]
    if not frames:
        return Endings()
    rows = pl.concat(frames).unique("line", keep="first").sort("line").rows()
    facts: list[EndingFact] = []
    roots: list[int] = []
    fields: dict[int, tuple[str, str, str]] = {}
    index = 0
    while index < len(rows):
        line, text = rows[index]
        index += 1
        wrapped = "WorkNCCL(" in text and ")" not in text.split("WorkNCCL(", 1)[1]
        if wrapped and index < len(rows) and rows[index][0] == line + 1:
            # a record wrapped at a terminal's width: its next line continues it
            text += rows[index][1]
            index += 1
        bar = _last_bar(text)
        if bar is not None:
            facts.append(EndingFact(source, line, "progress", bar[0][:TEXT_LIMIT], detail=bar[1]))
        for piece in _pieces(text):
            found = _field(piece)
            if found is not None:
                fields[line] = (*found, piece.strip())
                continue
            fact = read_line(piece, source, line)
            if fact is not None:
                if fact.kind == "elastic_root":
                    roots.append(len(facts))
                facts.append(fact)
                break  # one fact a line: the pieces of a glued line say it once
    for position in roots:
        facts[position] = _with_fields(facts[position], fields)
    return _held(_thrown(facts))


def read_line(text: str, source: str, line: int) -> EndingFact | None:
    """The fact one line (one piece of a glued line) states, or None."""
    body, rank, stamp = _unlabelled(text)
    at = _time(stamp or body)
    quoted = body[:TEXT_LIMIT]
    rank = rank if rank is not None else _rank_in(body)
    node = _NODE.search(body)
    clock = _glog_clock(stamp)

    def fact(kind: str, **detail: str | int | None) -> EndingFact:
        kept = {k: v for k, v in detail.items() if v is not None}
        host = kept.pop("host", None) or (node.group(1) if node else None)
        if clock is not None:
            kept["clock"] = clock
        return EndingFact(source, line, kind, quoted, rank, str(host) if host else None, at, kept)

    if body.startswith("Traceback (most recent call last)"):
        return fact("traceback")
    if (scheduler := _SCHEDULER.search(body)) is not None:
        if scheduler.group("failed"):
            return EndingFact(
                source, line, "node_failed", quoted, None, scheduler.group("failed"), at, {}
            )
        reason = scheduler.group("reason")
        detail: dict[str, str | int] = {
            "scope": scheduler.group("scope"),
            "job": scheduler.group("job"),
            "batch_host": scheduler.group("host"),  # not a failing node: not the `host`
        }
        if reason:
            detail["reason"] = reason.upper()
        return EndingFact(
            source,
            line,
            "scheduler",
            quoted,
            None,
            None,
            _time(scheduler.group("at")) or at,
            detail,
        )
    exception = _EXCEPTION.match(body)
    collective = _collective(body)
    if exception is not None:
        return fact("exception", exception=exception.group("name"), **collective)
    if (thrown := _TERMINATE.search(body)) is not None:
        return fact("exception", exception=thrown.group(1), thrown=1)
    if collective or _NCCL.search(body):
        return fact("nccl", **collective)
    if _NAN.search(body):
        return fact("nan")
    if body.startswith("Root Cause (first observed failure)"):
        return fact("elastic_root")
    if (stop := _STOP.search(body)) is not None:
        how = (
            "exit_duration"
            if stop.group("minutes")
            else "exit_interval"
            if stop.group("iteration")
            else "exit_signal"
        )
        return fact(
            "stop", how=how, iteration=_int(stop.group("iteration")), signal=stop.group("signal")
        )
    said = next((n for n, done in enumerate(_DONE) if done.search(body)), None)
    if said is not None:
        return fact("done", said=said)
    if (pod := _POD_EXIT.search(body)) is not None:
        return fact("exit", code=_int(pod.group("code")), host=pod.group("pod"))
    if (exited := _EXIT.search(body)) is not None:
        code = next((exited.group(g) for g in "abcd" if exited.group(g) is not None), None)
        task = _int(exited.group("task"))
        host = exited.group("srunhost") or exited.group("host")
        what = exited.group("what")
        if exited.group("killed"):
            return fact("signal", signal="SIGKILL", host=host, task=task)
        if what is not None and _OOM.search(what):
            return fact("oom", host=host, task=task)
        local = _int(exited.group("local"))
        return fact("exit", code=_int(code), host=host, task=task, local_rank=local)
    if _CUDA.search(body) or _DEVICE_ASSERT.search(body):
        return fact("cuda")
    if _OOM.search(body):
        return fact("oom")
    if (signal := _SIGNAL.search(body)) is not None:
        name = signal.group("a") or signal.group("b") or signal.group("c")
        return fact("signal", signal=name or "SIGKILL", number=_int(signal.group("num")))
    if at is not None and body:
        return fact("clock")
    return None


# A C++ exception's `what():` line follows its `terminate called` line within this many
# lines (two aborts' first lines can be glued, the class name wrapped to the next line).
THROWN_WITHIN = 3


def _thrown(facts: list[EndingFact]) -> list[EndingFact]:
    """A C++ exception (`terminate called after throwing an instance of 'c10::CUDAError'`)
    is told by its `what():` line, just after: the fact is that line, with the class."""
    kept: list[EndingFact] = []
    for fact in facts:
        previous = kept[-1] if kept else None
        if (
            previous is not None
            and previous.detail.get("thrown")
            and fact.source == previous.source
            and 0 < fact.line - previous.line <= THROWN_WITHIN
            and fact.text.startswith("what():")
        ):
            detail = {k: v for k, v in previous.detail.items() if k != "thrown"}
            kept[-1] = EndingFact(
                fact.source,
                fact.line,
                "exception",
                fact.text,
                fact.rank if fact.rank is not None else previous.rank,
                fact.host or previous.host,
                fact.at or previous.at,
                {**fact.detail, **detail},
            )
            continue
        kept.append(fact)
    return kept


def _pieces(text: str) -> list[str]:
    """A line's records: a progress bar's `\\r` and a glog header glued after a bar's end
    (`... [6:28:43<...][E ProcessGroupNCCL.cpp:458] ...`) start new ones."""
    text = _ANSI.sub("", text)
    parts = [p for p in text.split("\r") if p.strip()]
    split: list[str] = []
    for part in parts:
        split.extend(
            p for p in re.split(r"(?<=\])(?=\[[EWF]\d{0,4}[ \d:.]*[\w.]+:\d+\])", part) if p.strip()
        )
    return split or [text]


def _unlabelled(text: str) -> tuple[str, int | None, str | None]:
    """The line without launcher labels and a glog header, the rank a label names, and the
    timestamp a kubelet prefix or glog header printed."""
    rank = None
    stamp = None
    body = text.strip()
    body = _TASK_LABEL.sub("", body, count=1)
    for _ in range(3):  # `[rank5]:[E602 ...]`, `12: [rank5]: ...`: labels stack
        found = _PREFIX.match(body)
        if found is None or not found.group(0):
            glog = _GLOG.match(body)
            if glog is None:
                break
            stamp = stamp or glog.group(0)
            body = body[glog.end() :].strip()
            continue
        label = found.group("srun") or found.group("torchrun")
        if label is not None and rank is None:
            rank = int(label)
        stamp = stamp or found.group("kubelet")
        body = body[found.end() :].strip()
    return body, rank, stamp


def _rank_in(text: str) -> int | None:
    found = _RANK.search(text)
    if found is None:
        return None
    return int(next(g for g in found.groups() if g is not None))


def _collective(text: str) -> dict[str, str | int | None]:
    found = _WORK.search(text)
    if found is None:
        sequence = _WORK_SEQUENCE.search(text)
        return {"seq": int(sequence.group(1))} if sequence else {}
    return {
        "op": found.group("op"),
        "seq": _int(found.group("seq")),
        "timeout_ms": _int(found.group("timeout")),
        "ran_ms": _int(found.group("ran")),
    }


def _field(text: str) -> tuple[str, str] | None:
    """A field of torchrun's failure block (`  rank      : 17 (local_rank: 1)`), under a
    launcher label or not."""
    label = _PREFIX.match(text)
    found = _ELASTIC_FIELD.match(text[label.end() :] if label else text)
    return None if found is None else (found.group("field"), found.group("value"))


def _with_fields(root: EndingFact, fields: dict[int, tuple[str, str, str]]) -> EndingFact:
    """torchrun's root-cause block: the fields of the lines after its header (`[0]:`
    first). The fact moves to the line that tells how the process died: the `traceback`
    field where it names a signal, else the `exitcode` field."""
    detail: dict[str, str | int] = dict(root.detail)
    rank, host, at = root.rank, root.host, root.at
    line, text = root.line, root.text
    seen: set[str] = set()
    for number in range(root.line + 1, root.line + 9):
        if number not in fields:
            continue
        name, value, printed = fields[number]
        if name in seen:
            break  # the next failure's block
        seen.add(name)
        if name == "rank":
            rank = _int(value.split()[0] if value else None)
        elif name == "host":
            host = value
        elif name == "time":
            at = _time(value) or at
        elif name == "exitcode":
            code = _int(value.split()[0] if value else None)
            if code is not None:
                detail["code"] = code
            if "signal" not in detail:
                line, text = number, printed
        elif name == "traceback":
            signal = _SIGNAL.search(value)
            if signal is not None and signal.group("b"):
                detail["signal"] = signal.group("b")
                line, text = number, printed
    return EndingFact(root.source, line, root.kind, text, rank, host, at, detail)


def _held(facts: list[EndingFact]) -> Endings:
    """The first and last `HELD_PER_KIND` facts of each kind, and each kind's count."""
    counts = Counter(fact.kind for fact in facts)
    by_kind: dict[str, list[int]] = defaultdict(list)
    for index, fact in enumerate(facts):
        by_kind[fact.kind].append(index)
    keep: set[int] = set()
    for indices in by_kind.values():
        keep.update(indices[:HELD_PER_KIND])
        keep.update(indices[-HELD_PER_KIND:])
    return Endings(tuple(facts[i] for i in sorted(keep)), dict(counts))


def _last_bar(text: str) -> tuple[str, dict[str, str | int]] | None:
    """The last tqdm update on a line (its text, its count and total), or None."""
    bars = list(_BAR.finditer(text))
    if not bars:
        return None
    found = bars[-1]
    return found.group(0), {"iteration": int(found.group(1)), "total": int(found.group(2))}


def _int(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _glog_clock(stamp: str | None) -> str | None:
    """glog's `E0626 06:24:44.159` as `0626 06:24:44.159`, sortable within one log."""
    found = _GLOG_CLOCK.match(stamp or "")
    if found is None:
        return None
    return f"{found.group(1).zfill(4)} {found.group(2)}"


def _time(text: str) -> datetime | None:
    """A full date and time the text prints (`2021-05-27T21:42:11`, torchrun's
    `2024-06-02_11:27:55`), read as UTC; glog's `E0602 11:17:52` has no year: None."""
    found = _STAMP.search(text)
    if found is None:
        return None
    try:
        when = datetime.fromisoformat(f"{found.group(1)}T{found.group(2).replace(',', '.')}")
    except ValueError:
        return None
    return (
        when.replace(tzinfo=timezone.utc) if when.tzinfo is None else when.astimezone(timezone.utc)
    )
