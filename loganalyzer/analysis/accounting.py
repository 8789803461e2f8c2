"""Where the run's time went.

Logged time (Σ step time * interval) is split into what the run would have taken at its
steady pace (productive) and what it lost to warm-up (the warm-up's excess over the pace), to
slow steps (their excess over the baseline, sustained slowdowns included) and to work that a
restart made redo (redone iterations * the pace). Restart gaps and stalls happen between logged
steps, so they add to the wall-clock time instead of splitting the logged time.
"""

from __future__ import annotations

from dataclasses import dataclass

from loganalyzer.analysis.restarts import Restart, Stall
from loganalyzer.analysis.slow_steps import SlowSteps
from loganalyzer.analysis.steady import Warmup


@dataclass(frozen=True)
class TimeAccounting:
    """Seconds; `logged_s` = productive + warm-up + slow steps + redone work. The sentence that
    says it is `render.wording.time_summary`."""

    logged_s: float
    productive_s: float
    warmup_s: float
    slow_steps_s: float
    redone_s: float
    restart_gaps_s: float
    stalls_s: float
    restarts_s: float


def account(
    logged_s: float,
    warmup: tuple[Warmup, ...],
    slow: SlowSteps,
    restarts: tuple[Restart, ...],
    stalls: tuple[Stall, ...],
) -> TimeAccounting:
    """Split `logged_s` and add the time lost outside it."""
    warmup_s = sum((w.lost_s for w in warmup), 0.0)
    # Redone iterations cost the pace each, but never more than the logged time holds beyond
    # warm-up and slow steps: a counter that skipped ahead before a restart claims
    # iterations that were never timed.
    kept_s = max(0.0, logged_s - warmup_s - slow.lost_s)
    redone_s = min(kept_s, sum((r.redone_s for r in restarts), 0.0))
    gaps_s = sum((r.gap_s or 0.0 for r in restarts), 0.0)
    stalls_s = sum((s.gap_s for s in stalls), 0.0)
    productive_s = kept_s - redone_s
    return TimeAccounting(
        logged_s=logged_s,
        productive_s=productive_s,
        warmup_s=warmup_s,
        slow_steps_s=slow.lost_s,
        redone_s=redone_s,
        restart_gaps_s=gaps_s,
        stalls_s=stalls_s,
        restarts_s=redone_s + gaps_s,
    )
