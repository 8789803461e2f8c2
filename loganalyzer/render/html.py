"""The HTML report: one self-contained file from the view model and jinja2 templates.

Autoescaping is on for every template, so text from a log lands as text. The chart data go
in one `<script type="application/json">` block whose `<`, `>`, `&` and line separators are
written as JSON escapes, so no string can close the block; the page's own script and
plotly.js (the copy the `plotly` package ships, read at render time, never kept in this
repository) are inlined, so opening the file fetches nothing. Output is byte-stable: no
random ids, and the time of generation only when given.
"""

from __future__ import annotations

import dataclasses
import json
from functools import cache
from importlib.resources import files
from typing import TYPE_CHECKING, Any

import jinja2
from markupsafe import Markup

from loganalyzer.render.view import build_view
from loganalyzer.render.viewmodel import Chart, ReportView

if TYPE_CHECKING:
    from loganalyzer.render.compare import CompareView

_JSON_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def script_json(value: Any) -> Markup:
    """JSON that is safe inside a <script> element: nothing in it can end the element."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return Markup(text.translate(_JSON_ESCAPES))


def _template_source(name: str) -> str:
    return files("loganalyzer.templates").joinpath(name).read_text(encoding="utf-8")


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(_template_source),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


def _asset(name: str) -> Markup:
    """A file of the templates package, inlined as is (not parsed as a template)."""
    return Markup(_template_source(name))


def plotly_js() -> Markup:
    """plotly.js as the `plotly` package ships it, for inlining."""
    text = files("plotly").joinpath("package_data/plotly.min.js").read_text(encoding="utf-8")
    if "</script" in text.lower():  # would end the inline element early
        raise RuntimeError("this plotly.min.js cannot be inlined: it contains '</script'")
    return Markup(text)


def render_html(view: ReportView) -> str:
    """The report page."""
    drawn = (view.waterfall_chart,) if view.waterfall_chart is not None else ()
    return _render("report.html.j2", view, (*drawn, *view.charts))


def render_compare_html(view: CompareView) -> str:
    """The comparison page."""
    return _render("compare.html.j2", view, view.charts)


def _render(template: str, view: object, drawn: tuple[Chart, ...]) -> str:
    charts = {chart.id: chart.figure for chart in drawn}
    page = _environment().get_template(template)
    return page.render(
        view=view,
        chart_data=script_json(charts),
        styles=_asset("report.css"),
        page_script=_asset("report.js"),
        plotly=plotly_js() if charts else Markup(""),
    )


def view_json(view: ReportView) -> str:
    """The view model as JSON, keys sorted: what the golden tests pin."""
    return json.dumps(dataclasses.asdict(view), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def render_document_html(document: dict[str, Any]) -> str:
    """The report page of a summary document alone (no run tables: no charts)."""
    return render_html(build_view(document, charts=False))
