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

from loganalyzer.analysis.incident_verdicts import CODES as INCIDENT_CODES
from loganalyzer.analysis.outcome import ENDING_SEVERITY
from loganalyzer.analysis.verdicts import _precision_class as precision_class
from loganalyzer.analysis.verdicts import hardware_family, reference_runs
from loganalyzer.model import Run
from loganalyzer.render.charts import build_charts
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
from loganalyzer.render.numbers import TIMES, UNKNOWN, duration, number, percent
from loganalyzer.render.viewmodel import (
    BudgetPart,
    Chart,
    ChartFacts,
    ConfigRow,
    Ending,
    EndingMark,
    Figure,
    Identity,
    IncidentRow,
    Marker,
    ReportView,
    Row,
    SlowRow,
    Span,
    VerdictRow,
)
from loganalyzer.secrets import mask_text, mask_value, planted_secrets, run_secrets

# Slow steps listed in the table; the rest are counted ("N more").
SLOW_ROWS = 50
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
    ("MFU_", "chart-tflops"),
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
    """A verdict whose chart the run's data do not allow links to the formula card (MFU) or
    the warnings instead of to nothing."""
    target = "formula" if verdict.target == "chart-tflops" else "warnings"
    return VerdictRow(verdict.severity, verdict.code, verdict.message, target)


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
    return tuple(sorted(rows, key=lambda r: SEVERITY_RANK.get(r.severity, 3)))


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
    tflops = _float(flops.get("tflops_per_gpu"))
    median = _float(_get(doc, "step_time_s", "median"))
    coarse = pace_note(_get(doc, "step_time_s", "pace_method"))
    tokens = _float(_get(doc, "throughput", "tokens_per_s"))
    logged = _float(_get(doc, "time", "logged_s"))
    wall = _float(_get(doc, "goodput", "wall_s"))
    lost = _lost_seconds(doc)
    peak = _float(_get(doc, "peak", "tflops_per_gpu"))
    unknown_mfu = "unknown: pass --gpu" if peak is None else "unknown (see warnings)"
    printed = _float(_get(doc, "reported", "tflops_per_gpu"))
    ratio = _float(_get(doc, "reported", "recomputed_over_reported"))
    band = _reference_band(_get(doc, "run", "gpu", "key"), _get(doc, "run", "dtype"), peak)
    return (
        Figure(
            "mfu",
            "MFU (steady)",
            percent(mfu) if mfu is not None else unknown_mfu,
            mfu,
            _severity("mfu", verdicts),
            f"overall {percent(flops.get('mfu_overall'))}" + (f"; {band.label}" if band else ""),
        ),
        Figure("hfu", "HFU", percent(hfu), hfu, None, "counts recomputation"),
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
        reference=_reference_band(_get(doc, "run", "gpu", "key"), _get(doc, "run", "dtype"), peak),
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


def _reference_band(hardware: object, dtype: object, peak: float | None) -> Span | None:
    """TFLOPS/GPU that published runs on the same chip family and precision reached (their
    MFU times this run's peak), whatever their size; None when there are none."""
    if not isinstance(hardware, str) or not isinstance(dtype, str) or peak is None:
        return None
    family = hardware_family(hardware)
    peers = [
        ref.mfu
        for ref in reference_runs()
        if hardware_family(ref.hardware) == family
        and precision_class(ref.dtype) == precision_class(dtype)
    ]
    if not peers:
        return None
    low, high = min(peers), max(peers)
    band = percent(low) if low == high else f"{low * 100:.1f}–{percent(high)}"
    label = f"published {dtype} runs on {str(family).upper()}: MFU {band}"
    return Span(low * peak, high * peak, label)


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
