"""How the run ended, in words: the first line of every output (summary `outcome`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loganalyzer.render.numbers import duration, number, plural

STATUS = {
    "completed": "Completed",
    "stopped": "Stopped cleanly",
    "crashed": "Crashed",
    "hung": "Hung",
    "killed": "Killed",
    "unknown": "Ending unknown",
}
REASON = {
    "oom": "out of memory",
    "nccl_timeout": "NCCL timeout",
    "nan": "NaN",
    "cuda_error": "CUDA error",
    "exception": "exception",
    "signal": "signal",
    "time_limit": "slurm's time limit",
    "preempted": "preemption",
    "node_failure": "a node failure",
    "cancelled": "a cancel",
    "exit_duration": "--exit-duration-in-mins",
    "exit_interval": "--exit-interval",
    "exit_signal": "the exit signal handler",
    "train_iters_reached": "the iteration total reached",
}


def ending_sentence(outcome: Mapping[str, Any]) -> str:
    """One sentence: how, where, what and on which rank, for how long, and the line."""
    status, reason = outcome["status"], outcome.get("reason")
    where = _where(outcome)
    line = _line(outcome)
    if status == "crashed":
        return f"Crashed {where}: {_what(outcome)}{_on(outcome)}{_others(outcome)}{line}"
    if status == "hung":
        lost = outcome.get("hang_gpu_hours")
        cost = f": {number(lost, ',.0f')} GPU-hours lost" if lost is not None else ""
        return (
            f"Hung {where} for {duration(outcome.get('hang_s'))} until "
            f"{_cause(outcome)}{line}{cost}"
        )
    if status == "killed":
        hang = outcome.get("hang_s")
        idle = f", {duration(hang)} after its last progress" if hang is not None else ""
        return f"Killed {where} by {_cause(outcome)}{_on(outcome)}{idle}{line}"
    if status == "stopped":
        return f"Stopped cleanly {where} ({REASON.get(reason or '', reason)}{_at_line(outcome)})"
    if status == "completed":
        evidence = outcome.get("evidence") or [{}]
        how = "the framework's end" if evidence[0].get("role") == "decides" else "its total"
        return f"Completed {where} ({how}{_at_line(outcome)})"
    return f"Ending unknown: the log stops {where} with no line saying how the run ended"


def _where(outcome: Mapping[str, Any]) -> str:
    last, total = outcome.get("last_iteration"), outcome.get("train_iters")
    if last is None:
        return "before its first iteration"
    if total is None:
        return f"at iteration {last:,}"
    return f"at iteration {last:,} of {total:,}"


def _what(outcome: Mapping[str, Any]) -> str:
    reason, exception = outcome.get("reason"), outcome.get("exception")
    words = REASON.get(reason or "", "an error")
    if reason == "exception":
        words = exception or words
    elif reason == "signal":
        words = f"signal {_signal(outcome) or ''}".strip()
    elif exception:
        words = f"{words} ({exception})"
    collective = outcome.get("collective")
    if collective:
        parts = [str(collective.get("op", ""))]
        if collective.get("seq") is not None:
            parts.append(f"sequence {collective['seq']:,}")
        if collective.get("timeout_ms") is not None:
            parts.append(f"timeout {duration(collective['timeout_ms'] / 1000)}")
        words += f" in {', '.join(p for p in parts if p)}"
    return words


def _signal(outcome: Mapping[str, Any]) -> str | None:
    message = str(outcome.get("message") or "")
    for name in ("SIGABRT", "SIGSEGV", "SIGKILL", "SIGTERM", "SIGBUS", "SIGINT", "SIGFPE"):
        if name in message:
            return name
    return None


def _cause(outcome: Mapping[str, Any]) -> str:
    reason = outcome.get("reason")
    if reason == "signal":
        return _signal(outcome) or "a signal"
    return REASON.get(reason or "", "an outside kill")


def _on(outcome: Mapping[str, Any]) -> str:
    rank, host = outcome.get("rank"), outcome.get("host")
    if rank is not None and host:
        return f" on rank {rank} ({host})"
    if rank is not None:
        return f" on rank {rank}"
    return f" on {host}" if host else ""


def _others(outcome: Mapping[str, Any]) -> str:
    others = outcome.get("other_ranks") or []
    return f" ({plural(len(others), 'other rank')} failed after it)" if others else ""


def _at_line(outcome: Mapping[str, Any]) -> str:
    evidence = outcome.get("evidence") or []
    return f", {_unit(evidence[0])} {evidence[0]['line']:,}" if evidence else ""


def _line(outcome: Mapping[str, Any]) -> str:
    evidence = outcome.get("evidence") or []
    return f" ({_unit(evidence[0])} {evidence[0]['line']:,})" if evidence else ""


def _unit(item: Mapping[str, Any]) -> str:
    """What an evidence item's `line` counts: a line of a text log, or a record of a binary
    store (TensorBoard, W&B), which has no lines."""
    return "record" if item.get("unit") == "record" else "line"


def evidence_location(item: Mapping[str, Any], grouped: bool = True) -> str:
    """`file:line`, or `file: record N` in a binary store (`grouped`: 1,234)."""
    number = f"{item['line']:,}" if grouped else str(item["line"])
    if _unit(item) == "record":
        return f"{item['file']}: record {number}"
    return f"{item['file']}:{number}"


# What an evidence line without its text is (the table holds no line text).
NO_TEXT = {"last_record": "the last iteration record"}


def evidence_text(item: Mapping[str, Any]) -> str:
    """An evidence line's text, or what the line is where the document has no text."""
    text = item.get("text")
    return str(text) if text is not None else NO_TEXT.get(str(item.get("role")), "")


def evidence_lines(outcome: Mapping[str, Any]) -> list[str]:
    """The lines the outcome rests on: `file:line: text`, the deciding one first."""
    return [
        f"{evidence_location(item, grouped=False)}: {evidence_text(item)}"
        for item in outcome.get("evidence") or []
    ]


# A launch's ending as the object of "after ...": the status's noun phrase.
_LAUNCH_ENDING = {
    "hung": "a hang",
    "killed": "a kill",
    "stopped": "a clean stop",
    "completed": "the launch's end",
    "unknown": "an unknown ending",
}
# A crash's reason as a noun phrase (an exception's class is named after it).
_CRASH = {
    "oom": "an out-of-memory",
    "nccl_timeout": "an NCCL timeout",
    "nan": "a NaN",
    "cuda_error": "a CUDA error",
}


def launch_ending(outcome: Mapping[str, Any] | None) -> str:
    """How a launch that a restart followed ended, as the object of "after": "an NCCL
    timeout on rank 5 (`_ALLGATHER_BASE`)", "an out-of-memory on rank 3 at node-7
    (OutOfMemoryError)", "a kill by slurm's time limit", "an unknown ending"."""
    if outcome is None:
        return _LAUNCH_ENDING["unknown"]
    status, reason = outcome["status"], outcome.get("reason")
    exception = outcome.get("exception")
    if status == "crashed":
        if reason in _CRASH:
            words = _CRASH[reason] + _on_rank(outcome)
            collective = outcome.get("collective") or {}
            detail = f"`{collective['op']}`" if collective.get("op") else exception
            return f"{words} ({detail})" if detail else words
        if reason == "signal":
            return f"a crash on {_signal(outcome) or 'a signal'}{_on_rank(outcome)}"
        return f"a crash{_on_rank(outcome)}{f' ({exception})' if exception else ''}"
    if status in ("hung", "killed") and reason is not None:
        return f"{_LAUNCH_ENDING[status]} by {_cause(outcome)}"
    if status == "stopped" and reason is not None:
        return f"a clean stop ({REASON.get(reason, reason)})"
    return _LAUNCH_ENDING.get(status, _LAUNCH_ENDING["unknown"])


def _on_rank(outcome: Mapping[str, Any]) -> str:
    """ " on rank 3 at node-7": `_on` without its parentheses, which a detail follows."""
    rank, host = outcome.get("rank"), outcome.get("host")
    where = f" on rank {rank}" if rank is not None else ""
    return f"{where} at {host}" if host else where


def restart_sentence(restart: Mapping[str, Any]) -> str:
    """ "restart at iteration 1,000 after an NCCL timeout on rank 5 (`_ALLGATHER_BASE`) at
    iteration 1,530: 530 iterations redone"."""
    return (
        f"restart at iteration {restart['resumed_at']:,} after "
        f"{launch_ending(restart.get('previous_outcome'))} at iteration "
        f"{restart['after_iteration']:,}: {plural(restart['lost_iterations'], 'iteration')} "
        "redone"
    )


def chart_label(outcome: Mapping[str, Any]) -> str:
    """The ending as the charts mark it: its status and what it was ("crashed:
    OutOfMemoryError", "killed: time limit", "hung: cancelled", "unknown: the log stops")."""
    status, reason = outcome["status"], outcome.get("reason")
    if status == "unknown":
        return "unknown: the log stops"
    if status in ("killed", "hung") and reason is not None and reason != "signal":
        return f"{status}: {reason.replace('_', ' ')}"  # "killed: time limit", "hung: cancelled"
    what = outcome.get("exception") or (_cause(outcome) if reason else None)
    return f"{status}: {what}" if what else status
