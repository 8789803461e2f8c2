"""Jinja2 templates of the HTML report (read with importlib.resources)."""
