"""The fleet page: one self-contained HTML file (inline CSS and a few lines of script to sort
tables, nothing fetched), escaped by jinja2's autoescape, laid out by templates/fleet.html.j2
from the view model `loganalyzer.render.fleet_view` computes."""

from __future__ import annotations

from importlib.resources import files

from jinja2 import Environment, select_autoescape

from loganalyzer import __version__
from loganalyzer.render.fleet_view import FleetView

TEMPLATE = "fleet.html.j2"


def render_fleet_html(view: FleetView, dataset: str) -> str:
    """The page for `view`, of the dataset at `dataset`."""
    environment = Environment(
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=False,
        keep_trailing_newline=True,
    )
    source = files("loganalyzer.templates").joinpath(TEMPLATE).read_text(encoding="utf-8")
    template = environment.from_string(source)
    return template.render(view=view, dataset=dataset, version=__version__)
