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
    return f", line {evidence[0]['line']:,}" if evidence else ""


def _line(outcome: Mapping[str, Any]) -> str:
    evidence = outcome.get("evidence") or []
    return f" (line {evidence[0]['line']:,})" if evidence else ""


# What an evidence line without its text is (the table holds no line text).
NO_TEXT = {"last_record": "the last iteration record"}


def evidence_text(item: Mapping[str, Any]) -> str:
    """An evidence line's text, or what the line is where the document has no text."""
    text = item.get("text")
    return str(text) if text is not None else NO_TEXT.get(str(item.get("role")), "")


def evidence_lines(outcome: Mapping[str, Any]) -> list[str]:
    """The lines the outcome rests on: `file:line: text`, the deciding one first."""
    return [
        f"{item['file']}:{item['line']}: {evidence_text(item)}"
        for item in outcome.get("evidence") or []
    ]
