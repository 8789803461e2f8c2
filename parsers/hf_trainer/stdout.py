"""The Trainer's console output: the logged dicts, the `***** Running training *****` block,
tqdm bars (glued with `\\r`), PEFT's `trainable params` line, whatever the launcher prefix."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from loganalyzer import jsontext
from loganalyzer.endings import candidates as ending_candidates
from loganalyzer.parsers.deepspeed.lines import loss_scale_lines
from loganalyzer.textlog import clean, line_frames, split_glued, strip_launcher

CANDIDATES = (
    "{'",
    "it/s]",
    "s/it]",
    "Running training",
    " = ",
    "trainable params",
    "TrainOutput",
    "Continuing training from global step",
    "Saving model checkpoint to",
    "fp16",
    "FP16",
    "bf16",
    "BF16",
    "ixed precision",
    "ixed_precision",
    "padded vocab",
    "loss scale",
)
RESUME = r"Continuing training from global step (\d+)"
# The precision a run states: a TrainingArguments dump (`fp16=True,` one field a line, or all
# on one line in transformers < 4.7), a YAML config (`bf16: true`, axolotl), a launch
# command's flag (`--bf16`, `--bf16 True`, `--bf16=true \`), accelerate's
# `mixed_precision='fp16'` or its state's `Mixed precision type: bf16`. A flag set False,
# `auto`, or `fp16_full_eval=` says nothing. A launch script's own echo of its setting may
# shout it (`FORCE FP16: True`, coreweave's finetuner).
PRECISION = (
    r"(?:^|[\s,(-])(?:((?i:fp16|bf16))\s*[=:]\s*['\"]?(?:True|true)\b"
    r"|--(fp16|bf16)(?:[ =](?:True|true))?(?:\s+(?:--|\\$)|\s*$)"
    r"|(?:mixed_precision\s*[=:]\s*['\"]?|Mixed precision type:\s*)(fp16|bf16|fp8)\b)"
)
# A configuration transformers prints as its JSON (`PretrainedConfig.__repr__`), after
# whatever logger prefix: `Model config LlamaConfig {`, then the JSON's lines, then `}`.
CONFIG_START = r"(?:^|\s)([A-Z][A-Za-z0-9]*Config) \{$"
# Lines a printed configuration is read within (a model config has some 30 to 80).
CONFIG_LINES = 400
# Trainer._save_checkpoint's INFO line (`Saving model checkpoint to out/checkpoint-500`).
SAVE = r"Saving model checkpoint to .*checkpoint-(\d+)"

# Where a record starts inside a glued line: a launcher label, a dict, a tqdm bar, drawn
# (`  3%|▎  | 6/200 [`) or not: tqdm with `ncols=0` (a terminal of unknown width, as some log
# collectors give it) prints `l_bar[:-1] + r_bar[1:]`, `  4% 100/2238 [1:49:59<...]`.
TQDM_START = r"\s*\d{1,3}%(?:\||\s\d+/\d+ \[)"
RECORD_START = r"\[default\d+\]:|\[rank\d+\]:|\{'|" + TQDM_START

# pdsh prefixes a node's lines with `host: `; `trainer.train()`'s return value, printed (a
# notebook's cell), holds the final metrics: `TrainOutput(global_step=250, training_loss=1.37,
# metrics={'train_runtime': 335.085, ...})`.
DICT = r"^(?:[\w.-]+: |TrainOutput\(global_step=\d+, [^{]*metrics=)?\{'([\w/().%-]+)': "
# A key and its value as printed: a Python literal (`0.5`, transformers 5's `'0.3713'`), or
# what some loggers print in its place (`'train_runtime': 298.36s`, TRL examples).
PAIR = r"'([^']+)': ('[^']*'|[^,}'\s][^,}]*)"
# A duration a logger prints as text: `298.36s`, ms-swift's `'elapsed_time': '1h 7m 30s'`
# (its format_time, swift/utils/utils.py: f'{days}d {hours}h {minutes}m {seconds}s' past a
# day, then dropping the leading fields that are zero).
DURATION = r"^(?:(\d+)d\s*)?(?:(\d+)h\s*)?(?:(\d+)m\s*)?(?:(\d+(?:\.\d+)?)s)?$"
# ms-swift's step counter in every dict it logs: `'global_step/max_steps': '1/60'`.
STEP_OF_TOTAL = "global_step/max_steps"
# tqdm's `{n}/{total} [{elapsed}<{remaining}, {rate}]`: elapsed in whole seconds (`MM:SS`,
# `H:MM:SS` past an hour), the rate `{:5.2f}s/it` or `it/s` (`?it/s` before the first update).
BAR = r"(\d+)/(\d+) \[(?:(\d+):)?(\d+):(\d+)<[^,\]]*(?:,\s*([\d.]+)(s/it|it/s))?"
BLOCK = {
    "Num examples": "num_train_samples",
    "Num Epochs": "num_train_epochs",
    "Instantaneous batch size per device": "micro_batch_size",
    "Total train batch size (w. parallel, distributed & accumulation)": "global_batch_size",
    "Gradient Accumulation steps": "gradient_accumulation_steps",
    "Total optimization steps": "train_iters",
    "Number of trainable parameters": "trainable_params",
}
# The block's lines, after whatever logger prefix (`[INFO|trainer.py:2405] ... >> `,
# transformers 5's `[transformers] `).
BLOCK_LINE = r"(?:^|\s)(" + "|".join(re.escape(k) for k in BLOCK) + r") = ([\d,]+)\s*$"
PEFT = r"trainable params: ([\d,]+) \|\| all params: ([\d,]+)"
# Megatron-LM's tokenizer padding, printed where accelerate's Megatron-LM plugin builds the
# model under the Trainer's loop: `> padded vocab (size: 50257) with 175 dummy tokens (new
# size: 50432)`.
PADDED_VOCAB = r"padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (\d+)\)"
TRAIN_OUTPUT = r"^TrainOutput\(global_step=(\d+)"
# DeepSpeed's dynamic loss scaler under the Trainer (fp16): `[deepspeed] OVERFLOW! Rank 0
# Skipping step. Attempted loss scale: 64, reducing to 32` (often glued after a tqdm bar), the
# fp16 optimizers' `Reducing dynamic loss scale from 4096.0 to 2048.0`; each is one step
# skipped (`Increasing dynamic loss scale` is not).
SKIPPED_STEP = r"Skipping step|Reducing dynamic loss scale"


def scan(path: Path) -> dict[str, pl.DataFrame]:
    """The file's dict entries (long: entry order, launch, key, value), tqdm bars, facts."""
    found: dict[str, list[pl.DataFrame]] = {
        "dicts": [],
        "bars": [],
        "unreadable_bars": [],
        "facts": [],
        "starts": [],
        "resumes": [],
        "saves": [],
        "precision": [],
        "configs": [],
        "scales": [],
        "endings": [],
    }
    for frame in line_frames(path):
        found["configs"].append(_config_blocks(frame))
        found["endings"].append(ending_candidates(frame))
        lines = frame.filter(pl.col("text").str.contains_any(list(CANDIDATES)))
        # a log pasted into an indented block (Markdown, a quoted report) indents every line
        pieces = split_glued(lines, RECORD_START).with_columns(
            clean(strip_launcher(pl.col("text").str.strip_chars_start()))
            .str.strip_chars()
            .alias("text")
        )
        text = pl.col("text")
        found["starts"].append(
            pieces.filter(text.str.contains("***** Running training *****", literal=True)).select(
                "line", "piece"
            )
        )
        found["resumes"].append(
            pieces.select("line", "piece", step=text.str.extract(RESUME).cast(pl.Int64)).drop_nulls(
                "step"
            )
        )
        found["saves"].append(
            pieces.select("line", step=text.str.extract(SAVE).cast(pl.Int64)).drop_nulls("step")
        )
        found["precision"].append(_precision(pieces))
        found["dicts"].append(_dicts(pieces))
        bars = _bars(pieces)
        found["bars"].append(bars.filter("fits").drop("fits"))
        found["unreadable_bars"].append(bars.filter(~pl.col("fits")).select("line"))
        found["facts"].append(_facts(pieces))
        found["scales"].append(_scales(pieces))
    return {key: pl.concat(frames) for key, frames in found.items()}


def _scales(pieces: pl.DataFrame) -> pl.DataFrame:
    """DeepSpeed's lines of a skipped step: (line, the loss scale it left)."""
    skipped = pieces.filter(pl.col("text").str.contains(SKIPPED_STEP)).select("line", "text")
    scales: pl.DataFrame = loss_scale_lines(skipped).select("line", "scale_after")
    return scales


def _config_blocks(frame: pl.DataFrame) -> pl.DataFrame:
    """(line, name, json) of every configuration printed as JSON in the frame (a block cut
    by the frame's end, or not valid JSON, is not kept)."""
    text = clean(strip_launcher(pl.col("text"))).str.strip_chars_end()
    starts = (
        frame.filter(pl.col("text").str.contains("Config {", literal=True))
        .with_columns(name=text.str.extract(CONFIG_START))
        .drop_nulls("name")
    )
    rows: list[tuple[int, str, str]] = []
    first = frame["line"][0] if frame.height else 0
    for line, name, opening in starts.select("line", "name", text).iter_rows():
        body = frame.slice(line - first + 1, CONFIG_LINES).select(text)["text"].to_list()
        # the closing brace is indented as the opening line is (a log quoted in an indented
        # block indents both)
        end = opening[: len(opening) - len(opening.lstrip())] + "}"
        if end not in body:
            continue
        block = "{" + "\n".join(body[: body.index(end)]) + "}"
        try:
            jsontext.loads(block)
        except ValueError:
            continue
        rows.append((line, name, block))
    return pl.DataFrame(
        rows, schema={"line": pl.Int64, "name": pl.String, "json": pl.String}, orient="row"
    )


def _precision(pieces: pl.DataFrame) -> pl.DataFrame:
    """(line, dtype) of every line that states the run's precision."""
    m = pl.col("m").struct
    return (
        pieces.with_columns(m=pl.col("text").str.extract_groups(PRECISION))
        .select(
            "line", dtype=pl.coalesce(m.field("1"), m.field("2"), m.field("3")).str.to_lowercase()
        )
        .drop_nulls("dtype")
    )


def _dicts(pieces: pl.DataFrame) -> pl.DataFrame:
    dicts = pieces.filter(pl.col("text").str.contains(DICT))
    printed = pl.col("kv").struct.field("2")
    return (
        dicts.select("line", "piece", pair=pl.col("text").str.extract_all(PAIR))
        .explode("pair")
        .with_columns(kv=pl.col("pair").str.extract_groups(PAIR))
        .select(
            "line",
            "piece",
            key=pl.col("kv").struct.field("1"),
            value=_value(
                printed.str.strip_chars().str.strip_chars("'"), pl.col("kv").struct.field("1")
            ),
            # transformers 5 prints every float as a `.4g` string: 4 significant digits
            quoted=printed.str.starts_with("'"),
        )
        .drop_nulls(["key", "value"])
    )


def _value(text: pl.Expr, key: pl.Expr) -> pl.Expr:
    """A printed value as a number: a float, a duration in seconds (`298.36s`, `1h 7m 30s`),
    the count of ms-swift's `done/total` step counter; null for any other text."""
    duration = text.str.extract_groups(DURATION).struct
    days, hours, minutes, seconds = (
        duration.field(n).cast(pl.Float64, strict=False).fill_null(0) for n in "1234"
    )
    # only the whole text read as a duration is one, ending in its seconds as ms-swift and
    # TRL print it (the pattern alone matches the empty text too)
    timed = text.str.contains(DURATION) & text.str.contains(r"\ds$")
    return pl.coalesce(
        text.cast(pl.Float64, strict=False),
        pl.when(timed).then(days * 86400 + hours * 3600 + minutes * 60 + seconds),
        pl.when(key == STEP_OF_TOTAL).then(
            text.str.extract(r"^(\d+)/\d+$").cast(pl.Float64, strict=False)
        ),
    )


def _bars(pieces: pl.DataFrame) -> pl.DataFrame:
    """The bars printed (line, piece, n, total, elapsed_s, rate_s, rate_error), and `fits`:
    false where a number printed does not fit a 64-bit integer (the caller drops the bar and
    says so). A rate printed as 0 (`0.00s/it`, a step under 5 ms, or `0.00it/s`) is no rate."""
    m = pl.col("m").struct
    rate = m.field("6").cast(pl.Float64, strict=False)
    rate = pl.when((rate > 0) & rate.is_finite()).then(rate)
    whole = [m.field(n).cast(pl.Int64, strict=False) for n in "12345"]
    fits = pl.all_horizontal(
        [
            m.field(n).is_null() | m.field(n).cast(pl.Int64, strict=False).is_not_null()
            for n in "12345"
        ]
    )
    hours, minutes, seconds = (number.cast(pl.Float64) for number in whole[2:])
    return (
        pieces.with_columns(m=pl.col("text").str.extract_groups(BAR))
        .filter(m.field("1").is_not_null())
        .select(
            "line",
            "piece",
            n=whole[0],
            total=whole[1],
            elapsed_s=hours.fill_null(0) * 3600 + minutes * 60 + seconds,
            rate_s=pl.when(m.field("7") == "s/it").then(rate).otherwise(1 / rate),
            # printed to 2 decimals: the relative error of the rate
            rate_error=0.005 / rate,
            fits=fits,
        )
    )


def _facts(pieces: pl.DataFrame) -> pl.DataFrame:
    block = pieces.with_columns(m=pl.col("text").str.extract_groups(BLOCK_LINE)).filter(
        pl.col("m").struct.field("1").is_not_null()
    )
    peft = pieces.with_columns(m=pl.col("text").str.extract_groups(PEFT)).filter(
        pl.col("m").struct.field("1").is_not_null()
    )
    number = pl.col("value").str.replace_all(",", "").cast(pl.Int64, strict=False)
    return (
        pl.concat(
            [
                block.select(
                    "line",
                    key=pl.col("m").struct.field("1").replace_strict(BLOCK, return_dtype=pl.String),
                    value=pl.col("m").struct.field("2"),
                ),
                peft.select(
                    "line", key=pl.lit("peft_trainable_params"), value=pl.col("m").struct.field("1")
                ),
                peft.select(
                    "line", key=pl.lit("peft_all_params"), value=pl.col("m").struct.field("2")
                ),
                pieces.select(
                    "line",
                    key=pl.lit("padded_vocab_size"),
                    value=pl.col("text").str.extract(PADDED_VOCAB),
                ),
                # the steps `trainer.train()` returned, printed: `TrainOutput(global_step=250, ...`
                pieces.select(
                    "line",
                    key=pl.lit("global_step"),
                    value=pl.col("text").str.extract(TRAIN_OUTPUT),
                ),
                # ms-swift's counter states the run's total: `'global_step/max_steps': '5/16'`
                pieces.select(
                    "line",
                    key=pl.lit("train_iters"),
                    value=pl.col("text").str.extract(f"'{STEP_OF_TOTAL}': '\\d+/(\\d+)'"),
                ),
            ]
        )
        .select("line", "key", value=number)
        .drop_nulls("value")
    )
