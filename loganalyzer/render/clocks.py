"""How the coarse clocks a run's step times were read from are stated (`analysis.clocks`)."""

from __future__ import annotations

from collections.abc import Sequence

from loganalyzer.analysis.clocks import SourceClock
from loganalyzer.render.numbers import number


def clock_notes(clocks: Sequence[SourceClock]) -> list[str]:
    """The assumption behind each inferred clock (a stated one is the source's own fact)."""
    return [
        f"assumption: {clock.source} times its records with a clock of "
        f"{number(clock.resolution_s, '.3g', ' s')} resolution (every record's time over its "
        "interval is a whole number of seconds, consecutive records often one apart): no "
        "record is counted slow by an excess the clock cannot resolve (its resolution over the "
        "record's interval), and the steady pace is the total time over the iterations"
        for clock in clocks
        if clock.inferred
    ]


def pace_note(method: object) -> str | None:
    """How a steady pace not taken as a median of records was taken (None for a median)."""
    if method == "cumulative_clock":
        return "total time over iterations of a cumulative clock"
    return None


def pace_legend(method: object) -> str:
    """The charts' name for the steady-pace line: how it was taken, in a few words."""
    return "steady pace (median)" if pace_note(method) is None else "steady pace (cumulative clock)"


def pace_label(method: object) -> str:
    """What the steady step time is: a median of records, or a cumulative clock's pace."""
    note = pace_note(method)
    return "steady median" if note is None else f"steady pace ({note})"
