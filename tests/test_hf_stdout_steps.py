"""HF Trainer stdout: each logged dict at the step its counter says, and progress-bar-only
output read, whatever was cut out of the log.

Real text quoted (with its source) where it exists; the synthetic logs are written from the
format strings: tqdm's default bar `{percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt}
[{elapsed}<{remaining}, {rate_fmt}]` (elapsed as `MM:SS`, `H:MM:SS` past an hour; rate
`{:5.2f}s/it` or `it/s`), and ProgressCallback.on_log's `str(logs)` of transformers 4.57, whose
logs carry the cumulative `train_runtime` (see the shared logs/FORMATS.md, section 4).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.parsers.hf_trainer import HfTrainerParser
from loganalyzer.registry import choose, load_registry
from tests.conftest import ROOT


def _clock(seconds: float) -> str:
    """tqdm's format_interval: whole seconds, `H:MM:SS` past an hour."""
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _bar(n: int, total: int, elapsed: float, rate_s: float) -> str:
    filled = "█" * (n * 10 // total)
    remaining = _clock(rate_s * (total - n))
    return (
        f"{100 * n // total:3d}%|{filled:<10}| {n}/{total} [{_clock(elapsed)}<{remaining},"
        f" {rate_s:5.2f}s/it]"
    )


def _every_step_log(total: int, step_s: float, cut: range) -> str:
    """A run logging every step (logging_steps=1) as a terminal shows it: the bar, then the
    dict on the same line; the steps in `cut` removed (lines lost when it was pasted)."""
    lines = [
        "***** Running training *****",
        "  Num examples = 3,200",
        "  Num Epochs = 1",
        "  Instantaneous batch size per device = 4",
        "  Total train batch size (w. parallel, distributed & accumulation) = 32",
        "  Gradient Accumulation steps = 8",
        f"  Total optimization steps = {total}",
    ]
    for n in range(1, total + 1):
        runtime = round(step_s * n + 0.4, 4)
        logs = {
            "loss": round(2.5 - n / 100, 4),
            "grad_norm": 1.25,
            "learning_rate": 2e-05,
            "epoch": round(n / total, 2),
            "num_input_tokens_seen": 65536 * n,
            "train_runtime": runtime,
            "train_tokens_per_second": round(65536 * n / runtime, 3),
        }
        if n not in cut:
            lines.append(_bar(n, total, runtime, step_s) + str(logs))
    return "\n".join(lines) + "\n"


def test_a_gap_does_not_renumber_the_dicts_around_it(tmp_path: Path) -> None:
    """Issue 27's case: 100 steps logged every step, 3.54 s each, 68 steps cut out. Shared
    out among the 32 dicts found, the 100 steps made them 3, 6, ... and the steps 3x too
    fast; the bar before each dict says which step it is."""
    path = tmp_path / "train.log"
    path.write_text(_every_step_log(100, 3.54, range(17, 85)), encoding="utf-8")
    run = HfTrainerParser().parse(path)
    expected = [*range(1, 17), *range(85, 101)]
    assert run.table["iteration"].to_list() == expected
    times = run.table["step_time_s"].to_list()
    assert times[1:] == pytest.approx([3.54] * 31, rel=1e-3)
    assert run.table["interval"].to_list() == [1] * 32
    assert not any("assumption" in w for w in run.warnings)


def test_epoch_places_the_dicts_when_no_bar_was_captured(tmp_path: Path) -> None:
    """stdout alone (the bar goes to stderr): 4 x 8 per-device examples, 25 steps per epoch
    from `Num examples = 3,200` over a total batch of 32 per 4 x 8; epoch rounded to 2
    decimals places each dict."""
    text = _every_step_log(100, 3.54, range(17, 85))
    stdout = "\n".join(
        line[line.index("{") :] if "{" in line else line for line in text.split("\n")
    )
    path = tmp_path / "stdout.log"
    path.write_text(stdout, encoding="utf-8")
    run = HfTrainerParser().parse(path)
    assert run.table["iteration"].to_list() == [*range(1, 17), *range(85, 101)]
    assert any("their epoch" in w for w in run.warnings)


def test_sharing_out_the_total_is_stated_as_an_assumption(tmp_path: Path) -> None:
    lines = ["***** Running training *****", "  Total optimization steps = 40"]
    lines += [str({"loss": 2.0 - k / 10, "learning_rate": 1e-4}) for k in range(1, 9)]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = HfTrainerParser().parse(path)
    assert run.table["iteration"].to_list() == [5, 10, 15, 20, 25, 30, 35, 40]
    assert any(w.startswith("assumption:") and "k x 5" in w for w in run.warnings)


# Real text (fixtures/README.md gives the sources): hef1023_seq2seq.log, a transformers 4.2x
# Seq2SeqTrainer with its checkpoint saves printed at INFO level; qwen3_lora.log, a LoRA run
# logging every 10 of 69 steps whose elapsed clock passes an hour (H:MM:SS).
REAL = ROOT / "fixtures" / "hf_trainer" / "real"


def test_real_bars_glued_to_dicts() -> None:
    run = HfTrainerParser().parse(REAL / "hef1023_seq2seq.log")
    assert run.table["iteration"].to_list() == [500, 1000, 1500]
    # 01:30, 03:00, 04:31 elapsed: 90, 90, 91 s a 500 steps; the rates (5.68 it/s is
    # 88.0 s a 500) are running averages the clock does not agree with to its second
    assert run.table["step_time_s"].to_list() == pytest.approx([0.18, 0.18, 0.182])
    assert run.sources[0].clock_resolution_s == 1.0


def test_real_hours_on_the_clock() -> None:
    run = HfTrainerParser().parse(REAL / "qwen3_lora.log")
    assert run.table["iteration"].to_list() == [10, 20, 30, 40, 50, 60]
    elapsed = [655, 1281, 1797, 2370, 2930, 3544]  # 10:55 ... 59:04
    seconds = [elapsed[0] / 10] + [(b - a) / 10 for a, b in itertools.pairwise(elapsed)]
    # the last ten steps took 614 s on the clock, 613.3 at the printed 61.33 s/it: within
    # the clock's second, the finer rate is taken; elsewhere the rate lags the clock
    assert run.table["step_time_s"].to_list() == pytest.approx([*seconds[:5], 61.33])


@pytest.mark.parametrize("joiner", ["\r", "^M"])
def test_bars_only_are_read(tmp_path: Path, joiner: str) -> None:
    """The Qwen3 run's bars alone, joined by carriage returns or by the `^M` a terminal copy
    shows for them: one record per update, claimed by hf_trainer (exit 3 before)."""
    text = (REAL / "qwen3_lora.log").read_text(encoding="utf-8")
    bars = [line[: line.index("]") + 1] for line in text.splitlines() if "%|" in line]
    path = tmp_path / "bars.log"
    path.write_text(joiner.join(bars) + "\n", encoding="utf-8")
    assert choose(load_registry(), path) == "hf_trainer"
    result = CliRunner().invoke(main, ["summary", str(path), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["iterations"]["first"] == 10 and summary["iterations"]["last"] == 69
    run = HfTrainerParser().parse(path)
    assert run.table["iteration"].to_list() == [10, 20, 30, 40, 50, 60, 69]
    # 1:07:25 is 4045 s; the last 9 steps took 4045 - 3544 = 501 s (rate 58.63 s/it: the
    # clock's 55.7 s/step is more than a second off the running average over 9 steps)
    assert run.table["step_time_s"][-1] == pytest.approx(501 / 9)
    assert run.sources[0].clock_resolution_s == 1.0


def test_deepspeed_chat_banner_alone_is_not_claimed(tmp_path: Path) -> None:
    """DeepSpeed-Chat's step1 main.py prints the Trainer's banner itself
    (`print_rank_0("***** Running training *****")`, then `***** Evaluating perplexity, Epoch
    0/1 *****`, `ppl: ...`, `Beginning of Epoch 1/1, Total Micro Batches N`) and none of the
    Trainer's lines: hf_trainer cannot read it and does not claim it."""
    path = tmp_path / "ds_chat.log"
    path.write_text(
        "***** Running training *****\n"
        "***** Evaluating perplexity, Epoch 0/1 *****\n"
        "ppl: 4.193147659301758\n"
        "Beginning of Epoch 1/1, Total Micro Batches 3680\n",
        encoding="utf-8",
    )
    assert HfTrainerParser().detect(path) == 0.0
    block = tmp_path / "hf.log"
    block.write_text(
        "***** Running training *****\n  Num examples = 5,498\n  Total optimization steps = 196\n",
        encoding="utf-8",
    )
    assert HfTrainerParser().detect(block) == 0.9


@pytest.mark.parametrize(
    ("strings", "resolution"),
    [(True, 1.0), (False, None)],
)
def test_printed_runtime_resolution(
    tmp_path: Path, strings: bool, resolution: float | None
) -> None:
    """transformers 5 prints every float of a logged dict as `f"{v:.4g}"` (its
    ProgressCallback.on_log): a cumulative train_runtime of 1,500 s to 5,000 s reads to the
    second; transformers 4 prints it rounded to 4 decimals."""
    lines = ["***** Running training *****", "  Total optimization steps = 40"]
    for k in range(1, 9):
        logs = {"loss": 2.0 - k / 10, "learning_rate": 1e-4, "train_runtime": 612.345 * k}
        shown = {key: f"{v:.4g}" if strings else v for key, v in logs.items()}
        lines.append(str(shown))
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = HfTrainerParser().parse(path)
    assert run.sources[0].clock_resolution_s == resolution


def test_bars_buffered_apart_from_the_dicts_are_not_used_to_number_them(tmp_path: Path) -> None:
    """`python train.py > log 2>&1` without -u: stderr's bar reaches the file at once, stdout's
    dicts a block later, all after the last bar. The bar before each dict then says 40 for
    all of them: not a counter of the dicts, so the total is shared out, as an assumption."""
    bars = "\r".join(_bar(n, 40, 2.0 * n, 2.0) for n in range(1, 41))
    dicts = [str({"loss": 2.0 - k / 10, "learning_rate": 1e-4}) for k in range(1, 9)]
    lines = ["***** Running training *****", "  Total optimization steps = 40", bars, *dicts]
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    run = HfTrainerParser().parse(path)
    assert run.table["iteration"].to_list() == [5, 10, 15, 20, 25, 30, 35, 40]
    assert any("does not advance" in w for w in run.warnings)
    assert any(w.startswith("assumption:") for w in run.warnings)
