"""How numbers read in the terminal: one place, so every command writes them alike."""

from __future__ import annotations

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


def duration(seconds: float) -> str:
    """A duration in the unit a reader takes in at a glance: "898 s", "14.9 min", "3.2 h"."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
