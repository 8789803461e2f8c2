"""The terminal sections that say why: causes, the goodput budget, the MFU waterfall and run
health. Lays out the summary document's objects, computes nothing."""

from __future__ import annotations

from typing import Any

from loganalyzer.analysis.goodput import HANG
from loganalyzer.render.numbers import TIMES, duration, listing, number, percent

LISTED = 5


def unknown_mfu(flops: dict[str, Any], peak: float | None) -> str:
    """What is said of an unknown MFU: the inputs the document says are missing
    (`flops.mfu_missing`), and the options that supply them."""
    missing = flops.get("mfu_missing")
    if not isinstance(missing, list):  # a document before `mfu_missing`
        return "unknown: pass --gpu" if peak is None else "unknown (see warnings)"
    options = [str(m["option"]) for m in missing if m.get("option")]
    if options:
        return f"unknown: pass {listing(list(dict.fromkeys(options)))}"
    names = [str(m.get("input", "")).replace("_", " ") for m in missing]
    return f"unknown: no {', '.join(names)}" if names else "unknown (see warnings)"


def render_why(doc: dict[str, Any]) -> list[str]:
    """The sections, each preceded by a blank line; nothing for a document without them."""
    lines: list[str] = []
    if "goodput" in doc:
        lines += _causes(doc) + _goodput(doc["goodput"])
    if "waterfall" in doc:
        lines += _waterfall(doc["waterfall"])
    if "health" in doc:
        lines += _health(doc["health"])
    return lines


def _causes(doc: dict[str, Any]) -> list[str]:
    rows = []
    for step in sorted(doc["slow_steps"], key=lambda s: -s["lost_s"])[:LISTED]:
        rows.append((_iterations(step), step["lost_s"], step.get("cause")))
    for stall in sorted(doc["stalls"], key=lambda s: -s["gap_s"])[:LISTED]:
        label = f"stall {stall['after_iteration']}–{stall['iteration']}"
        rows.append((label, stall["gap_s"], stall.get("cause")))
    for restart in doc["restarts"]:
        rows.append((f"restart {restart['segment']}", restart["lost_s"], restart.get("cause")))
    for cost in doc["goodput"].get("attributed", [])[:LISTED]:
        cause = {"kind": cost["kind"], "evidence": cost["evidence"]}
        rows.append(
            (
                f"iterations {cost['first_iteration']}–{cost['last_iteration']}",
                cost["lost_s"],
                cause,
            )
        )
    if not rows:
        return []
    listed = (
        ("slow steps", doc["slow_steps"]),
        ("untimed gaps", doc["stalls"]),
        ("attributed records", doc["goodput"].get("attributed", [])),
    )
    cut = [f"{LISTED} of {len(items)} {name}" for name, items in listed if len(items) > LISTED]
    lines = ["", "Causes" + (f" ({', '.join(cut)} listed; the JSON has them all)" if cut else "")]
    for label, lost, cause in rows:
        kind = cause["kind"] if cause else "unknown"
        evidence = f": {cause['evidence']}" if cause else ""
        lines.append(f"  {label}, {duration(lost)} lost — {kind}{evidence}")
    return lines


def _iterations(entry: dict[str, Any]) -> str:
    """ "iteration N" or "iterations A–B", from whichever range fields the entry carries."""
    first = entry.get("first_iteration", entry.get("start_iteration"))
    last = entry.get("last_iteration", entry.get("end_iteration", entry.get("iteration")))
    if first is None or first == last:
        return f"iteration {last}"
    return f"iterations {first}–{last}"


def _goodput(goodput: dict[str, Any]) -> list[str]:
    lines = [
        "",
        f"Goodput budget ({duration(goodput['wall_s'])} wall clock: {goodput['wall_clock']})",
    ]
    # a null line is a span too large to hold (it overflowed): shown as unknown, not hidden
    shown = [
        line
        for line in goodput["lines"]
        if line["seconds"] is None or abs(line["seconds"]) >= 0.0005
    ]
    width = max((len(line["name"]) for line in shown), default=0)
    at_least = (goodput.get("hang") or {}).get("bound") == "at_least"
    cells = [
        ("at least " if at_least and line["name"] == HANG else "")
        + number(line["seconds"], ",.1f", " s")
        for line in shown
    ]
    span = max((len(cell) for cell in cells), default=0)
    for line, seconds in zip(shown, cells, strict=True):
        lines.append(
            f"  {line['name']:<{width}}  {seconds:>{max(12, span)}}  {percent(line['share']):>7}"
        )
    lines.append(f"  {goodput['summary']}")
    return lines


def _waterfall(waterfall: dict[str, Any]) -> list[str]:
    if not waterfall["steps"]:
        return []
    lines = ["", "MFU waterfall (steps multiply, from 100 % of the peak)"]
    width = max(len(step["name"]) for step in waterfall["steps"])
    for step in waterfall["steps"]:
        lines.append(
            f"  {step['name']:<{width}}  {TIMES} {number(step['factor'], '.3f')}"
            f"  {percent(step['value_before']):>7} → {percent(step['value_after']):>7}"
            f"  {step['formula']}"
        )
    lines.append(f"  achieved: {percent(waterfall['achieved'])}, {waterfall['achieved_label']}")
    lines += [f"  note: {note}" for note in waterfall["notes"]]
    return lines


def _health(health: dict[str, Any]) -> list[str]:
    lines = ["", "Run health"]
    for phase in health["phases"][:8]:
        lines.append(
            f"  {phase['name']:<36} {number(phase['median_ms'], ',.1f', ' ms'):>12}"
            f"  {percent(phase['share']):>7} of the step"
        )
    for key, label in (
        ("skipped", "skipped iterations"),
        ("nan", "NaN iterations"),
        ("loss_scale_drops", "loss-scale drops"),
    ):
        counted = health[key]
        where = (
            f" (at {', '.join(str(i) for i in counted['iterations'])})"
            if counted["iterations"]
            else ""
        )
        lines.append(f"  {label}: {counted['total']}{where}")
    memory = health["memory"]
    if memory["max_allocated_gb"] is not None:
        rank = f" on rank {memory['rank']}" if memory["rank"] is not None else ""
        device = (
            f" of {number(memory['device_gb'], 'g', ' GB')}, headroom {percent(memory['headroom'])}"
            if memory["device_gb"]
            else ""
        )
        peak = number(memory["max_allocated_gb"], ".1f", " GB")
        lines.append(f"  memory: max allocated {peak}{rank}{device}")
    lines.append(f"  tokens/s/GPU: {number(health['tokens_per_s_per_gpu'], ',.0f')}")
    return lines
