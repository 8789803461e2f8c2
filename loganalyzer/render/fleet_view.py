"""The fleet page's view model: every figure formatted, every chart coordinate computed, so
that the template only lays out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from loganalyzer.analysis.goodput import LOST_CAUSES, LOST_LINES
from loganalyzer.analysis.outcome import FAILED_ENDINGS
from loganalyzer.render.clip import clip
from loganalyzer.render.fleet_text import ending_label, failure, hang_hours, run_counts, run_list
from loganalyzer.render.numbers import TIMES, number, percent, plural

CAUSE_NAMES = LOST_LINES  # the goodput budget's own names
CHART_W, CHART_H, PAD = 320, 90, 6


@dataclass(frozen=True)
class Cell:
    """A table cell: its text, the value it sorts by, and whether it is a number."""

    text: str
    sort: str
    numeric: bool = False
    bad: bool = False


@dataclass(frozen=True)
class Row:
    cells: tuple[Cell, ...]
    link: str | None = None
    flagged: bool = False


@dataclass(frozen=True)
class Table:
    columns: tuple[str, ...]
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    title: str
    flagged: bool


@dataclass(frozen=True)
class Chart:
    """A small chart of one figure per run over time, in SVG coordinates."""

    title: str
    width: int
    height: int
    line: str
    points: tuple[Point, ...]
    low: str
    high: str


@dataclass(frozen=True)
class Group:
    label: str
    summary: str
    charts: tuple[Chart, ...]


@dataclass(frozen=True)
class Bar:
    label: str
    value: str
    share: float


@dataclass(frozen=True)
class FleetView:
    title: str
    headline: tuple[tuple[str, str], ...]
    lost: tuple[Bar, ...]
    most_lost: Table
    regressions: Table
    regression_rule: str
    endings: Table
    recurring: Table
    failed: Table
    groups: tuple[Group, ...]
    runs: Table


def build_view(document: Mapping[str, Any], links: Mapping[str, str]) -> FleetView:
    """The view of a fleet document; `links` maps a run id to its own report's link (see
    `loganalyzer.fleet.report.report_links`)."""
    totals = document["totals"]
    lost_total = sum(v or 0.0 for v in document["lost_by_cause_gpu_hours"].values())
    # the causes any run lost time to: a column each (of the budget's ten lines)
    causes = tuple(c for c in LOST_CAUSES if document["lost_by_cause_gpu_hours"][c])
    return FleetView(
        title=f"Fleet: {totals['runs']} runs",
        headline=(
            (
                "runs",
                f"{totals['runs']} ({run_counts(totals, failed=False)})",
            ),
            ("GPU-hours", _hours(totals["gpu_hours"])),
            ("GPU-hours lost", _hours(totals["lost_gpu_hours"])),
            ("GPU-hours hung before the ending", _hours(totals["lost_hang_gpu_hours"])),
            ("failed", str(totals["failed"])),
            ("regressions", str(len(document["regressions"]))),
        ),
        lost=tuple(
            Bar(
                CAUSE_NAMES[cause],
                _hours(document["lost_by_cause_gpu_hours"][cause]),
                (document["lost_by_cause_gpu_hours"][cause] or 0.0) / lost_total
                if lost_total
                else 0.0,
            )
            for cause in causes
        ),
        most_lost=Table(
            ("run", "GPU-hours lost", "of GPU-hours", *(CAUSE_NAMES[c] for c in causes)),
            tuple(
                Row(
                    (
                        _text(r["run_id"]),
                        _num(r["lost_gpu_hours"], _hours(r["lost_gpu_hours"])),
                        _num(r["gpu_hours"], _hours(r["gpu_hours"])),
                        *(
                            _num(r[f"lost_{c}_gpu_hours"], _hours(r[f"lost_{c}_gpu_hours"]))
                            for c in causes
                        ),
                    ),
                    links.get(r["run_id"]),
                )
                for r in document["most_lost"]
            ),
        ),
        regressions=Table(
            ("run", "configuration", "step time", "group median", "slower by", "after", "change"),
            tuple(
                Row(
                    (
                        _text(r["run_id"]),
                        _text(r["config_label"]),
                        _num(r["step_time_s"], number(r["step_time_s"], ".4g", " s")),
                        _num(r["baseline_s"], number(r["baseline_s"], ".4g", " s")),
                        _num(r["slowdown"], percent(r["slowdown"])),
                        _text(r["previous_run"] or ""),
                        _text(_changes(r["config_changes"])),
                    ),
                    links.get(r["run_id"]),
                    flagged=True,
                )
                for r in document["regressions"]
            ),
        ),
        regression_rule=document["method"]["rule"],
        endings=_endings(document["endings"]),
        recurring=Table(
            ("where", "failed runs", "runs"),
            tuple(
                Row(
                    (
                        _text(f"{name} {r[name]}"),
                        _num(r["runs"], str(r["runs"])),
                        _text(run_list(r["run_ids"])),
                    ),
                    flagged=True,
                )
                for name in ("rank", "host")
                for r in document["recurring"][f"{name}s"]
            ),
        ),
        failed=Table(
            ("run", "how it ended"),
            tuple(
                Row(
                    (_text(r["run_id"]), Cell(failure(r), failure(r), bad=True)),
                    links.get(r["run_id"]),
                    True,
                )
                for r in document["failed"]
            ),
        ),
        groups=tuple(_group(g) for g in document["groups"]),
        runs=_runs(document["runs"], links, causes),
    )


def _endings(endings: Sequence[Mapping[str, Any]]) -> Table:
    """The runs by ending with the GPU-hours they held, their budgets lost and, of that, the
    hang before the ending."""
    rows = []
    for e in endings:
        hung = bool(e["lost_hang_gpu_hours"])
        label = ending_label(e["status"], e["reason"])
        rows.append(
            Row(
                (
                    Cell(label, label, bad=e["status"] in FAILED_ENDINGS),
                    _num(e["runs"], str(e["runs"])),
                    _num(e["gpu_hours"], _hours(e["gpu_hours"])),
                    _num(e["lost_gpu_hours"], _hours(e["lost_gpu_hours"])),
                    _num(e["lost_hang_gpu_hours"] if hung else None, hang_hours(e)),
                ),
                flagged=e["status"] in FAILED_ENDINGS,
            )
        )
    return Table(
        ("ending", "runs", "GPU-hours held", "lost in their budgets", "hung before the ending"),
        tuple(rows),
    )


def _runs(
    rows: Sequence[Mapping[str, Any]], links: Mapping[str, str], causes: Sequence[str]
) -> Table:
    columns = (
        "run",
        "status",
        "ending",
        "framework",
        "model",
        "params",
        "GPUs",
        "started",
        "ended",
        "GPU-hours",
        "MFU",
        "goodput MFU",
        "GPU-hours lost",
        *(f"lost: {CAUSE_NAMES[c]}" for c in causes),
        "verdicts (critical/warning/info)",
    )
    lines = []
    for r in rows:
        gpus = (
            f"{r['num_gpus']} {TIMES} {r['device'] or 'unknown device'}"
            if r["num_gpus"] is not None
            else "unknown"
        )
        verdicts = [r.get(f"verdicts_{s}") for s in ("critical", "warning", "info")]
        ok = r["status"] == "ok"
        failed_ending = r["outcome_status"] in FAILED_ENDINGS
        cells = (
            _text(r["run_id"]),
            Cell(_status(r), r["status"], bad=_status(r) != "ok"),
            Cell(
                _ending_of(r),
                _ending_of(r),
                bad=failed_ending,
            ),
            _text(r["framework"] or ""),
            _text(r["model"] or ""),
            _num(r["params"], number(r["params"], ".3g", missing="")),
            _num(r["num_gpus"], gpus if ok else ""),
            _text((r["started"] or "")[:19].replace("T", " ")),
            _text((r["ended"] or "")[:19].replace("T", " ")),
            _num(r["gpu_hours"], _hours(r["gpu_hours"]) if ok else ""),
            _num(r["mfu"], percent(r["mfu"]) if ok else ""),
            _num(r["goodput_mfu"], percent(r["goodput_mfu"]) if ok else ""),
            _num(r["lost_gpu_hours"], _hours(r["lost_gpu_hours"]) if ok else ""),
            *(
                _num(r[f"lost_{c}_gpu_hours"], _hours(r[f"lost_{c}_gpu_hours"]) if ok else "")
                for c in causes
            ),
            _num(
                sum(v or 0 for v in verdicts),
                "/".join(str(v) for v in verdicts) if ok else "",
            ),
        )
        flagged = not ok or failed_ending or bool(r.get("regression"))
        lines.append(Row(cells, links.get(r["run_id"]), flagged))
    return Table(columns, tuple(lines))


def _group(group: Mapping[str, Any]) -> Group:
    points = sorted(group["points"], key=lambda p: (p["started"] or "", p["run_id"]))
    summary = (
        f"{group['runs']} runs, median step {number(group['median_step_time_s'], '.4g', ' s')},"
        f" median MFU {percent(group['median_mfu'])}, {_hours(group['gpu_hours'])} GPU-hours,"
        f" {plural(group['regressions'], 'regression')}"
    )
    return Group(
        group["label"],
        summary,
        (
            _chart("step time (s)", points, "step_time_s", lambda v: number(v, ".4g", " s")),
            _chart("MFU", points, "mfu", percent),
        ),
    )


def _chart(title: str, points: Sequence[Mapping[str, Any]], field: str, shown: Any) -> Chart:
    values = [p[field] for p in points]
    known = [v for v in values if v is not None]
    low, high = (min(known), max(known)) if known else (0.0, 1.0)
    span = (high - low) or 1.0
    step = (CHART_W - 2 * PAD) / max(1, len(points) - 1)
    placed = tuple(
        Point(
            round(PAD + n * step, 1),
            round(CHART_H - PAD - (v - low) / span * (CHART_H - 2 * PAD), 1),
            f"{p['run_id']} ({(p['started'] or '')[:10]}): {shown(v)}",
            bool(p["regression"]),
        )
        for n, (p, v) in enumerate(zip(points, values, strict=True))
        if v is not None
    )
    line = " ".join(f"{p.x},{p.y}" for p in placed)
    return Chart(title, CHART_W, CHART_H, line, placed, shown(low), shown(high))


def _ending_of(row: Mapping[str, Any]) -> str:
    return ending_label(row["outcome_status"], row["outcome_reason"], read=row["status"] != "error")


def _status(row: Mapping[str, Any]) -> str:
    if row["status"] != "ok":
        return "error" if row["status"] == "error" else str(row["status"]).replace("_", " ")
    if row.get("regression"):
        return f"regression (+{percent(row['slowdown'])})"
    return "ok"


def _changes(changes: Sequence[Mapping[str, Any]]) -> str:
    return (
        "; ".join(
            f"{clip(str(c['key']))}: {clip(str(c['before']))} → {clip(str(c['after']))}"
            for c in changes
        )
        or "none seen"
    )


def _hours(value: float | None) -> str:
    return number(value, ",.1f", missing="unknown")


def _text(text: str) -> Cell:
    return Cell(text, text.lower())


def _num(value: float | int | None, text: str) -> Cell:
    return Cell(text, "" if value is None else repr(float(value)), numeric=True)
