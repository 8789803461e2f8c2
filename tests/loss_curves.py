"""Synthetic loss curves for the incident tests: a slowly falling trend, relative Gaussian
noise, spikes injected on top, logged as Megatron logs them (each record the mean of the
`interval` iterations it covers, numbered by its last iteration)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from loganalyzer.model import conform_table


@dataclass(frozen=True)
class Spike:
    """A jump to `size` times the trend at iteration `start` (1-based), held for `hold`
    iterations, then back to the trend within `recovery` more (`shape`: a linear or
    exponential decay). A spike shorter than the log interval is averaged away by the
    framework's mean over the interval: holding it for one interval makes it one the log
    shows at its size."""

    start: int
    size: float
    recovery: int
    shape: str = "linear"
    hold: int = 1


def loss_per_iteration(
    iterations: int, noise: float, spikes: tuple[Spike, ...], seed: int, drop: float = 0.3
) -> np.ndarray:
    """The loss of iterations 1..`iterations`: 3.0 falling by `drop` (a share) over the run,
    times (1 + N(0, noise)), times each spike's factor."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, iterations + 1, dtype=float)
    trend = 3.0 * (1 - drop * (1 - np.exp(-3 * t / iterations)))
    factor = np.ones(iterations)
    for spike in spikes:
        since = np.clip(t - spike.start - spike.hold + 1, 0, None)
        inside = (t >= spike.start) & (since < spike.recovery)
        if spike.shape == "linear":
            share = 1 - since / spike.recovery
        else:  # exponential: 1 % of the jump left at `recovery`
            share = np.exp(-since * np.log(100) / spike.recovery)
        factor = np.where(inside, factor + (spike.size - 1) * share, factor)
    return trend * factor * (1 + rng.normal(0.0, noise, iterations))


def logged_table(losses: np.ndarray, interval: int) -> pl.DataFrame:
    """The per-iteration table a log of `losses` every `interval` iterations gives."""
    records = len(losses) // interval
    means = losses[: records * interval].reshape(records, interval).mean(axis=1)
    return conform_table(
        pl.DataFrame(
            {
                "iteration": np.arange(1, records + 1) * interval,
                "interval": np.full(records, interval),
                "step_time_s": np.full(records, 1.0),
                "loss": means,
                "segment": np.zeros(records, dtype=np.int32),
                "line": np.arange(1, records + 1),
                "source": ["train.log"] * records,
            }
        )
    )
