"""The sentences the outputs say about a run, written in one place from the analysis' facts.

The analysis computes numbers, kinds and iterations and stops there; this module words them,
so that the document builder and every renderer say the same thing the same way, and the
analysis stands below the renderers (tests/test_import_direction.py holds the direction).
"""

from __future__ import annotations

from loganalyzer.analysis.accounting import TimeAccounting
from loganalyzer.render.numbers import duration, percent


def time_summary(time: TimeAccounting) -> str:
    """Where the logged time went, in one sentence (the document's `time.summary`)."""
    if time.logged_s <= 0:
        return "No timed records were logged."
    share = time.productive_s / time.logged_s
    sentence = (
        f"Of {duration(time.logged_s)} logged, {duration(time.productive_s)} ({percent(share)}) "
        f"ran at the steady pace; {duration(time.slow_steps_s)} went to slow steps, "
        f"{duration(time.warmup_s)} to warm-up and {duration(time.redone_s)} to redone work"
    )
    outside = time.restart_gaps_s + time.stalls_s
    if outside > 0:
        sentence += f", and restarts and stalls added {duration(outside)} of wall-clock time"
    return sentence + "."
