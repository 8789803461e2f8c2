"""Facts HF Trainer stdout states besides its dicts: the model's printed configuration and
the training's precision, each with its line.

The configuration block is written from transformers' own format: `logger.info(f"Model
config {config}")` with `PretrainedConfig.__repr__` = `f"{class name} {to_json_string()}"`
(JSON, indent 2, sorted keys), after the stdlib prefix of the example scripts
(`[INFO|configuration_utils.py:765] <time> >> `), with Meta-Llama-3-8B's public config.json
values; the GenerationConfig before it is printed the same way at load.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from loganalyzer.parsers.hf_trainer import HfTrainerParser

LLAMA3_8B = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "bos_token_id": 128000,
    "eos_token_id": 128001,
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 500000.0,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "vocab_size": 128256,
}
BAR_AND_DICT = " 10%|█         | 1/10 [00:02<00:18,  2.00s/it]{'loss': 2.0, 'epoch': 0.1}"


def _printed(name: str, config: dict[str, object], prefix: str = "") -> list[str]:
    body = json.dumps(config, indent=2, sort_keys=True).splitlines()
    return [f"{prefix}{name} {body[0]}", *body[1:]]


def _log(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "train.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("launcher", ["", "[default0]:"])
def test_printed_model_config_gives_the_shape(tmp_path: Path, launcher: str) -> None:
    info = "[INFO|configuration_utils.py:765] 2025-05-15 07:22:26,253 >> "
    generation = _printed("GenerationConfig", {"bos_token_id": 128000}, "Generate config ")
    model = _printed("LlamaConfig", LLAMA3_8B, info + "Model config ")
    lines = [launcher + line for line in [*generation, *model, BAR_AND_DICT]]
    run = HfTrainerParser().parse(_log(tmp_path, lines))
    facts = {
        key: run.get(key)
        for key in (
            "num_layers",
            "hidden_size",
            "ffn_hidden_size",
            "num_attention_heads",
            "num_query_groups",
            "vocab_size",
            "max_position_embeddings",
            "swiglu",
        )
    }
    assert facts == {
        "num_layers": 32,
        "hidden_size": 4096,
        "ffn_hidden_size": 14336,
        "num_attention_heads": 32,
        "num_query_groups": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 8192,
        "swiglu": True,
    }
    where = run.config["num_layers"].provenance
    assert (where.kind, where.line) == ("log", len(generation) + 1)


@pytest.mark.parametrize(
    ("line", "dtype"),
    [
        # TrainingArguments' dump, one field a line (transformers >= 4.7)
        ("bf16=True,", "bf16"),
        ("fp16=True,", "fp16"),
        # all on one line (transformers 4.x before it)
        ("TrainingArguments(output_dir='out', fp16=True, fp16_opt_level=O1)", "fp16"),
        # a YAML config printed at start (axolotl), and a TrainingArguments attribute list
        ("bf16: true", "bf16"),
        ("- fp16: True", "fp16"),
        # launch commands: Uliana666/AdaptorsResearch scripts/train_llama3_1b_test.sh and
        # saforem2/ezpz docs/examples/hf-trainer.md
        ("    --fp16 True \\", "fp16"),
        ("    --bf16=true \\", "bf16"),
        # accelerate: its launch flag and its state's repr
        ("accelerate launch --mixed_precision=bf16 --multi_gpu run_clm.py", "bf16"),
        ("Mixed precision type: fp16", "fp16"),
    ],
)
def test_stated_precision(tmp_path: Path, line: str, dtype: str) -> None:
    run = HfTrainerParser().parse(_log(tmp_path, ["bf16=False,", line, BAR_AND_DICT]))
    assert run.get("dtype") == dtype
    assert run.config["dtype"].provenance.line == 2


@pytest.mark.parametrize(
    "line",
    ["fp16=False,", "bf16_full_eval=True,", "bf16: auto", "--fp16 False", "fp16_backend=auto"],
)
def test_no_precision_from_what_states_none(tmp_path: Path, line: str) -> None:
    run = HfTrainerParser().parse(_log(tmp_path, [line, BAR_AND_DICT]))
    assert run.get("dtype") is None
