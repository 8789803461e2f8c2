"""HF Trainer stdout as real logs show it beyond the plain terminal: a paste indented in a
document, bars tqdm printed without their drawing, a last bar glued to a logger's lines,
values some loggers print as text, ms-swift's step counter, an examples' logger prefix.

Each test quotes the real lines with their source, or the format string it writes from.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.parsers.hf_trainer import HfTrainerParser
from loganalyzer.parsers.hf_trainer.stdout import scan
from loganalyzer.registry import choose, load_registry


def _log(tmp_path: Path, lines: list[str], name: str = "train.log") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# saforem2/ezpz:docs/notes/slides-2025-05-07.md@c64c4ddaf0148543e3add638f82ec6d4b47f0159
# lines 1158-1260, a log pasted into a Markdown note with every line indented by 4 spaces
# (Llama-3.2-1B, 24 ranks, 10 steps of 192 samples, one epoch; the dicts printed by two
# processes, each stream with its own train_runtime).
EZPZ_BLOCK = [
    "[INFO|trainer.py:2414] 2025-05-06 22:26:52,889 >> ***** Running training *****",
    "[INFO|trainer.py:2415] 2025-05-06 22:26:52,889 >>   Num examples = 1,920",
    "[INFO|trainer.py:2417] 2025-05-06 22:26:52,889 >>   Instantaneous batch size per device = 8",
    "[INFO|trainer.py:2420] 2025-05-06 22:26:52,889 >>   Total train batch size"
    " (w. parallel, distributed & accumulation) = 192",
    "[INFO|trainer.py:2421] 2025-05-06 22:26:52,889 >>   Gradient Accumulation steps = 1",
    "[INFO|trainer.py:2422] 2025-05-06 22:26:52,890 >>   Total optimization steps = 10",
]
EZPZ_DICTS = [
    "{'loss': 2.847, 'grad_norm': 3.8245272636413574, 'learning_rate': 5e-05, 'epoch': 0.1,"
    " 'num_input_tokens_seen': 24576}",
    "{'loss': 2.9574, 'grad_norm': 7.945530414581299, 'learning_rate': 4.5e-05, 'epoch': 0.2,"
    " 'num_input_tokens_seen': 49152}",
    "{'loss': 3.1086, 'grad_norm': 7.155135631561279, 'learning_rate': 4e-05, 'epoch': 0.3,"
    " 'num_input_tokens_seen': 73728}",
]


def test_an_indented_paste_reads_as_the_log(tmp_path: Path) -> None:
    """Indentation in front of every line (a log quoted in a document) changes nothing: the
    dicts are read, placed at steps 1-3 by their epoch; the second process's copies of the
    same dicts are kept once (0 records before)."""
    indent = "    "
    lines = [indent + line for line in [*EZPZ_BLOCK, *EZPZ_DICTS, *EZPZ_DICTS]]
    run = HfTrainerParser().parse(_log(tmp_path, lines))
    assert run.table["iteration"].to_list() == [1, 2, 3]
    assert run.table["loss"].to_list() == [2.847, 2.9574, 3.1086]
    assert run.config["global_batch_size"].value == 192


@pytest.mark.parametrize("indent", ["", "    ", "\t"])
def test_indented_dicts_alone_are_claimed(tmp_path: Path, indent: str) -> None:
    """Dicts with no training block before them (a log cut to its records) are the Trainer's
    at any indentation (an indented paste was recognised by no parser before)."""
    path = _log(tmp_path, [indent + line for line in EZPZ_DICTS])
    assert choose(load_registry(), path) == "hf_trainer"
    assert HfTrainerParser().parse(path).table.height == 3


# coreweave/kubernetes-cloud:docs/compass/finetuning-machine-learning-models.md
# @fc6c068ac4875895b76fd29f5fe9012e0ef9f846 lines 280-310 (argo logs of a transformers 4.17
# Trainer: pod-name prefixes, tqdm drawn without its bar).
COREWEAVE = [
    "finetune-ckl8r-3837635091: FORCE FP16: True",
    "finetune-ckl8r-3837635091: Using amp half precision backend",
    "...",
    "  4% 99/2238 [1:48:23<35:43:37, 60.13s/it]",
    "finetune-ckl8r-3837635091: CPU: (maxrss: 114,754mb F: 674,206mb) GPU: (U: 37,289mb"
    " F: 13,763mb T: 51,052mb) TORCH: (R: 36,033mb/36,033mb, A: 22,016mb/23,665mb)",
    "  4% 100/2238 [1:49:59<42:08:58, 70.97s/it]{'loss': 2.6446, 'learning_rate': 5e-05,"
    " 'epoch': 0.04}",
    "  5% 101/2238 [1:51:00<40:18:00, 67.89s/it]",
    "  5% 103/2238 [1:53:00<37:54:38, 63.92s/it]",
]


def test_bars_printed_without_their_drawing(tmp_path: Path) -> None:
    """tqdm with `ncols=0` prints `l_bar[:-1] + r_bar[1:]` (tqdm.std.format_meter): `  4%
    100/2238 [...]`, no `|` nor blocks. The dict glued after one is the bar's step, 100;
    one dict alone fixes no logging interval (the bar after it, 101, is the next step's)."""
    run = HfTrainerParser().parse(_log(tmp_path, COREWEAVE))
    assert run.table["iteration"].to_list() == [100]
    assert run.table["loss"].to_list() == [2.6446]
    assert run.config["dtype"].value == "fp16"  # `FORCE FP16: True`, as the script shouts it


def test_bars_without_their_drawing_alone(tmp_path: Path) -> None:
    """The same bars with no dict are claimed (below a format's own markers) and read as one
    record per update (exit 3 before)."""
    bars = [line for line in COREWEAVE if "%" in line and "{" not in line]
    path = _log(tmp_path, bars)
    assert HfTrainerParser().detect(path) == 0.5
    assert choose(load_registry(), path) == "hf_trainer"
    assert HfTrainerParser().parse(path).table["iteration"].to_list() == [99, 101, 103]


# anselmlong/portfolio:public/blogs/almost-anselm.md@5483108d4cc1c9e0d4f598a3012504e8e7b5b182
# lines 316-318 (axolotl, Nov 2025): the last bar, then axolotl's logger lines on the same line.
AXOLOTL = [
    "100%|██████████| 1124/1124 [2:48:45<00:00, 16.34s/it][2025-11-06 11:25:06,763] [INFO]"
    " [axolotl.core.trainers.base._save:613] [PID:859953] [RANK:0] Saving model checkpoint to"
    " models/base/checkpoint-1124",
    "[2025-11-06 11:25:10,069] [INFO] [axolotl.train.save_trained_model:228] [PID:859953]"
    " [RANK:0] Training completed! Saving trained model to models/base.",
]


def test_a_last_bar_with_its_checkpoint_save(tmp_path: Path) -> None:
    """One bar update alone is nobody's; with the Trainer's `Saving model checkpoint to
    .../checkpoint-1124` at its count it is the Trainer's bar (exit 3 before): one record,
    10125 s over 1124 steps by the clock."""
    path = _log(tmp_path, AXOLOTL)
    assert choose(load_registry(), path) == "hf_trainer"
    run = HfTrainerParser().parse(path)
    assert run.table["iteration"].to_list() == [1124]
    assert run.table["step_time_s"].to_list() == pytest.approx([10125 / 1124])
    other = _log(tmp_path, [AXOLOTL[0].replace("checkpoint-1124", "checkpoint-1000")], "b.log")
    assert HfTrainerParser().detect(other) == 0.0


# skypilot-org/skypilot:llm/gpt-oss-finetuning/README.md@a2f08cfd1e818ce5a596697b58dedb1f97245161
# (TRL SFT of gpt-oss-20b): the final summary's runtime printed with its unit.
SKYPILOT_FINAL = (
    "{'train_runtime': 298.36s, 'train_samples_per_second': 3.352, 'train_steps_per_second':"
    " 0.054, 'train_loss': 2.086, 'epoch': 1.0}"
)


def test_a_runtime_printed_with_its_unit(tmp_path: Path) -> None:
    """`298.36s` is 298.36 seconds (it was dropped, and with it the only clock): a run of 16
    steps whose final metrics alone survive is one record at its average pace."""
    lines = ["***** Running training *****", "  Num examples = 1,000", SKYPILOT_FINAL]
    lines.insert(2, "  Total optimization steps = 16")
    path = _log(tmp_path, lines)
    dicts = scan(path)["dicts"]
    assert dicts.filter(key="train_runtime")["value"].to_list() == [298.36]
    run = HfTrainerParser().parse(path)
    assert run.table["iteration"].to_list() == [16]
    assert run.table["step_time_s"].to_list() == pytest.approx([298.36 / 16])


def _swift(step: int, total: int, elapsed: str) -> str:
    """A dict as ms-swift prints it: the Trainer's logs plus what add_train_message adds
    (modelscope/ms-swift:swift/trainers/callback.py@018a5488429212aefb166122ec2ab49888a1d724:
    `logs['global_step/max_steps'] = f'{state.global_step}/{state.max_steps}'`, the
    percentage `f'{train_percentage * 100:.2f}%'`, `format_time(elapsed)`)."""
    logs = {
        "loss": round(2.0 - step / 100, 8),
        "grad_norm": 1.5,
        "learning_rate": 1e-4,
        "epoch": round(step / total, 2),
        "global_step/max_steps": f"{step}/{total}",
        "percentage": f"{step / total * 100:.2f}%",
        "elapsed_time": elapsed,
        "remaining_time": "1m 2s",
    }
    return str(logs)


def test_ms_swift_step_counter(tmp_path: Path) -> None:
    """ms-swift's `'global_step/max_steps': '5/40'` is the dict's step, and 40 the run's
    total: a gap (steps 15-25 cut out) keeps the steps after it (numbered 1, 2, 3 before).
    Its elapsed time, `'1m 2s'`, reads as 62 s."""
    dicts = [_swift(5, 40, "5s"), _swift(10, 40, "10s"), _swift(30, 40, "1m 2s")]
    path = _log(tmp_path, dicts)
    run = HfTrainerParser().parse(path)
    assert run.table["iteration"].to_list() == [5, 10, 30]
    assert run.config["train_iters"].value == 40  # the counter's total
    elapsed = scan(path)["dicts"].filter(key="elapsed_time")["value"].to_list()
    assert elapsed == [5.0, 10.0, 62.0]
    assert scan(path)["dicts"].filter(key="percentage").height == 0  # text, not a number


# huggingface/accelerate:docs/source/usage_guides/megatron_lm.md
# @0413cf9f1551fbab7e25b911066fe27806905093 lines 277-307: accelerate's Megatron-LM plugin
# under the examples' custom loop (its logger `%(asctime)s - %(levelname)s - %(name)s -
# %(message)s`).
ACCELERATE = [
    " > padded vocab (size: 50257) with 175 dummy tokens (new size: 50432)",
    "10/10/2022 22:57:22 - INFO - __main__ - ***** Running training *****",
    "10/10/2022 22:57:22 - INFO - __main__ -   Num examples = 2318",
    "10/10/2022 22:57:22 - INFO - __main__ -   Total train batch size (w. parallel,"
    " distributed & accumulation) = 48",
    "10/10/2022 22:57:22 - INFO - __main__ -   Total optimization steps = 245",
    " 20%|████████████▍                                                 | 49/245"
    " [01:04<04:09,  1.27s/it]",
    " 10/10/2022 22:58:29 - INFO - __main__ - epoch 0: perplexity: 1222.1594275215962"
    " eval_loss: 7.10837459564209",
    " 40%|████████████████████████▊                                     | 98/245"
    " [02:10<03:07,  1.28s/it]",
]


def test_accelerate_megatron_plugin_run(tmp_path: Path) -> None:
    """The training block through an examples' logger is the Trainer's marker (0.9, above
    the padded-vocab line megatron claims at 0.3), and Megatron's padded vocabulary,
    printed by the plugin, is read."""
    path = _log(tmp_path, ACCELERATE)
    assert HfTrainerParser().detect(path) == 0.9
    assert choose(load_registry(), path) == "hf_trainer"
    result = CliRunner().invoke(main, ["summary", "-q", "--json", str(path)])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["run"]["model"]["padded_vocab_size"] == 50432
    assert doc["run"]["global_batch_size"] == 48
    assert (doc["iterations"]["first"], doc["iterations"]["last"]) == (49, 98)
