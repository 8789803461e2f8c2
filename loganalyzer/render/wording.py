"""The sentences the outputs say about a run, written in one place from the analysis' facts.

The analysis computes numbers, kinds and iterations and stops there; this module words them,
so that the document builder and every renderer say the same thing the same way, and the
analysis stands below the renderers (tests/test_import_direction.py holds the direction).
"""

from __future__ import annotations

from loganalyzer.analysis.accounting import TimeAccounting
from loganalyzer.analysis.goodput import HANG, PRODUCTIVE, UNLOGGED, BudgetLine, Goodput, Held
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


def hang_note(held: Held) -> str | None:
    """Why the hang before the ending has no line (the document's `goodput.hang.note`); None
    when its time is known."""
    if held.seconds is not None:
        return None
    where = f"iteration {held.last_iteration:,}"
    if held.ending_at is None:
        return (
            f"time from the last progress ({where}) to the ending unknown: no time printed "
            "after the last progress"
        )
    return (
        f"time from the last progress ({where}) to the ending ({held.ending_at}) unknown: the "
        "iteration lines carry no time and nothing after them has one"
    )


def goodput_summary(goodput: Goodput) -> str:
    """The goodput and its three largest losses, in one sentence (the document's
    `goodput.summary`), with why the hang has no line when it has none."""
    covered = goodput.covered_s
    if covered <= 0:
        return "No wall-clock time was logged."
    held = goodput.hang
    bound = held.bound if held else None
    badput = sorted(
        (
            line
            for line in goodput.lines
            if line.name not in (PRODUCTIVE, UNLOGGED) and line.seconds > 0
        ),
        key=lambda line: -line.seconds,
    )
    listed = ", ".join(
        f"{line.name} {_bounded(line, bound)}{duration(line.seconds)} ({percent(line.share)})"
        for line in badput[:3]
    )
    text = f"Goodput {percent(goodput.goodput)} of the {duration(covered)} the log covers"
    text += f"; largest losses: {listed}." if listed else "; no time lost."
    note = hang_note(held) if held else None
    return text + (f" The {HANG}: {note}." if note else "")


def _bounded(line: BudgetLine, bound: str | None) -> str:
    return "at least " if line.name == HANG and bound == "at_least" else ""
