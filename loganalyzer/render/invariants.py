"""The summary's `invariants` object in words, for its warnings: the sources whose clock was
set aside and why, and any figure that cannot be true."""

from __future__ import annotations

from typing import Any

from loganalyzer.render.numbers import duration


def invariant_warnings(invariants: dict[str, Any]) -> list[str]:
    """One warning per fact of `invariants` (see `loganalyzer.analysis.invariants`)."""
    said = [_fallback(f) for f in invariants["clock_fallbacks"]]
    said += [_overlap(o) for o in invariants["overlaps"]]
    if (beyond := invariants["unlogged_beyond_clock"]) is not None:
        said.append(_beyond(beyond))
    said += [
        f"a figure that cannot be true ({b['invariant']}): {b['figure']} is {b['value']:.6g}"
        f" against {b['bound']:.6g}"
        for b in invariants["broken"]
    ]
    return said


def _fallback(found: dict[str, Any]) -> str:
    where = found["source"] or f"segment {found['segment']}"
    return (
        f"{where}: the timestamps of iterations {found['first_iteration']}–"
        f"{found['last_iteration']} span {duration(found['stamped_s'])} against "
        f"{duration(found['logged_s'])} of logged step time ({found['stamped_s']:.6g} s <"
        f" {found['logged_s']:.6g} s: logged after the fact, or a clock reset): its wall clock"
        " is the sum of its step times, and no restart gap or stall is measured there"
    )


def _overlap(found: dict[str, Any]) -> str:
    where = found["source"] or f"segment {found['segment']}"
    return (
        f"{where}: {found['records']} records cover {found['covered']} iterations by their"
        f" intervals, more than the {found['span']} the iteration counter spans: they overlap,"
        " and the logged step time counts some iterations twice"
    )


def _beyond(found: dict[str, Any]) -> str:
    gaps = "a gap" if found["gaps"] == 1 else f"{found['gaps']} gaps"
    return (
        f"the iteration counter jumps further than the clock allows ({gaps}, the first from "
        f"iteration {found['first_after_iteration']} to {found['first_iteration']}):"
        f" {found['iterations']:,} iterations not in the log would take"
        f" {duration(found['at_pace_s'])} at the next record's pace, but the clock holds"
        f" {duration(found['clock_s'])}; they are counted as what the clock holds"
    )
