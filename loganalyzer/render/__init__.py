"""Renderers: each turns the summary document into one output format.

Every renderer reads the same document (`loganalyzer.summary.build_summary`), so two formats
can never disagree about a figure; `numbers` is the one way a figure is printed.
"""
