"""How numbers read, in every output: one place, so every command and format writes them alike.

A fraction of a whole (MFU, HFU, a share of time) is a percent with one decimal; a duration
is in the unit a reader takes in at a glance; a ratio carries the one multiplication sign; a
missing value is "unknown"; a count agrees with its noun; a list reads as a sentence lists
it ("a, b and c").
"""

from __future__ import annotations

import math

UNKNOWN = "unknown"
TIMES = "×"  # the one multiplication sign, in ratios ("5.9×") and counts ("32 × H100")


def number(value: object, fmt: str = ",.4g", unit: str = "", missing: str = UNKNOWN) -> str:
    """A number with its format and unit; flags as yes/no; `missing` for a missing value."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return f"{value:{fmt}}{unit}"
    return str(value)


def percent(value: object, decimals: int = 1) -> str:
    """A fraction (0.42) as a percentage ("42.0 %"); "unknown" for a missing value."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return UNKNOWN
    return f"{value * 100:.{decimals}f} %"


def seconds(value: object) -> str:
    """A step time, to four significant figures: "1.617 s"; "unknown" for a missing value."""
    return number(value, ".4g", " s")


def ratio(value: object, decimals: int = 2) -> str:
    """How many times one figure is another: "5.95×"; "unknown" for a missing value."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return UNKNOWN
    return f"{value:.{decimals}f}{TIMES}"


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """A count with its noun in agreement: "1 record", "3 records", "2 restarts"."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def listing(items: list[str] | tuple[str, ...]) -> str:
    """Items as a sentence lists them: "a", "a and b", "a, b and c"."""
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"


def iterations(first: int, last: int) -> str:
    """An iteration range: "iteration 7" or "iterations 2781–2790"."""
    return f"iteration {first}" if first == last else f"iterations {first}–{last}"


def duration(seconds: float | None) -> str:
    """A duration in the unit a reader takes in at a glance: "898 s", "14.9 min", "3.2 h";
    under a second, to the hundredth ("0.11 s", "< 0.01 s"), not a "0 s" that reads as none;
    "unknown" for a missing or infinite one (a document holds an overflowed span as null)."""
    if seconds is None or not math.isfinite(seconds):
        return UNKNOWN
    if 0 < seconds < 0.995:  # from 0.995 on, "1 s" as whole seconds print it
        return f"{seconds:.2f} s" if seconds >= 0.005 else "< 0.01 s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
