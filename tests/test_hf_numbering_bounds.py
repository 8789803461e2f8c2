"""HF Trainer stdout numbering: the searches for a logging interval take a bounded number of
steps however large the counters printed (a bar at 999,999,999,990 of 10^12, a resumed run of
3·10^9 steps), where testing every candidate size one by one never finished.

The bars are written from tqdm's default format `{n_fmt}/{total_fmt} [{elapsed}<{remaining},
{rate_fmt}]` followed by ProgressCallback.on_log's `str(logs)` (transformers 4.57).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import polars as pl

from parsers.hf_trainer.numbering import _interval_between, _logging_interval, _quotient_blocks

WELL_UNDER_A_SECOND = 0.5


def _timed(call, *args):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = call(*args)
    return result, time.perf_counter() - start


def test_interval_from_counters_far_from_zero() -> None:
    # the first log at step 200,010 (bars 200,010 before it, 200,011 after), then 200,020
    size, seconds = _timed(
        _interval_between, pl.Series([200_010, 200_020]), pl.Series([200_011, 200_020])
    )
    assert size == 10
    assert seconds < WELL_UNDER_A_SECOND


def test_resumed_interval_of_a_long_run() -> None:
    # two logs after a resume at 1,000,000,000 of 3,000,000,000: every L from 750,000,001 to
    # 1,000,000,000 leaves two multiples, and one of them divides the checkpoint's step
    size, seconds = _timed(_logging_interval, 2, 3_000_000_000, 1_000_000_000)
    assert size == 1_000_000_000
    assert seconds < WELL_UNDER_A_SECOND
    # the search goes over ranges of L, not each L: a handful here, O(√total) at most
    blocks = list(_quotient_blocks(3_000_000_000, 1_000_000_000, 1, 3_000_000_000))
    assert len(blocks) < 2 * (3_000_000_000**0.5 + 1_000_000_000**0.5)
    assert _logging_interval(2_000_000, 3_000_000_000, 1_000_000_000) == 1_000


def test_bars_near_a_trillion_do_not_hang(tmp_path: Path) -> None:
    total = 10**12
    lines = []
    for before, after, loss in ((total - 10, total - 5, 1.0), (total - 4, total - 1, 0.9)):
        lines.append(
            f" 50%|█████     | {before}/{total} [00:05<00:05,  1.00it/s]"
            f"{{'loss': {loss}, 'learning_rate': 1e-05, 'epoch': 0.5}}"
        )
        lines.append(f" 50%|█████     | {after}/{total} [00:06<00:05,  1.00it/s]")
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "loganalyzer", "summary", str(path), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
