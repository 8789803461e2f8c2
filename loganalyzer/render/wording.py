"""The sentences the outputs say about a run, written in one place from the analysis' facts.

The analysis computes numbers, kinds and iterations and stops there; this module words them,
so that the document builder and every renderer say the same thing the same way, and the
analysis stands below the renderers (tests/test_import_direction.py holds the direction).
"""

from __future__ import annotations

from loganalyzer.analysis.accounting import TimeAccounting
from loganalyzer.analysis.steady import WARMUP_FACTOR, Warmup
from loganalyzer.render.numbers import duration, percent, plural, ratio


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


def warmup_reason(warmup: Warmup) -> str:
    """Why a segment's warm-up was excluded (the document's `warmup[].reason`)."""
    if warmup.fixed is not None:
        return (
            f"--warmup {warmup.fixed}: the first {warmup.fixed} iterations of each segment "
            "are excluded"
        )
    if warmup.records == 0:
        return f"no leading record above {ratio(WARMUP_FACTOR)} the pace"
    return (
        f"the first {plural(warmup.records, 'record')} ran above {ratio(WARMUP_FACTOR)} the pace "
        f"(up to {ratio(warmup.peak_ratio)}): compilation and start-up"
    )
