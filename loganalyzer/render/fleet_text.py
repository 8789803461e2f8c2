"""The fleet report in the terminal: the totals, the regressions, the failed runs and the
runs that lost the most, from the fleet document."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from loganalyzer.fleet.document import LOST_LINES
from loganalyzer.render.clip import clip
from loganalyzer.render.numbers import number, percent, plural


def render_fleet_text(document: Mapping[str, Any]) -> str:
    totals = document["totals"]
    lines = [
        f"Fleet of {totals['runs']} runs ({totals['analysed']} analysed, "
        f"{totals['failed']} failed): {_hours(totals['gpu_hours'])} GPU-hours, "
        f"{_hours(totals['lost_gpu_hours'])} lost",
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
        lines.append(f"Runs that could not be read ({len(document['failed'])})")
        lines.extend(f"  {r['run_id']}: {r['error']}" for r in document["failed"])
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
