"""Benchmark: the HTML report of a 1,000,000-iteration run: build time, file size, and the
time headless Chromium takes to open it until every chart is drawn.

Not a test: absolute times depend on the machine, so each figure is also given as a ratio to
a baseline measured in the same run:
  build   building the report (view model, downsampled charts, HTML) against building the
          summary document alone, which the report needs anyway;
  render  opening the 1M-iteration report against opening the bundled example's report
          (20 records: plotly.js parsing and page layout, the floor for any report).
The run is synthetic (the test factories' generator: warm-up, spikes, a periodic slowdown, a
sustained slowdown, a restart, a stall), with loss, learning rate, grad norm and two timer
phases every 1,000 iterations; parsing is bench_parse.py's business.

    PYTHONPATH=. python bench/bench_report.py [--records 1000000] [--out report.html]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loganalyzer.load import Loaded
from loganalyzer.model import Run, SourceInfo
from loganalyzer.render.html import render_html
from loganalyzer.render.view import build_view
from loganalyzer.summary import build_summary
from tests.analysis_factories import synthetic_run, timer_metrics
from tests.chromium import chromium, chromium_path
from tests.report_helpers import EXAMPLE, EXAMPLE_ARGS, write_report

REPEATS = 3
# A Llama-3-8B-like shape on 64 H100s, so that FLOPs, TFLOPS and MFU are known.
OPTIONS: dict[str, dict[str, Any]] = {
    "shape": {
        "num_layers": 32,
        "hidden_size": 4096,
        "ffn_hidden_size": 14336,
        "num_attention_heads": 32,
        "num_query_groups": 8,
        "seq_length": 8192,
        "padded_vocab_size": 128256,
        "swiglu": True,
    },
    "run": {"gpu": "h100-sxm", "num_gpus": 64, "global_batch_size": 128, "dtype": "bf16"},
}


def synthetic_loaded(records: int) -> Loaded:
    """A run of `records` iterations with everything the report draws."""
    made = synthetic_run(
        records,
        seed=1,
        pace=6.0,
        warmup=(5.0, 1.5),
        spikes=sorted(random.Random(2).sample(range(10, records), 100)),
        period=5000,
        sustained=(records * 2 // 5, records * 2 // 5 + records // 50, 2.0),
        restart=(records * 7 // 10, 300, 1200.0),
        stalls={records * 3 // 10: 600.0},
    )
    step = pl.col("iteration").cast(pl.Float64)
    table = made.table.with_columns(
        (2.0 + 8.0 / (1 + step / 2000)).alias("loss"),
        (3e-4 * pl.min_horizontal(step / 2000, pl.lit(1.0))).alias("lr"),
        (1.0 + 0.2 * (step / 997).sin()).alias("grad_norm"),
    )
    timed = list(range(1000, records + 1, 1000))
    metrics = timer_metrics(
        timed,
        {"forward-compute": [2000.0] * len(timed), "backward-compute": [3900.0] * len(timed)},
    )
    run = Run(
        framework="megatron-lm",
        config={},
        table=table,
        metrics=metrics,
        sources=[SourceInfo("synthetic.log", "megatron", table.height)],
    )
    return Loaded(run)


def best_of(action: Callable[[], object]) -> float:
    times = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def render_ms(path: Path) -> tuple[list[float], list[float], list[float]]:
    """Milliseconds from navigation to the first screen painted (first contentful paint) and
    to every chart drawn, in a fresh browser (empty cache) each time; and the page's main
    thread CPU time by then, which other work on the machine does not inflate."""
    painted, drawn, cpu = [], [], []
    for _ in range(REPEATS):
        with chromium() as page:
            page.send("Performance.enable", timeDomain="threadTicks")
            opened = page.open(path, timeout=120)
            if opened.errors or opened.requests:
                raise RuntimeError(f"{path}: errors {opened.errors}, requests {opened.requests}")
            assert opened.ready_ms is not None
            drawn.append(float(opened.ready_ms))
            painted.append(float(page.evaluate(FIRST_PAINT)))
            metrics = page.send("Performance.getMetrics")["metrics"]
            cpu.append(1000 * next(m["value"] for m in metrics if m["name"] == "ThreadTime"))
    return painted, drawn, cpu


FIRST_PAINT = (
    "performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint').startTime"
)


def _line(label: str, times: list[float]) -> str:
    return f"{label:<44} best {min(times):5.0f} ms, median {statistics.median(times):5.0f} ms"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--out", type=Path, help="Keep the report here.")
    args = parser.parse_args(argv)

    loaded = synthetic_loaded(args.records)
    summary_s = best_of(lambda: build_summary(loaded, OPTIONS))
    document = build_summary(loaded, OPTIONS)
    report_s = best_of(lambda: render_html(build_view(document, loaded.run)))
    page = render_html(build_view(document, loaded.run))
    with tempfile.TemporaryDirectory() as folder:
        out = args.out or Path(folder) / "report.html"
        out.write_text(page, encoding="utf-8")
        size_mb = out.stat().st_size / 1e6
        print(
            f"records: {loaded.run.table.height:,}; slow steps flagged "
            f"{len(document['slow_steps'])}, restarts {len(document['restarts'])}"
        )
        print(f"summary document (baseline):  {summary_s:.2f} s")
        print(
            f"report view + charts + HTML:  {report_s:.2f} s "
            f"({report_s / summary_s:.2f}x the summary; build total {summary_s + report_s:.2f} s)"
        )
        print(f"file size:                    {size_mb:.2f} MB (limit 8 MB)")
        if chromium_path() is None:
            print("render: chromium not installed (apt-get install chromium); not measured")
            return
        example = write_report([str(EXAMPLE)], EXAMPLE_ARGS, Path(folder) / "example.html")
        base_paint, base_drawn, base_cpu = render_ms(example)
        big_paint, big_drawn, big_cpu = render_ms(out)
        print(_line("first screen, bundled example (baseline)", base_paint))
        print(_line(f"first screen, {args.records:,} iterations", big_paint))
        print(_line("all charts drawn, bundled example (baseline)", base_drawn))
        print(_line(f"all charts drawn, {args.records:,} iterations", big_drawn))
        print(_line("main-thread CPU, bundled example (baseline)", base_cpu))
        print(_line(f"main-thread CPU, {args.records:,} iterations", big_cpu))
        ratio = statistics.median(big_drawn) / statistics.median(base_drawn)
        print(f"ratio all charts drawn / baseline (median): {ratio:.2f}x (limit: 2000 ms)")
        print(f"load average while measuring: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
