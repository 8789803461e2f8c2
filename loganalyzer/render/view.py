"""Building the report's view model (`render.viewmodel`) from the summary document and the run.

This is the one place that reads the summary document's fields by name for the HTML and
Markdown renderers; templates only loop and branch over what it builds. Every figure shown is
the document's number, printed with `render.numbers`; the per-record series behind the charts
come from the run's tables (see `render.charts`). A field the document does not have (an
older or newer schema) leaves its part of the view empty instead of failing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from loganalyzer.analysis.comparison import zero_stage
from loganalyzer.analysis.incident_verdicts import CODES as INCIDENT_CODES
from loganalyzer.analysis.outcome import ENDING_SEVERITY
from loganalyzer.model import Run
from loganalyzer.render.charts import build_charts, waterfall_chart
from loganalyzer.render.clip import clip
from loganalyzer.render.clocks import pace_legend, pace_note
from loganalyzer.render.ending import (
    chart_label,
    ending_sentence,
    evidence_location,
    evidence_text,
    launch_ending,
    restart_sentence,
)
from loganalyzer.render.loglines import location, read_lines, record_sources
from loganalyzer.render.numbers import TIMES, UNKNOWN, duration, number, percent, plural
from loganalyzer.render.viewmodel import (
    BudgetPart,
    CauseRow,
    Chart,
    ChartFacts,
    ConfigRow,
    Ending,
    EndingMark,
    Figure,
    Health,
    Identity,
    IncidentRow,
    LostRow,
    Marker,
    ReportView,
    Row,
    SlowRow,
    Span,
    VerdictRow,
    Waterfall,
    WaterfallStep,
)
from loganalyzer.render.why import unknown_mfu
from loganalyzer.secrets import mask_text, mask_value, planted_secrets, run_secrets

# Slow steps listed in the table; the rest are counted ("N more").
SLOW_ROWS = 50
# Timer phases listed under run health, as in the terminal.
HEALTH_PHASES = 8
SEVERITY_RANK = {"critical": 0, "warning": 1, "info": 2}

# Which headline figure a verdict colours, by the start of its code.
_FIGURE_VERDICTS = {
    "mfu": ("MFU_",),
    "tflops": ("REPORTED_TFLOPS",),
    "step_time": ("SLOW_STEPS", "PERIODIC", "SUSTAINED", "STEP_TIME_DRIFT"),
    "lost": ("SLOW_STEPS", "PERIODIC", "SUSTAINED", "RESTARTS", "STALLS"),
}
# Where a verdict's evidence is, by the start of its code.
_VERDICT_TARGETS = (
    ("MFU_", "waterfall"),
    ("PIPELINE_BUBBLE", "waterfall"),
    ("EXPOSED_COMMUNICATION", "waterfall"),
    ("CHECKPOINT_SAVE_COST", "causes"),
    ("EVALUATION_COST", "causes"),
    ("DATA_LOADING_COST", "causes"),
    ("REPORTED_TFLOPS", "formula"),
    ("STEP_TIME_DRIFT", "chart-step-time"),
    ("RESTARTS", "restarts"),
    ("STALLS", "restarts"),
    ("STRAGGLER", "chart-ranks"),
    *((code, "incidents") for code in INCIDENT_CODES.values()),
    ("ENDING_", "ending"),
    ("", "slow-steps"),
)


def build_view(
    doc: Mapping[str, Any],
    run: Run | None = None,
    *,
    generated_at: str | None = None,
    charts: bool = True,
    quotes: bool = True,
) -> ReportView:
    """The report's view of a summary document; `run` supplies the tables the charts draw and
    the log lines the slow-step table quotes (None: no charts, no quoted lines). Outputs that
    show neither (Markdown, a comparison) pass `charts=False, quotes=False`: quoting reads the
    logs again."""
    verdicts = _verdicts(doc)
    facts = chart_facts(doc)
    drawn: tuple[Chart, ...] = ()
    if charts and run is not None:
        drawn = build_charts(run, facts)
    shown = {chart.id for chart in drawn}
    verdicts = tuple(
        v if not v.target.startswith("chart-") or v.target in shown else _retarget(v)
        for v in verdicts
    )
    identity = _identity(doc, run)
    falls = waterfall(doc)
    causes = cause_rows(doc, run if quotes else None)
    return ReportView(
        title=f"{identity.name}: training efficiency",
        tool_version=str(doc.get("tool_version", "")),
        generated_at=generated_at,
        identity=identity,
        headline=headline(doc, verdicts),
        reported=_reported(doc),
        verdicts=verdicts,
        budget=time_budget(doc),
        budget_summary=str(_get(doc, "goodput", "summary") or ""),
        charts=drawn,
        slow_steps=_slow_rows(doc, run if quotes else None),
        slow_more=max(0, len(doc.get("slow_steps") or []) - SLOW_ROWS),
        restarts=_restarts(doc),
        stalls=_stalls(doc),
        facts=_facts(doc),
        config=_config(run),
        formula=str(_get(doc, "flops", "derivation") or ""),
        warnings=tuple(clip(str(w)) for w in doc.get("warnings") or ()),
        incidents=incident_rows(doc, run if quotes else None),
        ending=ending_view(doc),
        restart_sentences=tuple(restart_sentence(r) for r in doc.get("restarts") or ()),
        lost=time_lost(doc),
        top_verdicts=top_verdicts(doc, verdicts),
        waterfall=falls,
        waterfall_chart=waterfall_chart(falls) if charts and falls else None,
        waterfall_missing="" if falls else waterfall_missing(doc),
        causes=causes[:SLOW_ROWS],
        causes_more=max(0, len(causes) - SLOW_ROWS),
        health=health_view(doc),
    )


def ending_view(doc: Mapping[str, Any]) -> Ending | None:
    """The ending as the report opens with it (None for a document without `outcome`)."""
    outcome = doc.get("outcome")
    if not isinstance(outcome, Mapping):
        return None
    status = str(outcome.get("status"))
    return Ending(
        status=status,
        severity=ENDING_SEVERITY.get(status, "info"),
        sentence=ending_sentence(outcome),
        evidence=tuple(
            Row((str(e["role"]).replace("_", " "), evidence_location(e), evidence_text(e)))
            for e in outcome.get("evidence") or ()
        ),
    )


def _retarget(verdict: VerdictRow) -> VerdictRow:
    """A verdict whose chart the run's data do not allow links to the warnings instead of to
    nothing."""
    return VerdictRow(verdict.severity, verdict.code, verdict.message, "warnings")


def _get(doc: Mapping[str, Any], *keys: str) -> Any:
    """doc[k1][k2]..., or None where any level is missing or null."""
    value: Any = doc
    for key in keys:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _float(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _verdicts(doc: Mapping[str, Any]) -> tuple[VerdictRow, ...]:
    rows = [
        VerdictRow(
            severity=str(v.get("severity", "info")),
            code=str(v.get("code", "")),
            message=str(v.get("message", "")),
            target=next(
                t for prefix, t in _VERDICT_TARGETS if str(v.get("code")).startswith(prefix)
            ),
        )
        for v in doc.get("verdicts") or ()
    ]
    return tuple(rows)  # in the document's order, which ranks them


def _severity(key: str, verdicts: Sequence[VerdictRow]) -> str | None:
    prefixes = _FIGURE_VERDICTS.get(key, ())
    # Information does not colour a figure: only what needs a reader's attention does.
    found = [
        v.severity
        for v in verdicts
        if v.code.startswith(prefixes) and v.severity in ("warning", "critical")
    ]
    return min(found, key=lambda s: SEVERITY_RANK.get(s, 3)) if found else None


def headline(doc: Mapping[str, Any], verdicts: Sequence[VerdictRow] = ()) -> tuple[Figure, ...]:
    """The first screen's figures, in reading order."""
    flops = doc.get("flops") or {}
    mfu, hfu = _float(flops.get("mfu")), _float(flops.get("hfu"))
    goodput = _float(flops.get("mfu_goodput"))
    tflops = _float(flops.get("tflops_per_gpu"))
    median = _float(_get(doc, "step_time_s", "median"))
    coarse = pace_note(_get(doc, "step_time_s", "pace_method"))
    tokens = _float(_get(doc, "throughput", "tokens_per_s"))
    logged = _float(_get(doc, "time", "logged_s"))
    wall = _float(_get(doc, "goodput", "wall_s"))
    lost = _lost_seconds(doc)
    peak = _float(_get(doc, "peak", "tflops_per_gpu"))
    unknown = unknown_mfu(flops, peak)
    printed = _float(_get(doc, "reported", "tflops_per_gpu"))
    ratio = _float(_get(doc, "reported", "recomputed_over_reported"))
    band = _reference_band(doc, peak)
    return (
        Figure(
            "mfu",
            "MFU (steady)",
            percent(mfu) if mfu is not None else unknown,
            mfu,
            _severity("mfu", verdicts),
            f"overall {percent(flops.get('mfu_overall'))}" + (f"; {band.label}" if band else ""),
        ),
        Figure("hfu", "HFU", percent(hfu), hfu, None, "counts recomputation"),
        Figure(
            "mfu_goodput",
            "goodput MFU",
            percent(goodput),
            goodput,
            None,
            "unique iterations over the wall clock",
        ),
        Figure(
            "tflops",
            "TFLOPS/GPU",
            number(tflops, ".1f"),
            tflops,
            _severity("tflops", verdicts),
            (f"of {number(peak, 'g')} peak" if peak is not None else "peak unknown")
            + (f"; framework {number(printed, '.1f')}" if printed is not None else "")
            + (f", ratio {number(ratio, '.3f')}{TIMES}" if printed is not None and ratio else ""),
        ),
        Figure("tokens_per_s", "tokens/s", number(tokens, ",.0f"), tokens),
        Figure(
            "step_time",
            "median step time" if coarse is None else "step time",
            number(median, ".4g", " s"),
            median,
            _severity("step_time", verdicts),
            "steady state" if coarse is None else f"steady state, {coarse}",
        ),
        Figure(
            "wall_clock",
            "wall clock",
            duration(wall) if wall else UNKNOWN,
            wall or None,
            None,
            f"{duration(logged)} in logged steps" if logged else "",
        ),
        Figure(
            "lost",
            "time lost",
            duration(lost),
            lost,
            _severity("lost", verdicts),
            f"{percent(lost / wall)} of wall clock" if wall else "",
        ),
    )


def _reported(doc: Mapping[str, Any]) -> str:
    """The framework's own TFLOPS beside the recomputed one, with the ratio."""
    printed = _float(_get(doc, "reported", "tflops_per_gpu"))
    if printed is None:
        return "The framework printed no TFLOPS figure."
    ratio = _float(_get(doc, "reported", "recomputed_over_reported"))
    text = f"The framework printed {number(printed, '.1f')} TFLOPS/GPU"
    if ratio is not None:
        text += f"; recomputed / printed = {number(ratio, '.3f')}{TIMES}"
    explanation = _get(doc, "reported", "explanation")
    return text + (f" ({explanation})" if explanation else "") + "."


def _lost_seconds(doc: Mapping[str, Any]) -> float:
    """The goodput budget's lost lines: all but the productive steps and the iterations not
    in the log (unknown, not lost)."""
    kept = ("productive steady steps", "iterations not in the log")
    lines = _get(doc, "goodput", "lines") or ()
    return sum(_float(line.get("seconds")) or 0.0 for line in lines if line.get("name") not in kept)


# The report's key (a CSS class) of each line of the goodput budget.
BUDGET_KEYS = {
    "productive steady steps": "productive",
    "start-up": "startup",
    "warm-up": "warmup",
    "checkpoint saves": "checkpoint",
    "evaluation": "evaluation",
    "data loading": "data",
    "stragglers": "stragglers",
    "other slow steps": "slow",
    "restart gaps": "gaps",
    "redone work": "redone",
    "iterations not in the log": "unlogged",
    "untimed gaps": "stalls",
    "hang before the ending": "hang",
}


def time_budget(doc: Mapping[str, Any]) -> tuple[BudgetPart, ...]:
    """The wall clock split by cause: the lines of the document's goodput budget (which sum
    to its wall clock), each with its share of the wall clock as the budget gives it (a hang
    whose start is not printed: at least its line)."""
    lines = [
        (str(line.get("name")), _float(line.get("seconds")), _float(line.get("share")))
        for line in _get(doc, "goodput", "lines") or ()
    ]
    shown = [(name, s, share) for name, s, share in lines if s is not None and s > 0]
    total = sum(s for _, s, _ in shown)
    if total <= 0:
        return ()
    hang = _get(doc, "goodput", "hang") or {}
    at_least = {"hang before the ending"} if hang.get("bound") == "at_least" else set()
    return tuple(
        BudgetPart(
            BUDGET_KEYS.get(name, "other"),
            name,
            s,
            ("at least " if name in at_least else "") + duration(s),
            percent(share),
            round(100 * s / total, 3),
        )
        for name, s, share in shown
    )


def _identity(doc: Mapping[str, Any], run: Run | None) -> Identity:
    sources = doc.get("sources") or []
    paths = [PurePath(str(s.get("path", ""))) for s in sources]
    if len(paths) == 1:
        name = paths[0].name
    elif paths:
        name = PurePath(*_common_parts(paths)).name or paths[0].name
    else:
        name = "run"
    run_doc = doc.get("run") or {}
    gpu = run_doc.get("gpu") or {}
    model = run_doc.get("model") or {}
    shape = " ".join(
        f"{label}={model[key]}"
        for key, label in (("num_layers", "L"), ("hidden_size", "h"), ("num_attention_heads", "a"))
        if model.get(key) is not None
    )
    params = _float(model.get("params"))
    if params is None:
        model_text = "parameters unknown"
    elif params >= 1e9:
        model_text = f"{number(params / 1e9, '.3g')}B params"
    else:
        model_text = f"{number(params / 1e6, '.3g')}M params"
    model_text += f", {shape}" if shape else ""
    return Identity(
        name=name,
        framework=str(run_doc.get("framework") or UNKNOWN),
        gpus=f"{number(run_doc.get('num_gpus'), 'd')} {TIMES} {gpu.get('name') or 'unknown GPU'}",
        model=model_text,
        dates=_dates(run),
        sources=tuple(
            Row((str(s.get("path")), str(s.get("format")), f"{number(s.get('records'), ',d')}"))
            for s in sources
        ),
        ignored=tuple(
            Row((str(i.get("path")), str(i.get("reason")))) for i in doc.get("ignored") or ()
        ),
        read_along=tuple(
            Row((str(r.get("path")), str(r.get("how")))) for r in doc.get("read_along") or ()
        ),
        setup=_setup(doc, run),
    )


def _common_parts(paths: Sequence[PurePath]) -> list[str]:
    common = list(paths[0].parent.parts)
    for path in paths[1:]:
        parts = path.parent.parts
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    return common


def _dates(run: Run | None) -> str:
    if run is None or run.table.is_empty():
        return "dates unknown"
    stamps = run.table["timestamp"].drop_nulls()
    if stamps.is_empty():
        return "no timestamps in the log"
    ends = stamps.gather([stamps.arg_min(), stamps.arg_max()])  # type: ignore[list-item]
    first, last = ends.dt.strftime("%Y-%m-%d %H:%M").to_list()
    return f"{first} – {last} UTC"


def chart_facts(doc: Mapping[str, Any]) -> ChartFacts:
    """The document's figures the charts mark."""
    markers = []
    sustained = []
    for step in doc.get("slow_steps") or ():
        kind = str(step.get("kind"))
        took, ratio = _float(step.get("step_time_s")), _float(step.get("ratio"))
        if kind == "sustained":
            start, end = step.get("start_iteration"), step.get("end_iteration")
            if isinstance(start, int) and isinstance(end, int):
                sustained.append(
                    Span(start, end, f"sustained slowdown {number(ratio, '.2f')}{TIMES}")
                )
            continue
        if isinstance(step.get("iteration"), int) and took is not None:
            phase = f", {step['phase']}" if step.get("phase") else ""
            markers.append(
                Marker(
                    step["iteration"],
                    took,
                    kind,
                    f"{kind}: {number(took, '.4g', ' s')} = {number(ratio, '.2f')}{TIMES} "
                    f"baseline, {number(_float(step.get('lost_s')), '.3g', ' s')} lost{phase}",
                )
            )
    restarts = []
    boundaries = []
    for restart in doc.get("restarts") or ():
        resumed, after = restart.get("resumed_at"), restart.get("after_iteration")
        first = restart.get("first_iteration")
        if isinstance(first, int):
            boundaries.append(first)
        if isinstance(resumed, int) and isinstance(after, int) and after > resumed:
            restarts.append(Span(resumed, after, f"redone after restart: {resumed}–{after}"))
    peak = _float(_get(doc, "peak", "tflops_per_gpu"))
    return ChartFacts(
        pace_s=_float(_get(doc, "step_time_s", "median")),
        pace_legend=pace_legend(_get(doc, "step_time_s", "pace_method")),
        flops_per_iteration=_float(_get(doc, "flops", "per_iteration")),
        num_gpus=_get(doc, "run", "num_gpus"),
        peak_tflops=peak,
        reference=_reference_band(doc, peak),
        record_sources=frozenset(record_sources(doc)),
        markers=tuple(markers),
        warmup=_warmup_spans(doc),
        sustained=tuple(sustained),
        restarts=tuple(restarts),
        boundaries=tuple(boundaries),
        flagged=tuple(m.iteration for m in markers),
        incidents=_incident_spans(doc),
        ending=_ending_mark(doc),
    )


def _ending_mark(doc: Mapping[str, Any]) -> EndingMark | None:
    """Where the chart marks the ending: at its last iteration, unless the run completed
    (the end of its line says that) or has no iteration."""
    outcome = doc.get("outcome")
    if not outcome or outcome.get("status") == "completed":
        return None
    last = outcome.get("last_iteration")
    return EndingMark(last, chart_label(outcome)) if isinstance(last, int) else None


def _incident_spans(doc: Mapping[str, Any]) -> tuple[Span, ...]:
    """The iterations each incident covers, for the training curves to shade."""
    spans = []
    for incident in doc.get("incidents") or ():
        first, last = incident.get("first_iteration"), incident.get("last_iteration")
        if isinstance(first, int) and isinstance(last, int):
            label = f"{incident.get('kind')} {first}–{last}"
            spans.append(Span(first - 0.5, max(last, first) + 0.5, label))
    return tuple(spans)


def _warmup_spans(doc: Mapping[str, Any]) -> tuple[Span, ...]:
    """Each segment's warm-up: the iterations its warm-up records cover, up to the last."""
    spans = []
    for warm in doc.get("warmup") or ():
        end, iterations = warm.get("last_iteration"), warm.get("iterations")
        if warm.get("records") and isinstance(end, int) and isinstance(iterations, int):
            lost = duration(_float(warm.get("lost_s")) or 0.0)
            spans.append(Span(end - iterations, end, f"warm-up: {lost} lost"))
    return tuple(spans)


def _reference_band(doc: Mapping[str, Any], peak: float | None) -> Span | None:
    """The published band the verdict judges the MFU against (the document's `reference`),
    as TFLOPS/GPU at this run's peak; None without one, or when it is against another
    precision's peak (an FP8 run compared at bf16)."""
    found = doc.get("reference")
    if (
        not isinstance(found, Mapping)
        or peak is None
        or found.get("dtype") != _get(doc, "run", "dtype")
    ):
        return None
    low, high = _float(found.get("mfu_low")), _float(found.get("mfu_high"))
    if low is None or high is None:
        return None
    band = percent(low) if low == high else f"{percent(low)} to {percent(high)}"
    return Span(low * peak, high * peak, f"published runs of {found['scope']}: MFU {band}")


def _slow_rows(doc: Mapping[str, Any], run: Run | None) -> tuple[SlowRow, ...]:
    """The slow steps that lost the most time, at most SLOW_ROWS, with their log lines."""
    steps = sorted(
        doc.get("slow_steps") or (),
        key=lambda s: (-(_float(s.get("lost_s")) or 0.0), s.get("iteration") or 0),
    )[:SLOW_ROWS]
    where = _locations(run, [s.get("iteration") for s in steps])
    lines = read_lines(w for w in where.values() if w[0] not in record_sources(doc))
    planted = run_secrets(run) if run else planted_secrets()
    rows = []
    for step in steps:
        iteration = step.get("iteration")
        located = where.get(iteration) if isinstance(iteration, int) else None
        if step.get("kind") == "sustained":
            iterations = f"{step.get('start_iteration')}–{step.get('end_iteration')}"
        else:
            iterations = str(iteration)
        phase = step.get("phase")
        delta = _float(step.get("phase_delta_ms"))
        rows.append(
            SlowRow(
                iteration=iteration if isinstance(iteration, int) else 0,
                kind=f"{step.get('kind')} ({iterations})"
                if step.get("kind") == "sustained"
                else str(step.get("kind")),
                time=number(_float(step.get("step_time_s")), ".4g", " s"),
                ratio=f"{number(_float(step.get('ratio')), '.2f')}{TIMES}",
                lost=number(_float(step.get("lost_s")), ".3g", " s"),
                phase=f"{phase} (+{number(delta, '.4g', ' ms')})" if phase else "",
                location=location(doc, *located, iteration, "step_time_s") if located else "",
                line=mask_text(lines.get(located, ""), planted) if located else "",
            )
        )
    return tuple(rows)


def incident_rows(doc: Mapping[str, Any], run: Run | None) -> tuple[IncidentRow, ...]:
    """The document's incidents, at most SLOW_ROWS in its order, each with its log line
    (quoted when `run` is given: the line is read again from its file)."""
    incidents = [i for i in doc.get("incidents") or () if isinstance(i, Mapping)][:SLOW_ROWS]
    where: dict[int, tuple[str, int]] = {}
    for n, incident in enumerate(incidents):
        evidence = incident.get("evidence") or {}
        if isinstance(evidence.get("file"), str) and isinstance(evidence.get("line"), int):
            where[n] = (evidence["file"], evidence["line"])
    quoted = [w for w in where.values() if w[0] not in record_sources(doc)]
    lines = read_lines(quoted) if run is not None else {}
    planted = planted_secrets({n: v.value for n, v in run.config.items()} if run else None)
    rows = []
    for n, incident in enumerate(incidents):
        located = where.get(n)
        rows.append(
            IncidentRow(
                kind=str(incident.get("kind")),
                iterations=_span(incident.get("first_iteration"), incident.get("last_iteration")),
                size=_incident_size(incident),
                recovery=_recovery(incident),
                location=location(
                    doc,
                    *located,
                    incident.get("evidence", {}).get("iteration"),
                    str(incident.get("metric")),
                )
                if located
                else "",
                line=mask_text(lines.get(located, ""), planted) if located else "",
            )
        )
    return tuple(rows)


def _span(first: object, last: object) -> str:
    return str(first) if first == last else f"{first}–{last}"


def _incident_size(incident: Mapping[str, Any]) -> str:
    """What the incident amounted to: peak against baseline, or the iterations it hit."""
    kind, peak, base = (
        incident.get("kind"),
        _float(incident.get("peak")),
        _float(incident.get("baseline")),
    )
    counted = number(incident.get("iterations"), ",d")
    if kind in ("nan", "inf"):
        return f"{counted} iterations ({incident.get('metric')})"
    if kind == "loss_scale_collapse":
        return f"scale {number(base, ',g')} → {number(peak, ',g')}, {counted} skipped"
    what = "grad norm" if kind == "grad_norm_spike" else "loss"
    shown = number(_float(incident.get("ratio")), ".2f")
    return f"{what} {number(peak, '.4g')} against {number(base, '.4g')} ({shown}{TIMES})"


def _recovery(incident: Mapping[str, Any]) -> str:
    if incident.get("kind") not in ("loss_spike", "grad_norm_spike"):
        return ""
    back = incident.get("recovery_iterations")
    return f"{number(back, ',d')} iterations" if back is not None else "not back by the end"


def _locations(run: Run | None, iterations: Sequence[object]) -> dict[int, tuple[str, int]]:
    """Where each iteration's record was read (file, line); the first record of the
    iteration when a restart logged it twice."""
    wanted = [i for i in iterations if isinstance(i, int)]
    if run is None or not wanted:
        return {}
    import polars as pl

    found = (
        run.table.filter(pl.col("iteration").is_in(wanted) & pl.col("line").is_not_null())
        .group_by("iteration", maintain_order=True)
        .first()
    )
    return {
        row["iteration"]: (row["source"], row["line"])
        for row in found.select("iteration", "source", "line").iter_rows(named=True)
    }


def _restarts(doc: Mapping[str, Any]) -> tuple[Row, ...]:
    return tuple(
        Row(
            (
                str(r.get("after_iteration")),
                str(r.get("resumed_at")),
                _duration_or(_float(r.get("gap_s")), str(r.get("gap_note"))),
                f"{number(r.get('lost_iterations'), ',d')}",
                _duration_or(_float(r.get("redone_s")), UNKNOWN),
                duration(_float(r.get("lost_s")) or 0.0),
                launch_ending(r.get("previous_outcome")),
            )
        )
        for r in doc.get("restarts") or ()
    )


def _duration_or(seconds: float | None, missing: str) -> str:
    return missing if seconds is None else duration(seconds)


def _stalls(doc: Mapping[str, Any]) -> tuple[Row, ...]:
    return tuple(
        Row(
            (
                str(s.get("after_iteration")),
                str(s.get("iteration")),
                duration(_float(s.get("gap_s")) or 0.0),
                number(_float(s.get("expected_s")), ".4g", " s"),
            )
        )
        for s in doc.get("stalls") or ()
    )


def _facts(doc: Mapping[str, Any]) -> tuple[ConfigRow, ...]:
    """The facts the figures rest on, each with where it came from."""
    run_doc = doc.get("run") or {}
    provenance = run_doc.get("provenance") or {}
    values: dict[str, Any] = dict(run_doc.get("model") or {})
    values.update(
        {
            key: run_doc.get(key)
            for key in ("num_gpus", "dtype", "global_batch_size", "seq_length", "recompute")
        }
    )
    for name, value in (run_doc.get("parallelism") or {}).items():
        values[f"{name}_parallel"] = value
    gpu = run_doc.get("gpu") or {}
    values["gpu"] = gpu.get("name")
    aliases = {f"{n}_parallel": f"{n}_model_parallel_size" for n in ("tensor", "pipeline")}
    aliases.update(
        data_parallel="data_parallel_size",
        context_parallel="context_parallel_size",
        expert_parallel="expert_model_parallel_size",
        padded_vocab_size="padded_vocab_size",
    )
    if values.get("num_experts") is None:  # MoE defaults say nothing about a dense model
        values = {k: v for k, v in values.items() if not k.startswith("moe_")}
    return tuple(
        ConfigRow(
            key,
            number(value, ",d")
            if isinstance(value, int) and not isinstance(value, bool)
            else number(value),
            str(provenance.get(aliases.get(key, key), "default or derived")),
        )
        for key, value in values.items()
        if value is not None
    )


def _config(run: Run | None) -> tuple[ConfigRow, ...]:
    """Every config value the logs gave, with its provenance, sorted by name."""
    if run is None:
        return ()
    planted = run_secrets(run)
    return tuple(
        ConfigRow(
            clip(name), clip(number(mask_value(name, value.value, planted))), str(value.provenance)
        )
        for name, value in sorted(run.config.items())
    )


# What measures each line of the goodput budget: the first screen's "evidence" column. The
# lines that causes attribute (saves, evaluation, data loading, stragglers) add the kinds of
# their causes' evidence where the document gives them (`cause.evidence_kind`).
BUDGET_EVIDENCE = {
    "start-up": "time before the first record",
    "warm-up": "step times of the first records",
    "checkpoint saves": "save lines or the save interval",
    "evaluation": "validation lines or the evaluation interval",
    "data loading": "the data loader's timer",
    "stragglers": "per-rank timers",
    "other slow steps": "step times above the baseline",
    "restart gaps": "timestamps around each restart",
    "redone work": "iterations logged twice",
    "untimed gaps": "timestamps between records",
    "hang before the ending": "the ending's lines",
}
# The cause kinds behind a budget line, to collect their evidence kinds.
_BUDGET_CAUSES = {
    "checkpoint saves": ("checkpoint_save",),
    "evaluation": ("evaluation",),
    "data loading": ("data_loading",),
    "stragglers": ("straggler",),
    "other slow steps": ("phase", "overflow", "nan", "unknown"),
}


def time_lost(doc: Mapping[str, Any]) -> tuple[LostRow, ...]:
    """The budget's lost lines (all but the productive steps and the iterations not in the
    log), largest first, each with its GPU-hours: its seconds times the run's GPUs (the one
    figure computed here, from the document's own two)."""
    budget = {part.label: part for part in time_budget(doc)}
    gpus = _get(doc, "run", "num_gpus")
    kinds = _evidence_kinds(doc)
    rows = [
        LostRow(
            part.key,
            part.label,
            part.seconds,
            part.text,
            part.share,
            _gpu_hours(part.seconds * gpus / 3600) if isinstance(gpus, int) else UNKNOWN,
            "; ".join(kinds.get(name) or [BUDGET_EVIDENCE.get(name, "")]),
        )
        for name, part in budget.items()
        if name not in ("productive steady steps", "iterations not in the log")
    ]
    return tuple(sorted(rows, key=lambda r: -r.seconds))


def _gpu_hours(hours: float) -> str:
    """GPU-hours to three figures, without an exponent: "< 0.01" below a hundredth."""
    if 0 < hours < 0.01:
        return "< 0.01"
    return number(hours, ",.0f" if hours >= 100 else ".3g")


def _evidence_kinds(doc: Mapping[str, Any]) -> dict[str, list[str]]:
    """For each budget line, the evidence kinds its causes name (in first-seen order)."""
    found: dict[str, list[str]] = {}
    for cause in _all_causes(doc):
        kind = cause.get("evidence_kind")
        if not isinstance(kind, str):
            continue
        for line, causes in _BUDGET_CAUSES.items():
            if cause.get("kind") in causes and kind not in found.setdefault(line, []):
                found[line].append(kind)
    return found


def _all_causes(doc: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    entries = [*(doc.get("slow_steps") or ()), *(doc.get("stalls") or ())]
    causes = [e["cause"] for e in entries if isinstance(e.get("cause"), Mapping)]
    return causes + list(_get(doc, "goodput", "attributed") or ())


TOP_VERDICTS = 3


def top_verdicts(doc: Mapping[str, Any], verdicts: Sequence[VerdictRow]) -> tuple[VerdictRow, ...]:
    """The three verdicts that cost most, in the document's order (by severity, which the
    analysis derives from the time at stake, then by `lost_s`); the ending's verdict is left to
    the banner above."""
    shown = [v for v in verdicts if not (doc.get("outcome") and v.code.startswith("ENDING_"))]
    return tuple(shown[:TOP_VERDICTS])


def waterfall(doc: Mapping[str, Any]) -> Waterfall | None:
    """The document's MFU waterfall, printed as the terminal prints it (None without one)."""
    found = doc.get("waterfall")
    if not isinstance(found, Mapping) or not found.get("steps"):
        return None
    peak = doc.get("peak") or {}
    start = "peak"
    if _float(peak.get("tflops_per_gpu")) is not None:
        start = f"peak: {number(peak['tflops_per_gpu'], 'g')} TFLOPS/GPU {peak.get('dtype') or ''}"
    achieved = _float(found.get("achieved"))
    return Waterfall(
        start=start.strip(),
        start_value=percent(found["steps"][0].get("value_before")),
        steps=tuple(
            WaterfallStep(
                name=str(step.get("name")),
                factor=f"{TIMES} {number(_float(step.get('factor')), '.3f')}",
                before=percent(step.get("value_before")),
                after=percent(step.get("value_after")),
                value_before=_float(step.get("value_before")) or 0.0,
                value_after=_float(step.get("value_after")) or 0.0,
                formula=str(step.get("formula") or ""),
                inputs=_inputs(step.get("inputs") or {}, whole=True),
                short=_inputs(step.get("inputs") or {}, whole=False),
            )
            for step in found["steps"]
        ),
        achieved=percent(achieved),
        achieved_value=achieved or 0.0,
        achieved_label=str(found.get("achieved_label") or ""),
        notes=tuple(str(n) for n in found.get("notes") or ()),
    )


def waterfall_missing(doc: Mapping[str, Any]) -> str:
    """Why the document has no waterfall: its own notes, then the inputs it lacks."""
    reasons = [str(n) for n in _get(doc, "waterfall", "notes") or ()]
    if _get(doc, "flops", "per_iteration") is None:
        reasons.append("FLOPs per iteration unknown")
    if _float(_get(doc, "peak", "tflops_per_gpu")) is None:
        reasons.append("GPU peak unknown")
    return "; ".join(reasons) or "the document has no waterfall"


# Waterfall inputs that are fractions of a whole (shares of the step, MFU, HFU): printed as
# percents, as every fraction on the page is.
_FRACTION_INPUTS = frozenset({"w", "b", "c", "d"})


def _inputs(inputs: Mapping[str, Any], *, whole: bool) -> str:
    """`name=value` for each input; a table of inputs (timers) in full, or only its size."""
    parts = []
    for name, value in inputs.items():
        if isinstance(value, Mapping):
            if whole:
                inner = ", ".join(f"{k} {number(v, ',.4g')}" for k, v in value.items())
                parts.append(f"{name}: {inner}")
            else:
                parts.append(f"{name}: {plural(len(value), 'value')}")
        elif name in _FRACTION_INPUTS or name.endswith("share") or name.startswith(("mfu", "hfu")):
            parts.append(f"{name}={percent(value)}")
        else:
            parts.append(f"{name}={number(value, '.4g')}")
    return ", ".join(parts)


def cause_rows(doc: Mapping[str, Any], run: Run | None) -> tuple[CauseRow, ...]:
    """Every lost interval the document attributes: slow records, untimed gaps, restarts and
    the save/evaluation costs of records that were not slow; largest loss first. Rows of a
    record say where it was read when `run` is given."""
    found: list[tuple[object, str, str, Mapping[str, Any], float | None]] = []
    for step in doc.get("slow_steps") or ():
        first = step.get("first_iteration", step.get("start_iteration"))
        last = step.get("last_iteration", step.get("end_iteration", step.get("iteration")))
        what = f"slow step ({step.get('kind')})"
        found.append((step.get("iteration"), _span(first, last), what, step, step.get("lost_s")))
    for gap in doc.get("stalls") or ():
        span = _span(gap.get("after_iteration"), gap.get("iteration"))
        found.append((gap.get("iteration"), span, "untimed gap", gap, gap.get("gap_s")))
    for restart in doc.get("restarts") or ():
        span = f"{restart.get('after_iteration')} → {restart.get('resumed_at')}"
        found.append((None, span, "restart", restart, restart.get("lost_s")))
    for cost in _get(doc, "goodput", "attributed") or ():
        span = _span(cost.get("first_iteration"), cost.get("last_iteration"))
        found.append((None, span, "record", {"cause": cost}, cost.get("lost_s")))
    found.sort(key=lambda f: -(_float(f[4]) or 0.0))
    where = _locations(run, [f[0] for f in found[:SLOW_ROWS]])
    rows = []
    for iteration, span, what, item, lost in found:
        given = item.get("cause")
        cause: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        located = where.get(iteration) if isinstance(iteration, int) else None
        rows.append(
            CauseRow(
                iterations=span,
                entry=what,
                seconds=_float(lost) or 0.0,
                lost=duration(_float(lost) or 0.0),
                cause=str(cause.get("kind") or UNKNOWN).replace("_", " "),
                evidence=clip(str(cause.get("evidence") or "no cause in the document")),
                location=location(doc, *located, iteration, "step_time_s") if located else "",
            )
        )
    return tuple(rows)


def health_view(doc: Mapping[str, Any]) -> Health | None:
    """Run health as the terminal's section prints it (None for a document without it)."""
    health = doc.get("health")
    if not isinstance(health, Mapping):
        return None
    phases = tuple(
        Row(
            (
                str(p.get("name")),
                number(_float(p.get("median_ms")), ",.1f", " ms"),
                percent(p.get("share")),
            )
        )
        for p in (health.get("phases") or ())[:HEALTH_PHASES]
    )
    counts = []
    for key, label in (
        ("skipped", "skipped iterations"),
        ("nan", "NaN iterations"),
        ("loss_scale_drops", "loss-scale drops"),
    ):
        counted = health.get(key) or {}
        at = ", ".join(str(i) for i in counted.get("iterations") or ())
        counts.append(Row((label, number(counted.get("total"), ",d"), f"at {at}" if at else "")))
    memory = health.get("memory") or {}
    text = "no memory figure in the log"
    if memory.get("max_allocated_gb") is not None:
        text = f"max allocated {number(memory['max_allocated_gb'], '.1f', ' GB')}"
        if memory.get("rank") is not None:
            text += f" on rank {memory['rank']}"
        if memory.get("device_gb"):
            text += (
                f" of {number(memory['device_gb'], 'g', ' GB')}, headroom "
                f"{percent(memory.get('headroom'))}"
            )
    return Health(
        phases=phases,
        counts=tuple(counts),
        memory=text,
        tokens_per_gpu=number(_float(health.get("tokens_per_s_per_gpu")), ",.0f"),
    )


def _setup(doc: Mapping[str, Any], run: Run | None) -> tuple[str, ...]:
    """Parallelism, batch, sequence length and precision as the identity line prints them.
    The micro-batch size and ZeRO stage (1-3: `analysis.comparison.zero_stage`) are not in
    the document: they come from the run's config when the run is at hand."""
    run_doc = doc.get("run") or {}
    config = run.config if run is not None else {}

    def configured(name: str) -> object:
        value = config.get(name)
        return value.value if value is not None else run_doc.get(name)

    par = run_doc.get("parallelism") or {}
    labels = {"tensor": "TP", "pipeline": "PP", "data": "DP", "context": "CP", "expert": "EP"}
    parallel = [f"{labels.get(k, k)}={v}" for k, v in par.items() if v is not None]
    zero = zero_stage(config)  # stage 0 is no ZeRO
    if zero is not None:
        parallel.append(f"ZeRO-{zero}")
    parts = [" ".join(parallel) or f"parallelism {UNKNOWN}"]
    batch = f"global batch {number(run_doc.get('global_batch_size'), ',d')}"
    micro = configured("micro_batch_size")
    parts.append(batch + (f" (micro {number(micro, ',d')})" if micro is not None else ""))
    parts.append(f"sequence length {number(run_doc.get('seq_length'), ',d')}")
    dtype = number(run_doc.get("dtype")) + (" (assumed)" if run_doc.get("dtype_assumed") else "")
    parts.append(dtype)
    recompute = run_doc.get("recompute")
    if recompute is not None:
        assumed = " (assumed)" if run_doc.get("recompute_assumed") else ""
        parts.append(f"recompute {number(recompute)}{assumed}")
    return tuple(parts)
