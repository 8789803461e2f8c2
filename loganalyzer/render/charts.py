"""The report's charts as plotly figure specifications (plain data for plotly.js).

Series come from the run's per-iteration and metrics tables, downsampled by
`render.downsample.keep_shape` (flagged slow steps, segment boundaries and the first and last
record always kept); what the charts mark (pace, slow steps, restarts, peak) comes from the
summary document through `render.view.ChartFacts`. Hover text of every point names its
iteration, value and where it was read (`file:line`, or `file: record N` in a TensorBoard or
W&B store). Text from a log is HTML-escaped here,
because plotly.js reads a few tags in chart text.
"""

from __future__ import annotations

import html
from typing import Any

import polars as pl

from loganalyzer.analysis.medians import grouped_median
from loganalyzer.analysis.phases import logged_phases, parent_of, timer_means, timer_phases
from loganalyzer.model import Metrics, Run
from loganalyzer.render.downsample import keep_shape
from loganalyzer.render.numbers import TIMES
from loganalyzer.render.viewmodel import Chart, ChartFacts, Waterfall
from loganalyzer.spill import metric_names

ACCENT = "#1f5f99"
INK = "#344054"
MUTED = "#98a2b3"
SHADE = "rgba(152,162,179,0.22)"
# the report's colour for a critical verdict (report.css --critical): the ending's mark
ALERT = "#b42318"
WARMUP_SHADE = "rgba(132,173,207,0.22)"
# Incidents (loss spikes, NaN values, ...) on the training curves.
INCIDENT_SHADE = "rgba(217,45,32,0.18)"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"
MARKER_SYMBOLS = {"spike": "x", "periodic": "diamond"}
HISTOGRAM_BINS = 60
TIMER_BUCKETS = 400
TIMER_PHASES = 8  # the largest phases drawn apart; the rest are summed as "other"
MAX_RANK_METRICS = 4
# Timer phases and ranks: a categorical palette whose neighbours differ in hue and lightness
# (Tableau 10, the colour-blind-checked set plotting tools ship), so stacked phases stay apart.
CATEGORICAL = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
LOSS = "#d9826b"


def build_charts(run: Run, facts: ChartFacts) -> tuple[Chart, ...]:
    """Every chart the run's data allow, in the report's order."""
    table = _records(run.table, facts)
    charts = [
        _step_time(table, facts),
        _tflops(table, facts),
        _training_curves(table, facts),
        _distribution(table, facts),
        _timers(run.metrics),
        _ranks(run.metrics),
    ]
    return tuple(c for c in charts if c is not None)


def _records(table: pl.DataFrame, facts: ChartFacts) -> pl.DataFrame:
    """The records the charts draw, with each one's hover location and whether it must stay."""
    boundary = (pl.int_range(pl.len()) == 0).over("segment") | (
        pl.int_range(pl.len()) == pl.len() - 1
    ).over("segment")
    source, line = pl.col("source").map_batches(_escape_series), pl.col("line").cast(pl.String)
    location = (
        pl.when(pl.col("source").is_in(sorted(facts.record_sources)))
        .then(pl.concat_str(source, pl.lit(": record "), line))
        .otherwise(pl.concat_str(source, pl.lit(":"), line))
    )
    return table.select(
        "iteration",
        "segment",
        "step_time_s",
        "loss",
        "lr",
        "grad_norm",
        "reported_tflops_per_gpu",
        location.fill_null("").alias("where"),
        (pl.col("iteration").is_in(list(facts.flagged)) | boundary).alias("keep"),
    )


def _escape_series(series: pl.Series) -> pl.Series:
    escaped: pl.Series = series.replace_strict(
        {v: html.escape(v) for v in series.drop_nulls().unique().to_list()},
        default=None,
        return_dtype=pl.String,
    )
    return escaped


def base_layout(title_y: str, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "font": {"family": FONT, "size": 12, "color": INK},
        "margin": {"l": 64, "r": 16, "t": 40, "b": 44},
        "height": 320,
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "hovermode": "closest",
        "showlegend": True,
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "xanchor": "left", "yanchor": "bottom"},
        "xaxis": {"title": {"text": "iteration"}, "gridcolor": "#eaecf0", "zeroline": False},
        "yaxis": {"title": {"text": title_y}, "gridcolor": "#eaecf0", "zeroline": False},
    }
    layout.update(extra)
    return layout


def _series(
    frame: pl.DataFrame, value: str, name: str, unit: str, fmt: str, **style: Any
) -> list[dict[str, Any]]:
    """One line trace per segment (a restart goes back in iterations: never joined)."""
    traces = []
    drawn = frame.filter(pl.col(value).is_not_null() & pl.col(value).is_finite())
    segments = drawn["segment"].unique().sort().to_list()
    for n, segment in enumerate(segments):
        part = keep_shape(drawn.filter(pl.col("segment") == segment), value, pl.col("keep"))
        attempt = f" (attempt {n + 1})" if len(segments) > 1 else ""
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers" if part.height <= 400 else "lines",
                "name": name,
                "legendgroup": name,
                "showlegend": n == 0,
                "x": part["iteration"].to_list(),
                "y": part[value].to_list(),
                "customdata": part["where"].to_list(),
                "hovertemplate": f"iteration %{{x}}{attempt}<br>{name} %{{y:{fmt}}}{unit}"
                "<br>%{customdata}<extra></extra>",
                "line": {"width": 1.2, "color": ACCENT},
                "marker": {"size": 4, "color": ACCENT},
                **style,
            }
        )
    return traces


def _spans(facts: ChartFacts) -> list[dict[str, Any]]:
    shapes: list[dict[str, Any]] = []
    for span in facts.warmup:
        shapes.append(_band(span.start, span.end, WARMUP_SHADE))
    for span in facts.sustained:
        shapes.append(_band(span.start, span.end, SHADE))
    for span in facts.restarts:
        shapes.append(_band(span.start, span.end, "rgba(52,64,84,0.10)"))
    for boundary in facts.boundaries:
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": boundary,
                "x1": boundary,
                "y0": 0,
                "y1": 1,
                "line": {"color": INK, "width": 1, "dash": "dot"},
            }
        )
    return shapes


def _vline(x: float, colour: str, dash: str) -> dict[str, Any]:
    return {
        "type": "line",
        "xref": "x",
        "yref": "paper",
        "x0": x,
        "x1": x,
        "y0": 0,
        "y1": 1,
        "line": {"color": colour, "width": 1.5, "dash": dash},
    }


def _vlabel(x: float, text: str) -> dict[str, Any]:
    """A label at the top of a vertical line (plotly escapes nothing: the text is escaped)."""
    return {
        "x": x,
        "xref": "x",
        "y": 1,
        "yref": "paper",
        "text": html.escape(text),
        "showarrow": False,
        "xanchor": "right",
        "yanchor": "bottom",
        "font": {"size": 11, "color": ALERT},
    }


def _band(start: float, end: float, colour: str) -> dict[str, Any]:
    return {
        "type": "rect",
        "xref": "x",
        "yref": "paper",
        "x0": start,
        "x1": end,
        "y0": 0,
        "y1": 1,
        "fillcolor": colour,
        "line": {"width": 0},
        "layer": "below",
    }


def _hline(y: float, name: str, dash: str = "dash") -> dict[str, Any]:
    return {
        "type": "line",
        "xref": "paper",
        "yref": "y",
        "x0": 0,
        "x1": 1,
        "y0": y,
        "y1": y,
        "line": {"color": MUTED, "width": 1.5, "dash": dash},
        "name": name,
    }


def _step_time(table: pl.DataFrame, facts: ChartFacts) -> Chart | None:
    if table["step_time_s"].drop_nulls().is_empty():
        return None
    traces = _series(table, "step_time_s", "step time", " s", ".4g")
    by_kind: dict[str, list[Any]] = {}
    for marker in facts.markers:
        by_kind.setdefault(marker.kind, []).append(marker)
    # Only the marked records' locations (a later copy of an iteration, after a restart, wins).
    marked = table.filter(pl.col("iteration").is_in([m.iteration for m in facts.markers]))
    where = dict(zip(marked["iteration"].to_list(), marked["where"].to_list(), strict=True))
    for kind, markers in sorted(by_kind.items()):
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"slow: {kind}",
                "x": [m.iteration for m in markers],
                "y": [m.step_time_s for m in markers],
                "customdata": [
                    f"{html.escape(m.hover)}<br>{where.get(m.iteration, '')}" for m in markers
                ],
                "hovertemplate": "iteration %{x}<br>%{customdata}<extra></extra>",
                "marker": {
                    "symbol": MARKER_SYMBOLS.get(kind, "circle-open"),
                    "size": 7,
                    "opacity": 0.85,
                    "color": INK,
                    "line": {"width": 1.5, "color": INK},
                },
            }
        )
    shapes = _spans(facts)
    if facts.pace_s is not None:
        shapes.append(_hline(facts.pace_s, "steady pace"))
        traces.append(legend_line(facts.pace_legend, MUTED, "dash"))
    if facts.warmup:
        traces.append(_legend_box("warm-up", WARMUP_SHADE))
    if facts.sustained:
        traces.append(_legend_box("sustained slowdown", SHADE))
    if facts.boundaries:
        traces.append(legend_line("restart", INK, "dot"))
    annotations = []
    if facts.ending is not None:
        shapes.append(_vline(facts.ending.iteration, ALERT, "dashdot"))
        annotations.append(_vlabel(facts.ending.iteration, facts.ending.label))
        traces.append(legend_line(f"ending: {facts.ending.label}", ALERT, "dashdot"))
    slowest = table["step_time_s"].max()
    log = (
        facts.pace_s is not None
        and facts.pace_s > 0
        and isinstance(slowest, (int, float))
        and slowest / facts.pace_s >= LOG_SPREAD
    )
    layout = base_layout("seconds per iteration", shapes=shapes, updatemenus=[scale_toggle(log)])
    layout["margin"] = {**layout["margin"], "b": 64}
    if log:
        layout["yaxis"].update(type="log", tickformat=LOG_TICKS)
    if annotations:
        layout["annotations"] = annotations
    return Chart(
        "chart-step-time",
        "Step time over iterations",
        "Each point is a logged record (its average over the iterations it covers). The "
        "dashed line is the steady pace; marked points are the slow steps the tables list; "
        "dotted lines are restarts; shaded ranges are warm-up, redone work and sustained "
        "slowdowns. The buttons under it switch the time axis between linear and log; it "
        f"opens on log when the slowest record is {LOG_SPREAD:g}{TIMES} the steady pace or "
        "more, so that the spike does not flatten the baseline."
        + (
            " The red dash-dotted line marks how the run ended, at its last iteration."
            if facts.ending is not None
            else ""
        ),
        {"data": traces, "layout": layout},
    )


# The step-time chart opens on a log axis when its slowest record is this many times the
# steady pace: on a linear one such a spike flattens the baseline to a line. Either way the
# buttons under it (plotly's own updatemenus, no script of the page's) switch the axis.
LOG_SPREAD = 10.0
LOG_TICKS = ".3~g"  # every log tick with its magnitude ("20", not a bare "2")


def scale_toggle(log: bool) -> dict[str, Any]:
    """Buttons under the step-time chart that switch its time axis between linear and log,
    the one in use shown active."""
    return {
        "type": "buttons",
        "direction": "right",
        "showactive": True,
        "active": 1 if log else 0,
        "x": 1,
        "xanchor": "right",
        "y": 0,
        "yanchor": "top",
        "pad": {"t": 26},
        "font": {"size": 11},
        "buttons": [
            {
                "label": "linear time axis",
                "method": "relayout",
                "args": [{"yaxis.type": "linear", "yaxis.tickformat": ""}],
            },
            {
                "label": "log time axis",
                "method": "relayout",
                "args": [{"yaxis.type": "log", "yaxis.tickformat": LOG_TICKS}],
            },
        ],
    }


def waterfall_chart(falls: Waterfall) -> Chart:
    """The MFU waterfall as horizontal bars: the peak, each factor's loss as a bar from the
    MFU after it to the MFU before it, then what was achieved. Each row is labelled with its
    factor, formula and inputs; the figures are the document's, as `render.view` printed them."""
    labels = [falls.start_value]
    rows = [f"<b>{html.escape(falls.start)}</b>"]
    kept, lost, hover = [1.0], [0.0], [html.escape(f"{falls.start}: {falls.start_value}")]
    for step in falls.steps:
        detail = html.escape(step.formula) + (
            f"<br>{html.escape(step.short)}" if step.short else ""
        )
        rows.append(f"<b>{html.escape(step.name)}</b> {html.escape(step.factor)}<br>{detail}")
        kept.append(step.value_after)
        lost.append(max(step.value_before - step.value_after, 0.0))
        hover.append(
            html.escape(f"{step.name} {step.factor}: {step.before} → {step.after}")
            + f"<br>{html.escape(step.formula)}"
            + (f"<br>{html.escape(step.inputs)}" if step.inputs else "")
        )
        labels.append(f"{step.before} → {step.after}")
    rows.append(f"<b>achieved</b><br>{html.escape(falls.achieved_label)}")
    kept.append(falls.achieved_value)
    lost.append(0.0)
    hover.append(html.escape(f"achieved: {falls.achieved}, {falls.achieved_label}"))
    labels.append(falls.achieved)
    traces = [
        {
            "type": "bar",
            "orientation": "h",
            "name": "MFU left",
            "y": rows,
            "x": kept,
            "marker": {"color": ACCENT},
            "customdata": hover,
            "hovertemplate": "%{customdata}<extra></extra>",
        },
        {
            "type": "bar",
            "orientation": "h",
            "name": "lost to the factor",
            "y": rows,
            "x": lost,
            "base": kept,
            "marker": {"color": LOSS},
            "text": [html.escape(t) for t in labels],
            "textposition": "outside",
            "cliponaxis": False,
            "customdata": hover,
            "hovertemplate": "%{customdata}<extra></extra>",
        },
    ]
    layout = base_layout("", barmode="overlay", bargap=0.35, height=90 + 58 * len(rows))
    layout["xaxis"] = {
        "title": {"text": "MFU (share of the peak)"},
        "tickformat": ".0%",
        "tickvals": [0, 0.2, 0.4, 0.6, 0.8, 1.0],
        "range": [0, 1.3],
        "gridcolor": "#eaecf0",
        "zeroline": False,
    }
    layout["yaxis"] = {"autorange": "reversed", "automargin": True, "tickfont": {"size": 11}}
    layout["margin"] = {"l": 16, "r": 16, "t": 40, "b": 44}
    return Chart(
        "chart-waterfall",
        "MFU waterfall",
        "From the peak, each factor multiplies what is left; the blue bar is the MFU after "
        "it, the orange bar what it cost. Each row gives the factor, its formula and the "
        "inputs plugged in; the table below has every input.",
        {"data": traces, "layout": layout},
    )


def legend_line(name: str, colour: str, dash: str) -> dict[str, Any]:
    """A legend entry for a shape (plotly does not list shapes in the legend)."""
    return {
        "type": "scatter",
        "mode": "lines",
        "name": name,
        "x": [None],
        "y": [None],
        "line": {"color": colour, "dash": dash, "width": 1.5},
        "hoverinfo": "skip",
    }


def _legend_box(name: str, colour: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "markers",
        "name": name,
        "x": [None],
        "y": [None],
        "marker": {"symbol": "square", "size": 12, "color": colour},
        "hoverinfo": "skip",
    }


def _tflops(table: pl.DataFrame, facts: ChartFacts) -> Chart | None:
    """Recomputed TFLOPS/GPU per record (the document's FLOPs per iteration over each step
    time), the framework's own figure where it printed one, and the peak."""
    flops, gpus = facts.flops_per_iteration, facts.num_gpus
    frame = table
    traces: list[dict[str, Any]] = []
    if flops and gpus:
        frame = frame.with_columns(
            (flops / pl.col("step_time_s") / gpus / 1e12).alias("tflops"),
        )
        traces += _series(frame, "tflops", "recomputed TFLOPS/GPU", "", ".1f")
    if _filled(frame, "reported_tflops_per_gpu"):
        traces += _series(
            frame,
            "reported_tflops_per_gpu",
            "framework's TFLOPS/GPU",
            "",
            ".1f",
            line={"width": 1, "color": MUTED},
            marker={"size": 3, "color": MUTED},
        )
    if not traces:
        return None
    shapes = _spans(facts)
    layout = base_layout("TFLOPS/GPU", shapes=shapes)
    if facts.peak_tflops is not None:
        shapes.append(_hline(facts.peak_tflops, "peak", "solid"))
        traces.append(legend_line(f"peak {facts.peak_tflops:g} TFLOPS/GPU", MUTED, "solid"))
        layout["yaxis"]["range"] = [0, facts.peak_tflops * 1.08]
    if facts.reference is not None:
        band = facts.reference
        shapes.append(
            {
                "type": "rect",
                "xref": "paper",
                "yref": "y",
                "x0": 0,
                "x1": 1,
                "y0": band.start,
                "y1": band.end,
                "fillcolor": "rgba(31,95,153,0.10)",
                # one published figure is a line, not an invisible band
                "line": {
                    "width": 1.5 if band.start == band.end else 0,
                    "color": ACCENT,
                    "dash": "dot",
                },
                "layer": "below",
            }
        )
        traces.append(_legend_box(html.escape(band.label), "rgba(31,95,153,0.18)"))
    return Chart(
        "chart-tflops",
        "TFLOPS per GPU over iterations",
        "Recomputed with the formula card's FLOPs per iteration divided by each record's step "
        "time and the GPU count; the solid line is the dense peak (MFU is the ratio of the two), "
        "the band what published runs on the same hardware and precision reached.",
        {"data": traces, "layout": layout},
    )


def _training_curves(table: pl.DataFrame, facts: ChartFacts) -> Chart | None:
    """Loss, learning rate and grad norm stacked on one shared iteration axis: zooming one
    zooms all."""
    present = [
        (column, label)
        for column, label in (("loss", "loss"), ("lr", "learning rate"), ("grad_norm", "grad norm"))
        if _filled(table, column)
    ]
    if not present:
        return None
    traces = []
    layout = base_layout("", height=150 + 130 * len(present), showlegend=False)
    layout.pop("yaxis")
    gap = 0.06
    size = (1 - gap * (len(present) - 1)) / len(present)
    for n, (column, label) in enumerate(present):
        axis = "y" if n == 0 else f"y{n + 1}"
        for trace in _series(table, column, label, "", ".4g"):
            trace["yaxis"] = axis
            traces.append(trace)
        top = 1 - n * (size + gap)
        layout["yaxis" if n == 0 else f"yaxis{n + 1}"] = {
            "domain": [max(0.0, top - size), top],
            "title": {"text": label},
            "gridcolor": "#eaecf0",
            "zeroline": False,
            "exponentformat": "e" if column == "lr" else "none",
        }
    layout["xaxis"]["anchor"] = f"y{len(present)}" if len(present) > 1 else "y"
    layout["shapes"] = _spans(facts) + [
        _band(span.start, span.end, INCIDENT_SHADE) for span in facts.incidents
    ]
    marked = " Red bands are the incidents listed below." if facts.incidents else ""
    return Chart(
        "chart-training",
        "Loss, learning rate and grad norm",
        "One iteration axis for all three: zoom or pan one and the others follow." + marked,
        {"data": traces, "layout": layout},
    )


def _distribution(table: pl.DataFrame, facts: ChartFacts) -> Chart | None:
    steps = table["step_time_s"].drop_nulls()
    steps = steps.filter(steps.is_finite())
    if steps.len() < 2:
        return None
    low, high = float(steps.min()), float(steps.max())
    width = (high - low) / HISTOGRAM_BINS or 1.0
    counts = (
        pl.DataFrame({"s": steps})
        .select(((pl.col("s") - low) / width).floor().clip(0, HISTOGRAM_BINS - 1).alias("bin"))
        .group_by("bin")
        .len()
        .sort("bin")
    )
    centres = [low + (b + 0.5) * width for b in counts["bin"].to_list()]
    traces: list[dict[str, Any]] = [
        {
            "type": "bar",
            "name": "records",
            "x": centres,
            "y": counts["len"].to_list(),
            "width": width,
            "marker": {"color": ACCENT},
            "hovertemplate": "%{x:.4g} s<br>%{y} records<extra></extra>",
        }
    ]
    shapes = []
    if facts.pace_s is not None:
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": facts.pace_s,
                "x1": facts.pace_s,
                "y0": 0,
                "y1": 1,
                "line": {"color": INK, "width": 1.5, "dash": "dash"},
            }
        )
        traces.append(legend_line(facts.pace_legend, INK, "dash"))
    layout = base_layout("records (log scale)", shapes=shapes, bargap=0)
    layout["xaxis"]["title"]["text"] = "seconds per iteration"
    layout["yaxis"]["type"] = "log"
    layout["yaxis"]["dtick"] = 1  # a tick at each power of ten only
    layout["xaxis"]["range"] = [low - width, high + width]
    return Chart(
        "chart-distribution",
        "Step-time distribution",
        f"All timed records in {HISTOGRAM_BINS} equal bins; the count axis is logarithmic so "
        "that rare slow steps show.",
        {"data": traces, "layout": layout},
    )


def _timers(metrics: Metrics) -> Chart | None:
    """Timer phases per record, stacked (the max across ranks where both are logged)."""
    phase_of = timer_phases(metric_names(metrics))
    logged = logged_phases(metrics, phase_of)
    if not logged:
        return None
    enclosing = {parent_of(phase, logged) for phase in logged} - {None}
    drawn = logged - enclosing or logged  # stacked, never nested
    # averaged per bucket of records: a stack has no min/max
    timers = timer_means(
        metrics, {name: phase for name, phase in phase_of.items() if phase in drawn}, TIMER_BUCKETS
    )
    ranked = (
        timers.group_by("phase")
        .agg(pl.col("value").sort().sum())
        .sort(["value", "phase"], descending=[True, False])
    )["phase"].to_list()
    if len(ranked) > TIMER_PHASES:
        other = pl.when(pl.col("phase").is_in(ranked[: TIMER_PHASES - 1]))
        timers = (
            timers.with_columns(other.then(pl.col("phase")).otherwise(pl.lit("other")))
            .group_by("iteration", "phase")
            .agg(pl.col("value").sort().sum())
        )
        ranked = [*ranked[: TIMER_PHASES - 1], "other"]
    phases = ranked
    traces = []
    for phase in phases:
        part = timers.filter(pl.col("phase") == phase).sort("iteration")
        traces.append(
            {
                "type": "bar",
                "name": html.escape(phase),
                "x": part["iteration"].to_list(),
                "y": part["value"].to_list(),
                "hovertemplate": f"iteration %{{x}}<br>{html.escape(phase)} %{{y:.4g}} ms"
                "<extra></extra>",
            }
        )
    layout = base_layout("ms", barmode="stack", bargap=0.1, colorway=list(CATEGORICAL))
    layout["legend"]["traceorder"] = "normal"  # largest first, as stacked from the axis up
    return Chart(
        "chart-timers",
        "Timer phases per record",
        "The log's timers, stacked (largest first); where timers are logged across ranks, "
        "the slowest rank's figure.",
        {"data": traces, "layout": layout},
    )


def _ranks(metrics: Metrics) -> Chart | None:
    """Each rank's median of every per-rank metric, as a ratio to the median rank."""
    per_rank = grouped_median(
        metrics.lazy().filter(pl.col("rank").is_not_null()), ["name", "rank"]
    ).with_columns(pl.col("name").cast(pl.String))
    if per_rank.is_empty():
        return None
    spread = (
        per_rank.group_by("name")
        .agg((pl.col("value").max() / pl.col("value").median()).alias("spread"), pl.len())
        .filter(pl.col("len") >= 2)
        .sort(["spread", "name"], descending=[True, False])
        .head(MAX_RANK_METRICS)
    )
    if spread.is_empty():
        return None
    traces = []
    for name in spread["name"].to_list():
        part = (
            per_rank.filter(pl.col("name") == name)
            .with_columns((pl.col("value") / pl.col("value").median()).alias("ratio"))
            .sort("rank")
        )
        label = html.escape(name)
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": label,
                "x": part["rank"].to_list(),
                "y": part["ratio"].to_list(),
                "customdata": part["value"].to_list(),
                "hovertemplate": f"rank %{{x}}<br>{label} %{{customdata:.4g}}"
                " (%{y:.2f}× median rank)<extra></extra>",
            }
        )
    layout = base_layout(
        "× median rank", colorway=list(CATEGORICAL), shapes=[_hline(1.0, "median", "solid")]
    )
    layout["xaxis"]["title"]["text"] = "rank"
    return Chart(
        "chart-ranks",
        "Per-rank spread",
        "Each rank's median over iterations, divided by the median rank's, for the per-rank "
        f"metrics that spread the most (up to {MAX_RANK_METRICS}).",
        {"data": traces, "layout": layout},
    )


def _filled(table: pl.DataFrame, column: str) -> bool:
    """Whether any record has a value in `column`, read through an expression: `table[name]`
    would write a literal out in the table for as long as it lives (`model.compact_table`)."""
    return bool(table.select(pl.col(column).is_not_null().any()).item())
