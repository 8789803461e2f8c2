"""Slow steps that recur at a fixed iteration period: checkpoint saves, evaluation.

Periods are found in iterations, not records, so a period that is a multiple of the log
interval (a save every 1000 iterations, a record every 100) is found like any other. A slow
record matches a period P with phase r when an iteration it covers is ≡ r (mod P).

Candidates are the differences between each slow iteration and its next `MAX_LAG` slow
iterations (lags above 1 so that isolated spikes between two stalls do not hide the period);
each candidate is scored by hits * coverage (hits over the occurrences expected between the
first and last hit) which favours the true period over its multiples (fewer hits) and over
its fractions (poor coverage). Up to `MAX_PERIODS` periods are peeled off one after another.

A period the run itself states (a configured `save_interval` or `eval_interval`, or the
spacing of its `saving checkpoint` lines) is strong evidence: slow records on it (covering a
multiple of it or the iteration right after one, where the save's or evaluation's time lands)
are periodic from `MIN_KNOWN_HITS` occurrences. Those are matched first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import polars as pl

MAX_LAG = 5
MAX_CANDIDATES = 8
MAX_PERIODS = 3
# Three points in arithmetic progression turn up by chance among a handful of random spikes;
# four rarely do.
MIN_HITS = 4
MIN_COVERAGE = 0.6
# On a period the run states, two occurrences are a pattern.
MIN_KNOWN_HITS = 2


@dataclass(frozen=True)
class _Fit:
    period: int
    phase: int
    score: float


def find_periods(slow: pl.DataFrame, known: Sequence[int] = ()) -> pl.Series:
    """For each slow record (`iteration`, `interval`), the period it recurs at, else null.
    `known` are the periods the run states (configured intervals, save-line spacing)."""
    period = pl.Series("period", [None] * slow.height, dtype=pl.Int64)
    for candidate in sorted({p for p in known if p > 0}):
        on_it = _on_period(slow, candidate) & period.is_null()
        if slow.filter(on_it)["iteration"].n_unique() >= MIN_KNOWN_HITS:
            period = pl.select(pl.when(on_it).then(candidate).otherwise(period)).to_series()
    for _ in range(MAX_PERIODS):
        fit = _best_fit(slow.filter(period.is_null()))
        if fit is None:
            break
        matched = _matches(slow, fit.period, fit.phase) & period.is_null()
        period = pl.select(pl.when(matched).then(fit.period).otherwise(period)).to_series()
    return period.alias("period")


def stated_periods(configured: Sequence[int], save_iterations: Sequence[int]) -> list[int]:
    """The periods a run states: its configured intervals, and the spacing of its save lines
    where two or more are evenly spaced."""
    periods = [p for p in configured if p > 0]
    saves = sorted(set(save_iterations))
    spacings = {b - a for a, b in pairwise(saves)}
    if len(spacings) == 1:
        periods.append(spacings.pop())
    return periods


def _on_period(slow: pl.DataFrame, period: int) -> pl.Series:
    """Whether a record covers a multiple of `period` or the iteration right after one."""
    offset = pl.col("iteration") % period
    return slow.select((offset < pl.col("interval") + 1).alias("hit")).to_series()


def _matches(slow: pl.DataFrame, period: int, phase: int) -> pl.Series:
    """Whether an iteration a record covers (`first`..`iteration`) is ≡ phase (mod period)."""
    offset = (pl.col("iteration") - phase) % period
    return slow.select((offset < pl.col("interval")).alias("hit")).to_series()


def _best_fit(slow: pl.DataFrame) -> _Fit | None:
    iterations = slow["iteration"].unique().sort()
    if iterations.len() < MIN_HITS:
        return None
    narrowest = int(slow["interval"].max())  # type: ignore[arg-type]
    diffs = pl.concat([iterations.shift(-lag) - iterations for lag in range(1, MAX_LAG + 1)])
    candidates = (
        diffs.filter(diffs > narrowest)
        .value_counts(name="n")
        .sort(["n", diffs.name], descending=[True, False])
        .head(MAX_CANDIDATES)
    )
    best: _Fit | None = None
    for period in candidates[diffs.name]:
        fit = _fit(slow, int(period))
        if fit is not None and (best is None or fit.score > best.score):
            best = fit
    return best


def _fit(slow: pl.DataFrame, period: int) -> _Fit | None:
    residues = (slow["iteration"] % period).value_counts(name="n")
    phase = int(residues.sort(["n", "iteration"], descending=[True, False])["iteration"][0])
    hits = slow.filter(_matches(slow, period, phase))["iteration"].unique()
    if hits.len() < MIN_HITS:
        return None
    expected = (int(hits.max()) - int(hits.min())) // period + 1  # type: ignore[arg-type]
    coverage = hits.len() / expected
    if coverage < MIN_COVERAGE:
        return None
    return _Fit(period=period, phase=phase, score=hits.len() * coverage)
