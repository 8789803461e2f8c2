"""Renderers: each turns the summary document into one output format.

Every renderer reads the same document (`loganalyzer.summary.build_summary`), so two formats
can never disagree about a figure; `numbers` is the one way a figure is printed. `RENDERERS`
names each format's function (`module:function`, taking the document and returning the
text), so that every format is checked alike (tests/test_output_formats.py).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

RENDERERS = {
    "text": "loganalyzer.render.text:render_summary",
    "markdown": "loganalyzer.render.markdown:render_document_markdown",
    "html": "loganalyzer.render.html:render_document_html",
}


def renderer(name: str) -> Callable[[dict[str, Any]], str]:
    """The function that renders a summary document as format `name`."""
    module, function = RENDERERS[name].split(":")
    found: Callable[[dict[str, Any]], str] = getattr(import_module(module), function)
    return found
