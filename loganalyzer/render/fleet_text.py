"""The fleet report in the terminal: the totals, how the runs ended and what it cost, the
ranks and hosts failures recur on, the regressions, the failed runs and the runs that lost
the most, from the fleet document."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from loganalyzer.analysis.goodput import LOST_LINES
from loganalyzer.render.clip import clip
from loganalyzer.render.numbers import duration, number, percent, plural

# Where a run's ending is not a status: it could not be read, or was indexed without one.
NOT_READ = "could not be read"
NOT_RECORDED = "not recorded (indexed before outcomes)"


def render_fleet_text(document: Mapping[str, Any]) -> str:
    totals = document["totals"]
    lines = [
        f"Fleet of {totals['runs']} runs ({run_counts(totals)}): "
        f"{_hours(totals['gpu_hours'])} GPU-hours, {_hours(totals['lost_gpu_hours'])} lost"
        + _hang_total(totals),
    ]
    if totals["runs_without_gpu_hours"]:
        lines.append(
            f"  {plural(totals['runs_without_gpu_hours'], 'run')} without a GPU count, so no"
            " GPU-hours: index them with --num-gpus"
        )
    lines.append("")
    lines.append("GPU-hours lost by cause")
    width = max(len(name) for name in LOST_LINES.values())
    for cause, name in LOST_LINES.items():
        hours = _hours(document["lost_by_cause_gpu_hours"][cause])
        lines.append(f"  {name:<{width}} {hours:>12}")
    lines.extend(_endings(document["endings"]))
    lines.extend(_recurring(document["recurring"]))
    lines.append("")
    lines.append(f"Regressions ({len(document['regressions'])})")
    for r in document["regressions"]:
        changes = "; ".join(
            f"{clip(str(c['key']))} {clip(str(c['before']))} → {clip(str(c['after']))}"
            for c in r["config_changes"]
        )
        lines.append(
            f"  {r['run_id']}: step {number(r['step_time_s'], '.4g', ' s')} vs group median "
            f"{number(r['baseline_s'], '.4g', ' s')} ({percent(r['slowdown'])} slower)"
            + (f"; changed: {changes}" if changes else "")
        )
    if document["failed"]:
        lines.append("")
        lines.append(f"Failed runs ({len(document['failed'])})")
        lines.extend(f"  {r['run_id']}: {failure(r)}" for r in document["failed"])
    if document["most_lost"]:
        lines.append("")
        lines.append("The runs that lost the most GPU-hours")
        lines.extend(
            f"  {r['run_id']}: {_hours(r['lost_gpu_hours'])} of {_hours(r['gpu_hours'])}"
            for r in document["most_lost"]
        )
    return "\n".join(lines)


def _hours(value: float | None) -> str:
    return number(value, ",.1f")


def ending_label(status: str | None, reason: str | None, *, read: bool = True) -> str:
    """An ending in words: its status, and its reason where it has one."""
    if not read:
        return NOT_READ
    if status is None:
        return NOT_RECORDED
    return f"{status} ({reason.replace('_', ' ')})" if reason else status


def failure(run: Mapping[str, Any]) -> str:
    """A failed run in one line: how it ended, where, and its error line."""
    if run["status"] == "error":
        return f"{NOT_READ}: {run['error']}"
    words = [ending_label(run["ending"], run["reason"])]
    if run["exception"] and run["reason"] == "exception":
        words[0] = f"{run['ending']} ({run['exception']})"
    if run["status"] != "ok":
        words.append("before its first iteration")
    elif run["last_iteration"] is not None:
        words.append(f"at iteration {run['last_iteration']:,}")
    if run["rank"] is not None:
        words.append(f"on rank {run['rank']}")
    if run["host"]:
        words.append(f"on {run['host']}")
    if run["ending"] == "hung":
        hang = run["hang_s"]
        words.append(f"for {duration(hang)}" if hang is not None else "for an unknown time")
    text = " ".join(words)
    return f"{text}: {run['error']}" if run["error"] else text


def run_list(run_ids: Sequence[str], shown: int = 5) -> str:
    """The first `shown` run ids, and how many more."""
    more = len(run_ids) - shown
    return ", ".join(run_ids[:shown]) + (f" and {more} more" if more > 0 else "")


def run_counts(totals: Mapping[str, Any], failed: bool = True) -> str:
    """How many runs were analysed, logged no iteration, could not be read (and failed)."""
    parts = [f"{totals['analysed']} analysed"]
    if totals["no_iterations"]:
        parts.append(f"{totals['no_iterations']} with no iteration")
    if totals["not_read"]:
        parts.append(f"{totals['not_read']} not read")
    if failed:
        parts.append(f"{totals['failed']} failed")
    return ", ".join(parts)


def _hang_total(totals: Mapping[str, Any]) -> str:
    hang = totals["lost_hang_gpu_hours"]
    return f" ({_hours(hang)} of it hung before the ending)" if hang else ""


def _endings(endings: Sequence[Mapping[str, Any]]) -> list[str]:
    """The runs by ending, with the GPU-hours they held, their budgets lost and, of that,
    the hang before the ending."""
    if not endings:
        return []
    labels = [ending_label(e["status"], e["reason"]) for e in endings]
    width = max(len(label) for label in (*labels, "ending"))
    lines = [
        "",
        "How the runs ended",
        f"  {'ending':<{width}} {'runs':>5} {'GPU-h held':>12} {'GPU-h lost':>12}"
        f" {'GPU-h hung':>12}",
    ]
    for label, e in zip(labels, endings, strict=True):
        lines.append(
            f"  {label:<{width}} {e['runs']:>5} {_hours(e['gpu_hours']):>12}"
            f" {_hours(e['lost_gpu_hours']):>12} {hang_hours(e):>12}".rstrip()
        )
    lines.extend(
        (
            "  held: the runs' wall clock; lost: by their goodput budgets; hung: of that, the time",
            "  from the last progress to the kill or timeout that ended the run. The work a crash",
            "  or a kill loses since its last checkpoint is not known from its log: not counted.",
        )
    )
    return lines


def hang_hours(ending: Mapping[str, Any]) -> str:
    """The GPU-hours an ending's runs held hung before it, and how many hung runs' hangs
    are unknown."""
    unknown = ending["hang_unknown"]
    if unknown and unknown == ending["runs"]:
        return "unknown"
    hours = _hours(ending["lost_hang_gpu_hours"]) if ending["lost_hang_gpu_hours"] else ""
    return f"{hours} ({plural(unknown, 'run')} unknown)" if unknown else hours


def _recurring(recurring: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[str]:
    """The ranks and hosts that recur across failed runs."""
    found = [
        f"  {name} {r[name]}: {plural(r['runs'], 'failed run')} ({run_list(r['run_ids'])})"
        for name in ("rank", "host")
        for r in recurring[f"{name}s"]
    ]
    return ["", "Failures recur on", *found] if found else []
