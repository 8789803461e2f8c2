"""HF Trainer stdout: numbers printed out of range or out of form are not read as numbers.

The bars are written from tqdm's default format `{n_fmt}/{total_fmt} [{elapsed}<{remaining},
{rate_fmt}]` (rate `{:5.2f}s/it` or `it/s`, so a step under 5 ms prints `0.00s/it`), each
followed by ProgressCallback.on_log's `str(logs)` (transformers 4.57).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from parsers.hf_trainer.stdout import _value


def _summary(path: Path) -> tuple[dict, str]:  # type: ignore[type-arg]
    result = CliRunner().invoke(main, ["summary", str(path), "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout), result.stderr


def _log(tmp_path: Path, bars: list[str]) -> Path:
    lines = [
        f" 40%|████      | {bar}{{'loss': 1.0, 'learning_rate': 1e-05, 'epoch': {i / 10}}}"
        for i, bar in enumerate(bars, start=1)
    ]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "absurd",
    [
        "40/100 [99999999999999999999:59:59<00:05,  1.00s/it]",
        "99999999999999999999/100 [00:40<00:05,  1.00s/it]",
        "40/99999999999999999999 [00:40<00:05,  1.00s/it]",
    ],
)
def test_a_bar_beyond_64_bits_is_dropped_and_said(tmp_path: Path, absurd: str) -> None:
    bars = [f"{n}/100 [00:{n:02d}<00:05,  1.00s/it]" for n in (10, 20, 30)] + [absurd]
    _, stderr = _summary(_log(tmp_path, bars))
    assert "train.log: 1 progress bar(s) with a number too large to read were not used" in stderr
    assert "(the first at line 4)" in stderr


def test_a_rate_printed_as_zero_is_no_rate(tmp_path: Path) -> None:
    # 10 steps every 3 s on the elapsed clock, the rate printed as 0.00 both ways
    bars = [
        f"{n}/200 [00:{3 * n // 10:02d}<00:05,  0.00{'s/it' if n % 20 else 'it/s'}]"
        for n in range(10, 150, 10)
    ]
    summary, _ = _summary(_log(tmp_path, bars))
    assert summary["step_time_s"]["median"] == pytest.approx(0.3)


@pytest.mark.parametrize(
    ("printed", "seconds"),
    [
        ("298.36s", 298.36),
        ("1h 7m 30s", 4050.0),
        ("7m 30s", 450.0),
        # ms-swift's format_time past a day (swift/utils/utils.py)
        ("1d 2h 3m 4s", 93784.0),
        ("abc 5s", None),
        ("1.2.3s", None),
        ("2h 5s x 5s", None),
        ("5m", None),
        ("s", None),
    ],
)
def test_only_a_whole_duration_is_a_duration(printed: str, seconds: float | None) -> None:
    read = pl.select(_value(pl.lit(printed), pl.lit("elapsed_time"))).item()
    assert read == (pytest.approx(seconds) if seconds is not None else None)
