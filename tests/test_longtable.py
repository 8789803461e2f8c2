"""A run's long table is read once per summary: its metric names, timer medians, printed
events and start-up timers, however many steps use them, with the figures they gave when
every step read them itself."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from loganalyzer.analysis import longtable, phases
from loganalyzer.analysis.phases import timer_medians, timer_phases
from loganalyzer.load import load_run
from loganalyzer.registry import load_registry
from loganalyzer.spill import metric_names
from loganalyzer.summary import build_summary
from tests.conftest import FIXTURES

MEGATRON = FIXTURES / "megatron"
# timers one-line and (min, max), with start-up timers and slow steps
WITH_TIMERS = [
    MEGATRON / "bigscience_gpt2_tp4_pp8.out",
    MEGATRON / "bert_2022_timers.txt",
    MEGATRON / "quirks" / "timers_minmax.log",
]


def _counting(calls: Counter[str], name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[name] += 1
        return function(*args, **kwargs)

    return counted


@pytest.mark.parametrize("path", WITH_TIMERS, ids=lambda p: p.name)
def test_each_reading_of_the_long_table_is_made_once(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    loaded = load_run([str(path)], load_registry())
    metrics = loaded.run.metrics
    assert timer_phases(metric_names(metrics)), "the fixture logs timers"
    calls: Counter[str] = Counter()
    for module, name in (
        (longtable, "metric_names"),
        (longtable, "events_of"),
        (longtable, "startup_by_segment"),
        (phases, "timer_medians"),
        (phases, "metric_names"),
    ):
        monkeypatch.setattr(module, name, _counting(calls, name, getattr(module, name)))
    build_summary(loaded, {"shape": {}, "run": {"gpu": "h100-sxm"}})
    assert calls == Counter(metric_names=1, events_of=1, startup_by_segment=1, timer_medians=1), (
        "a reading made twice"
    )


def test_the_timers_read_once_are_the_medians_of_the_whole_table() -> None:
    """`LongTable.timers` is what `timer_medians` gives for the table's own timer names."""
    run = load_run([str(MEGATRON / "bigscience_gpt2_tp4_pp8.out")], load_registry()).run
    read = longtable.LongTable(run.metrics, run.table)
    expected = timer_medians(run.metrics, timer_phases(metric_names(run.metrics)))
    assert expected.height
    assert read.timers.medians.equals(expected)
    assert read.names == metric_names(run.metrics)
