"""Property tests: whatever steps, values, launcher prefixes and number formats a DeepSpeed
or HF Trainer log carries (in the frameworks' own format strings), the parsers read back
exactly what was printed; views of one run combine, a resume does not."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from loganalyzer.combine import combine_views
from loganalyzer.parsers.deepspeed import DeepSpeedParser
from loganalyzer.parsers.hf_trainer import HfTrainerParser

PREFIXES = st.sampled_from(["", "0: ", "[rank0]:", "[default0]:", "worker-3: "])
POSITIVE = st.floats(min_value=1e-3, max_value=1e5, allow_nan=False)
BATCH = 64


def _write(text: str) -> Path:
    folder = Path(tempfile.mkdtemp())
    path = folder / "train.log"
    path.write_text(text)
    return path


@settings(max_examples=25, deadline=None)
@given(
    steps=st.lists(st.integers(1, 10**6), min_size=1, max_size=12, unique=True).map(sorted),
    rates=st.lists(POSITIVE, min_size=12, max_size=12),
    lrs=st.lists(st.floats(min_value=0, max_value=1, allow_nan=False), min_size=12, max_size=12),
    prefix=PREFIXES,
    copies=st.integers(1, 3),
)
def test_deepspeed_step_and_throughput_lines(
    steps: list[int], rates: list[float], lrs: list[float], prefix: str, copies: int
) -> None:
    stamp = "[2026-01-02 03:04:05,678] [INFO]"
    lines = [f"{prefix}{stamp} [config.py:678:print] DeepSpeedEngine configuration:"]
    lines.append(f"{prefix}{stamp} [config.py:678:print]   train_batch_size ............. {BATCH}")
    for step, rate, lr in zip(steps, rates, lrs, strict=False):
        for _ in range(copies):
            lines.append(
                f"{prefix}{stamp} [logging.py:123:log_dist] [Rank 0] step={step}, skipped=0,"
                f" lr=[{lr}], mom=[[0.9, 0.95]]"
            )
        lines.append(
            f"{prefix}{stamp} [timer.py:264:stop] epoch=0/micro_step={2 * step}/global_step="
            f"{step}, RunningAvgSamplesPerSec={rate}, CurrSamplesPerSec={rate},"
            " MemAllocated=0.7GB, MaxMemAllocated=1.5GB"
        )
    run = DeepSpeedParser().parse(_write("\n".join(lines) + "\n"))
    table = run.table
    assert table["iteration"].to_list() == steps
    assert table["lr"].to_list() == lrs[: len(steps)]
    assert table["step_time_s"].to_list() == [BATCH / r for r in rates[: len(steps)]]
    assert table["mem_max_allocated_gb"].to_list() == [1.5] * len(steps)
    assert table["segment"].to_list() == [0] * len(steps)


def _dict(values: dict[str, float], strings: bool) -> str:
    """A logged dict as ProgressCallback prints it: floats (transformers 4) or `.4g`
    strings (transformers 5)."""
    shown = {k: f"{v:.4g}" if strings else v for k, v in values.items()}
    return str(shown)


@settings(max_examples=25, deadline=None)
@given(
    losses=st.lists(POSITIVE, min_size=2, max_size=10),
    interval=st.integers(1, 50),
    strings=st.booleans(),
    prefix=PREFIXES,
)
def test_hf_dicts_numbered_by_the_logging_interval(
    losses: list[float], interval: int, strings: bool, prefix: str
) -> None:
    total = interval * len(losses)
    lines = [
        f"{prefix}***** Running training *****",
        f"{prefix}  Total optimization steps = {total:,}",
    ]
    for k, loss in enumerate(losses, start=1):
        values = {"loss": loss, "grad_norm": 1.5, "learning_rate": 1e-4, "epoch": k / 10}
        lines.append(prefix + _dict(values, strings))
    run = HfTrainerParser().parse(_write("\n".join(lines) + "\n"))
    # n logs in T steps fix the interval L only when no other L' has floor(T / L') = n,
    # which for T = n·L holds exactly when L <= n + 1; otherwise the records are numbered
    # in order, and the run says so.
    if interval <= len(losses) + 1:
        expected = [interval * k for k in range(1, len(losses) + 1)]
    else:
        expected = list(range(1, len(losses) + 1))
        assert any("numbered 1, 2, 3" in w for w in run.warnings)
    assert run.table["iteration"].to_list() == expected
    printed = [float(f"{v:.4g}") if strings else v for v in losses]
    assert run.table["loss"].to_list() == printed


@settings(max_examples=15, deadline=None)
@given(
    losses=st.lists(POSITIVE, min_size=3, max_size=8),
    resume_at=st.integers(1, 2),
)
def test_views_combine_and_a_resume_does_not(losses: list[float], resume_at: int) -> None:
    interval, total = 5, 5 * len(losses)
    entries = [
        {"loss": loss, "learning_rate": 1e-4, "train_runtime": 1.5 * k * interval}
        for k, loss in enumerate(losses, start=1)
    ]
    block = ["***** Running training *****", f"  Total optimization steps = {total}"]
    stdout = [*block, *(_dict(e, strings=True) for e in entries)]
    verbose = [*block, *(_dict(e, strings=False) for e in entries)]
    parser = HfTrainerParser()
    first = parser.parse(_write("\n".join(stdout) + "\n"))
    second = parser.parse(_write("\n".join(verbose) + "\n"))
    # two logs of one kind are not views of one run (copies, restarts or benchmarks of one
    # seed print the same losses); the trainer's state saved beside its stdout is
    state = {
        "global_step": total,
        "max_steps": total,
        "logging_steps": interval,
        # at the steps the stdout's records were numbered with (see the test above)
        "log_history": [
            {**e, "step": step}
            for step, e in zip(first.table["iteration"].to_list(), entries, strict=True)
        ],
    }
    folder = Path(tempfile.mkdtemp())
    (folder / "trainer_state.json").write_text(json.dumps(state))
    saved = parser.parse(folder / "trainer_state.json")
    assert len(combine_views([first, second])) == 2
    combined = combine_views([first, saved])
    assert len(combined) == 1
    assert combined[0].table["iteration"].to_list() == first.table["iteration"].to_list()
    resumed = [
        *block,
        *(_dict({**e, "loss": e["loss"] * 1.5}, strings=False) for e in entries[resume_at:]),
    ]
    later = parser.parse(_write("\n".join(resumed) + "\n"))
    assert len(combine_views([second, later])) == 2
