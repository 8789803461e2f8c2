"""The HTML report of a 1,000,000-iteration run: build time, file size, first render in
headless Chromium. Each against a baseline measured in the same run:

- build: the report (summary document, view model with downsampled charts, HTML written to
  a file) against the summary document alone, which the report needs anyway;
- first screen: first contentful paint of the report in a fresh headless Chromium (empty
  cache), against the bundled example's report (20 records: the floor for any report);
- all charts drawn: until the page marks every chart drawn, against the same example.

The run is synthetic (the test factories' generator: warm-up, spikes, a periodic slowdown, a
sustained slowdown, a restart, a stall), with loss, learning rate, grad norm and two timer
phases every 1,000 iterations, built once as an input (`bench.synthetic`); parsing is the
stdout stage's business. The render cases need Debian's `chromium` (left out, with a note,
where it is missing). Children:

    python -m bench.stage_report build RUN_FOLDER OUT.html
    python -m bench.stage_report summary RUN_FOLDER
    python -m bench.stage_report open REPORT.html

One opening of a page gives both its times (first screen painted, all charts drawn): the two
cases read them from the same runs (`Command.seconds_key`), so Chromium starts half as often.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench import synthetic
from bench.harness import PYTHON, ROOT, Case, Command

if TYPE_CHECKING:
    import polars as pl

    from loganalyzer.load import Loaded

NAME = "report"
FULL = 1_000_000
QUICK = 200_000
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
# The key of the all-charts-drawn time in an opening's report line.
DRAWN = "drawn_seconds"
FIRST_PAINT = (
    "performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint').startTime"
)


def cases(workdir: Path, quick: bool) -> list[Case]:
    from tests.chromium import chromium_path

    records = QUICK if quick else FULL
    label = f"{records:,} iterations"
    run = str(synthetic.save(workdir / f"run-{records}", *synthetic_tables(records)))
    build = Case(
        NAME,
        f"{label}: build",
        records,
        "records",
        Command(
            "report (document, view, charts, HTML)",
            _child("build", run, str(workdir / "built.html")),
            _flagged,
        ),
        (Command("summary document alone", _child("summary", run), _flagged),),
    )
    if chromium_path() is None:
        print(
            "report: chromium not installed (apt-get install chromium): render not measured",
            file=sys.stderr,
        )
        return [build]
    # The pages opened: written once here, as inputs, by the code under test.
    report = workdir / "report.html"
    subprocess.run(
        _child("build", run, str(report)),
        check=True,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        env=_env(),
    )
    example = workdir / "example.html"
    subprocess.run(_example_report(example), check=True, cwd=ROOT, env=_env())
    size = f"{report.stat().st_size / 1e6:.2f} MB"
    opened = f"{label}: open the {size} report"
    return [
        build,
        Case(
            NAME,
            opened,
            0,
            "",
            Command("first screen painted", _child("open", str(report))),
            (Command("bundled example, first screen", _child("open", str(example))),),
        ),
        Case(
            NAME,
            opened,
            0,
            "",
            Command("all charts drawn", _child("open", str(report)), seconds_key=DRAWN),
            (
                Command(
                    "bundled example, all charts", _child("open", str(example)), seconds_key=DRAWN
                ),
            ),
        ),
    ]


def _child(*args: str) -> list[str]:
    return [PYTHON, "-m", "bench.stage_report", *args]


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _example_report(out: Path) -> list[str]:
    from tests.report_helpers import EXAMPLE, EXAMPLE_ARGS

    return [
        PYTHON,
        "-m",
        "loganalyzer",
        "report",
        "-q",
        str(EXAMPLE),
        *EXAMPLE_ARGS,
        "-o",
        str(out),
    ]


def _flagged(stdout: str) -> str | None:
    """The synthetic run has slow steps and a restart: a build that finds none is wrong."""
    found = json.loads(stdout.strip().splitlines()[0])
    if not found["slow_steps"] or not found["restarts"]:
        return f"expected slow steps and a restart, got {found}"
    return None


def synthetic_tables(records: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A run of `records` iterations with everything the report draws: its per-iteration
    table and its long metrics table."""
    import polars as pl

    from tests.analysis_factories import synthetic_run, timer_metrics

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
    return table, metrics


def synthetic_loaded(folder: Path) -> Loaded:
    """The run `synthetic_tables` built, read back from `folder`, as `load` gives it."""
    from loganalyzer.load import Loaded
    from loganalyzer.model import Run, SourceInfo

    table, metrics = synthetic.load(folder)
    run = Run(
        framework="megatron-lm",
        config={},
        table=table,
        metrics=metrics,
        sources=[SourceInfo("synthetic.log", "megatron", table.height)],
    )
    return Loaded(run)


def build(folder: Path, out: Path) -> None:
    """The report as `loganalyzer report` builds it from a loaded run, written to `out`."""
    from loganalyzer.render.html import render_html
    from loganalyzer.render.view import build_view
    from loganalyzer.summary import build_summary

    loaded = synthetic_loaded(folder)
    start, cpu = time.perf_counter(), time.process_time()
    document = build_summary(loaded, OPTIONS)
    out.write_text(render_html(build_view(document, loaded.run)), encoding="utf-8")
    _report_found(document, start, cpu)


def summary(folder: Path) -> None:
    from loganalyzer.summary import build_summary

    loaded = synthetic_loaded(folder)
    start, cpu = time.perf_counter(), time.process_time()
    document = build_summary(loaded, OPTIONS)
    _report_found(document, start, cpu)


def _report_found(document: dict[str, Any], start: float, cpu: float) -> None:
    """What the build found (checked by `_flagged`), then the wall and CPU time since
    `start` and `cpu`, for the harness."""
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
    counts = {"slow_steps": len(document["slow_steps"]), "restarts": len(document["restarts"])}
    print(json.dumps(counts))
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu_seconds}))


def open_page(path: Path) -> None:
    """Open `path` in a fresh headless Chromium (networking cut off) and report the seconds
    from navigation to the first screen painted (`seconds`) and to every chart drawn
    (`DRAWN`)."""
    from tests.chromium import chromium

    with chromium() as page:
        opened = page.open(path, timeout=300)
        if opened.errors or opened.requests:
            raise RuntimeError(f"{path}: errors {opened.errors}, requests {opened.requests}")
        assert opened.ready_ms is not None
        paint_ms = float(page.evaluate(FIRST_PAINT))
    print(json.dumps({"seconds": paint_ms / 1000, DRAWN: float(opened.ready_ms) / 1000}))


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    if command == "build":
        build(Path(rest[0]), Path(rest[1]))
    elif command == "summary":
        summary(Path(rest[0]))
    else:
        open_page(Path(rest[0]))
