"""The plugin: detection, and one Run from an output_dir's trainer_state.json or from stdout."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import polars as pl

from loganalyzer import jsontext
from loganalyzer.endings import read_endings
from loganalyzer.errors import NothingReadError
from loganalyzer.flops.shape import shape_from_hf_config
from loganalyzer.model import ConfigValue, Provenance, Run, SourceInfo
from loganalyzer.parsers.hf_trainer import numbering, output_dir, stdout
from loganalyzer.parsers.hf_trainer.entries import (
    STEP_TIME_SOURCES,
    iteration_table,
    other_metrics,
    save_events,
    step_times,
    train_entries,
)
from loganalyzer.parsers.hf_trainer.facts import add_derived
from loganalyzer.sources import read_head, text_head

# A dict or the training block at the start of a line (indented as a pasted log may be, after
# a launcher or logger prefix, `%(name)s - %(message)s` as the examples' loggers print, or the
# progress bar it is glued to: `6/200 [00:05<02:51, 1.13it/s]{'loss': ...`), not quoted
# inside other text.
STDOUT_MARKERS = re.compile(
    r"(?:^[ \t]*|^[ \t]*[\w.-]+: |\]:|\] |>> | - |(?:it/s|s/it)\])"
    r"(?:\*\*\*\*\* Running training \*\*\*\*\*|\{'(?:loss|train_runtime|eval_loss)': "
    r"|TrainOutput\(global_step=\d)",
    re.M,
)
# One of these is in every match of STDOUT_MARKERS: found with `in` first, because the
# pattern, tried at every position of a 4 MB head, costs a tenth of a second per file.
STDOUT_LITERALS = (
    "***** Running training *****",
    "{'loss': ",
    "{'train_runtime': ",
    "{'eval_loss': ",
    "TrainOutput",
)
# The Trainer's training bar: tqdm with no description (`  3%|▎   | 6/200 [00:05<02:51, ...`),
# at the start of a line or after a carriage return (`\r`, or `^M` as text copied from a
# terminal shows it).
# tqdm with `ncols=0` prints no bar: `  4% 100/2238 [1:49:59<42:08:58, 70.97s/it]`.
BARE_BAR = re.compile(
    r"(?:^|\r|\^M)\s{0,3}\d{1,3}%(?:\|[^|\n\r]{0,200}\| *| )(\d+)/(\d+) \[\d", re.M
)
# Trainer._save_checkpoint's line: a bar's count that names a saved checkpoint is the
# Trainer's step (`| 1124/1124 [2:48:45<00:00, 16.34s/it]... checkpoint-1124`).
SAVED = re.compile(r"Saving model checkpoint to \S*checkpoint-(\d+)")
# A file of bars only (no dict, no training block) is claimed below the formats' own markers:
# a bar is the Trainer's only if nothing else claims the file.
BARS_ONLY_SCORE = 0.5
# The training block's first line under its banner (`  Num examples = 5,498`).
BLOCK_BODY = "Num examples = "
# A trainer_state.json saved under another name (a copy, an excerpt).
STATE_MARKER = re.compile(r'^\s*"log_history": \[', re.M)
FRAMEWORK = "hf-trainer"


class HfTrainerParser:
    """Hugging Face Trainer runs (the plugin API is in loganalyzer.plugin)."""

    name = "hf_trainer"
    description = "Hugging Face Trainer: output_dir trainer_state.json, and its stdout"
    # the releases whose real output the tests read (fixtures/hf_trainer, fixtures/corpus,
    # the shared generated runs)
    tested_on = (
        "transformers 4.7-dev with DeepSpeed ZeRO-3 (BigScience 2021)",
        "transformers 4.17 with DeepSpeed 0.6.1",
        "transformers 4.2x Seq2SeqTrainer",
        "transformers 4.5x",
        "transformers 4.57 (FSDP; 4.57.6 stdout and output_dir)",
        "transformers 5.23.0 (output_dir, PEFT 0.21.2 LoRA)",
        "TRL SFTTrainer 0.20+ and GRPOTrainer (DeepSpeed 0.15.4)",
        "axolotl (2025)",
        "accelerate with the Megatron-LM plugin (2022)",
    )

    def detect(self, path: Path) -> float:
        if path.name == output_dir.STATE:
            # Older checkpoint copies only fill what the newest lacks: one Run per output_dir.
            return 0.95 if path.is_file() and output_dir.is_newest_copy(path) else 0.0
        head = text_head(path, json_too=True)  # a trainer_state.json under another name
        if head is None:
            return 0.0
        if '"log_history": [' in head and STATE_MARKER.search(head):
            return 0.9
        if any(literal in head for literal in STDOUT_LITERALS) and _stdout_marker(head):
            return 0.9
        if "%" in head and (_advancing_bar(head) or _saved_at_bar(head)):
            return BARS_ONLY_SCORE
        return 0.0

    def parse(self, path: Path) -> Run:
        if path.name == output_dir.STATE or STATE_MARKER.search(read_head(path, 65536)):
            return _from_output_dir(path)
        return _from_stdout(path)


def _stdout_marker(head: str) -> bool:
    """A logged dict, or the training block with its lines: DeepSpeed-Chat prints the same
    `***** Running training *****` banner with none of the Trainer's lines under it."""
    for found in STDOUT_MARKERS.finditer(head):
        if "Running training" not in found.group(0) or BLOCK_BODY in head:
            return True
    return False


def _advancing_bar(head: str) -> bool:
    """Two updates of one bare progress bar: the same total, another count."""
    counts: dict[str, set[str]] = {}
    for match in BARE_BAR.finditer(head):
        seen = counts.setdefault(match.group(2), set())
        seen.add(match.group(1))
        if len(seen) > 1:
            return True
    return False


def _saved_at_bar(head: str) -> bool:
    """A bare bar's count that the Trainer's checkpoint save line names: one update (a log
    cut to its last lines) is the Trainer's bar when a checkpoint of that step was saved."""
    if "Saving model checkpoint to" not in head:
        return False
    counts = {match.group(1) for match in BARE_BAR.finditer(head)}
    return any(match.group(1) in counts for match in SAVED.finditer(head))


def _from_output_dir(path: Path) -> Run:
    source = str(path)
    root = output_dir.run_root(path)
    long, state, warnings = output_dir.log_entries(path)
    config = output_dir.state_config(state, source)
    shape, notes = output_dir.model_config(root)
    warnings.extend(notes)
    config.update(shape)
    config.update(output_dir.adapter_config(root))
    final, final_source = output_dir.results(root)
    train = train_entries(long)
    runtime = final.get("train_runtime")
    steps = state.get("global_step") if isinstance(state.get("global_step"), int) else None
    times, used = step_times(train, runtime, steps)
    if final_source is not None:
        for key, value in final.items():
            config.setdefault(
                f"final_{key}", ConfigValue(value, Provenance("config", final_source))
            )
    _tokens_per_step(train, config, source)
    _batch_from_rates(config, state, final, final_source)
    add_derived(config, source)
    saves = save_events(output_dir.checkpoint_saves(root))
    return _finish(config, train, long, times, used, source, warnings, saves)


def _from_stdout(path: Path) -> Run:
    source = str(path)
    found = stdout.scan(path)
    config: dict[str, ConfigValue] = {}
    for line, key, value in found["facts"].iter_rows():
        config.setdefault(key, ConfigValue(value, Provenance("log", source, line)))
    if "peft_trainable_params" in config:
        where = config["peft_trainable_params"].provenance
        config.setdefault("lora", ConfigValue(True, where))
        config["trainable_params"] = config["peft_trainable_params"]
    warnings_found = _precision(found["precision"], config, source)
    warnings_found += _printed_model_config(found["configs"], config, source)
    warnings_found += _unreadable_bars(found["unreadable_bars"], source)
    final = _final_metrics(numbering.numbered_entries(found, None).long)
    steps = _total(config) or _steps_from_rate(final)
    numbered = numbering.numbered_entries(found, steps, _steps_per_epoch(config))
    long, warnings = numbered.long, [*warnings_found, *numbered.notes]
    train = train_entries(long)
    times, used = step_times(train, final.get("train_runtime"), steps, printed=True)
    if used != "train_runtime_printed" and train.height:
        bar_times = _bar_times(found["bars"], train, steps)
        if bar_times is not None:
            times, used = bar_times, "tqdm"
    if train.height == 0 and numbering.training_bars(found["bars"], steps).height:
        train, times, used = _bar_records(found["bars"], steps)
    elif train.height == 0 and steps and final.get("train_runtime"):
        # Only the final metrics: one record for the whole run at its average pace.
        train = pl.DataFrame({"entry": [-1], "step": [steps], "line": [None]}).cast(
            {"line": pl.Int64}
        )
        times, used = pl.Series("step_time_s", [final["train_runtime"] / steps]), "average"
    if not found["dicts"].height and not found["bars"].height and not config:
        raise NothingReadError(
            f"{path}: no Trainer log dicts, progress bars or training block found"
        )
    flos = long.filter(pl.col("key") == "total_flos")
    if flos.height and steps:
        where = Provenance("log", source, flos["line"][0])
        config.setdefault("reported_total_flos", ConfigValue(flos["value"][0], where))
        config.setdefault("global_step", ConfigValue(steps, where))
    if numbered.numbered:
        _tokens_per_step(train, config, source)
    add_derived(config, source)
    saves = save_events(found["saves"].unique("step", keep="first", maintain_order=True), source)
    resolution = _printed_resolution(found["dicts"]) if used == "train_runtime_printed" else None
    run = _finish(config, train, long, times, used, source, warnings, saves, resolution)
    run.table = _with_skipped_steps(run.table, found["scales"])
    run.endings = read_endings([found["endings"]], source)
    return run


def _with_skipped_steps(table: pl.DataFrame, scales: pl.DataFrame) -> pl.DataFrame:
    """Each record's steps skipped by DeepSpeed's loss scaler (its lines after the record
    before and up to this one's) and the scale the last of them left, records after it
    keeping that scale. Only where every record has a line to count by."""
    if scales.height == 0 or table.height == 0 or table["line"].null_count():
        return table
    scales = scales.sort("line")
    found = (
        table.select(pl.int_range(pl.len()).alias("row"), "line")
        .sort("line")
        .join_asof(scales, on="line", strategy="backward")
    )
    # the scaler's lines up to each record's, by a search of their sorted line numbers
    upto = scales["line"].search_sorted(found["line"], side="right").cast(pl.Int64)
    found = found.with_columns(skipped=upto - upto.shift(1, fill_value=0)).sort("row")
    return table.with_columns(loss_scale=found["scale_after"], skipped_iterations=found["skipped"])


def _unreadable_bars(lines: pl.DataFrame, source: str) -> list[str]:
    """A warning for the progress bars left out: a number printed beyond a 64-bit integer."""
    if lines.height == 0:
        return []
    first = lines["line"].min()
    return [
        f"{source}: {lines.height} progress bar(s) with a number too large to read were not"
        f" used (the first at line {first!s})"
    ]


def _precision(found: pl.DataFrame, config: dict[str, ConfigValue], source: str) -> list[str]:
    """The precision the log states (its first statement, with its line), and a warning when
    it states two."""
    if found.height == 0:
        return []
    line, dtype = found.row(0)
    config["dtype"] = ConfigValue(dtype, Provenance("log", source, line))
    other = found.filter(pl.col("dtype") != dtype)
    if other.height == 0:
        return []
    return [
        f"{source}: line {line} states {dtype} and line {other['line'][0]}"
        f" {other['dtype'][0]}: {dtype} taken; pass --dtype if it is not the training's"
    ]


def _printed_model_config(
    configs: pl.DataFrame, config: dict[str, ConfigValue], source: str
) -> list[str]:
    """The model's shape from the first configuration block transformers printed that gives
    one (`Model config LlamaConfig {...}`; a GenerationConfig or a quantisation config does
    not), mapped to the run config's names as an output_dir's config.json is."""
    notes = []
    for line, name, text in configs.iter_rows():
        try:
            shape = shape_from_hf_config(jsontext.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            if '"num_hidden_layers"' in text or '"n_layer"' in text:
                notes.append(f"{source}:{line}: the printed {name}'s shape not read ({exc})")
            continue
        for key, value in output_dir.shape_facts(shape, Provenance("log", source, line)).items():
            config.setdefault(key, value)
        return []
    return notes


def _printed_resolution(dicts: pl.DataFrame) -> float | None:
    """The resolution of the cumulative train_runtime as transformers 5 prints it (`.4g`: 4
    significant digits, so 1 s from 1000 s on, 10 s from 10,000 s), at its largest value;
    None for the floats transformers 4 prints (rounded to 0.1 ms)."""
    runtime = dicts.filter((pl.col("key") == "train_runtime") & pl.col("quoted"))["value"]
    largest = runtime.max()
    if not isinstance(largest, float) or largest <= 0:
        return None
    return float(10 ** (math.floor(math.log10(largest)) - 3))


def _steps_per_epoch(config: dict[str, ConfigValue]) -> float | None:
    """Optimizer steps per epoch from the training block, as the Trainer counts its epoch:
    the dataloader's batches per rank (`ceil(ceil(examples / ranks) / per-device batch)`,
    the sampler pads every rank to the same share) over the accumulation steps; without the
    per-device figures, examples / total batch."""
    values = {k: v.value for k, v in config.items()}
    examples, total = values.get("num_train_samples"), values.get("global_batch_size")
    micro, accumulation = values.get("micro_batch_size"), values.get("gradient_accumulation_steps")
    if not isinstance(examples, int) or not isinstance(total, int) or total <= 0:
        return None
    if isinstance(micro, int) and isinstance(accumulation, int) and micro * accumulation:
        ranks, rest = divmod(total, micro * accumulation)
        if ranks and not rest:
            return math.ceil(math.ceil(examples / ranks) / micro) / accumulation
    return examples / total


def _batch_from_rates(
    config: dict[str, ConfigValue],
    state: dict[str, Any],
    final: dict[str, float],
    final_source: str | None,
) -> None:
    """The global batch of a run bounded by max_steps: the Trainer then counts max_steps x
    batch samples, so batch = train_samples_per_second x train_runtime / max_steps. A run
    bounded by epochs (it ends on a whole epoch) counts the dataset instead: nothing said.
    The figure must be a whole number within the printed values' rounding."""
    samples, runtime = final.get("train_samples_per_second"), final.get("train_runtime")
    steps, epoch, epochs = state.get("max_steps"), state.get("epoch"), state.get("num_train_epochs")
    if "global_batch_size" in config or not samples or not runtime or not isinstance(steps, int):
        return
    if not isinstance(epoch, (int, float)) or not isinstance(epochs, (int, float)):
        return
    if steps <= 0 or epoch >= epochs:
        return
    batch = samples * runtime / steps
    rounding = (0.0005 / samples + 0.00005 / runtime) * batch * 2
    if abs(batch - round(batch)) <= rounding and round(batch) >= 1:
        config["global_batch_size"] = ConfigValue(
            round(batch),
            Provenance(
                "derived",
                f"train_samples_per_second x train_runtime / max_steps ({final_source})",
            ),
        )


def _total(config: dict[str, ConfigValue]) -> int | None:
    """The run's optimisation steps: the training block's total, else TrainOutput's."""
    for key in ("train_iters", "global_step"):
        found = config.get(key)
        if found is not None and isinstance(found.value, int):
            return found.value
    return None


def _steps_from_rate(final: dict[str, float]) -> int | None:
    """The steps of a run whose final metrics alone survive: the one whole number whose rate
    over train_runtime rounds (to 3 decimals, as printed) to train_steps_per_second."""
    runtime, rate = final.get("train_runtime"), final.get("train_steps_per_second")
    if not runtime or not rate:
        return None
    low, high = math.ceil((rate - 0.0005) * runtime), math.floor((rate + 0.0005) * runtime)
    fits = [n for n in range(max(low, 1), high + 1) if round(n / runtime, 3) == rate]
    return fits[0] if len(fits) == 1 else None


def _final_metrics(long: pl.DataFrame) -> dict[str, float]:
    """The first final-metrics entry (`train_runtime` without a `loss`); every rank may
    print its own copy."""
    finals = long.filter(pl.col("key") == "train_runtime")
    train = long.filter(pl.col("key") == "loss")["entry"]
    finals = finals.filter(~pl.col("entry").is_in(train.implode()))
    if finals.height == 0:
        return {}
    entry = long.filter(pl.col("entry") == finals["entry"][0])
    return dict(zip(entry["key"].to_list(), entry["value"].to_list(), strict=True))


def _bar_times(bars: pl.DataFrame, train: pl.DataFrame, steps: int | None) -> pl.Series | None:
    """Seconds per step between the training bar's updates at consecutive logs' steps (the
    update at the step, else the last before it)."""
    main = numbering.training_bars(bars, steps).unique("n", keep="first", maintain_order=True)
    if main.height == 0:
        return None
    at = (
        train.select("step", row=pl.int_range(pl.len()))
        .sort("step")
        .join_asof(
            main.select("n", "elapsed_s", "rate_s", "rate_error").sort("n"),
            left_on="step",
            right_on="n",
            strategy="backward",
        )
        .sort("row")
    )
    times = at.select(_tqdm_seconds().alias("t")).to_series()
    return None if times.null_count() == times.len() else times.alias("step_time_s")


def _bar_records(bars: pl.DataFrame, steps: int | None) -> tuple[pl.DataFrame, pl.Series, str]:
    """Without logged dicts, one record per training-bar update."""
    main = (
        numbering.training_bars(bars, steps)
        .unique("n", keep="first", maintain_order=True)
        .sort("line", "piece")
    )
    train = main.select("line", step="n", entry=pl.int_range(pl.len(), dtype=pl.Int64))
    return train, main.select(_tqdm_seconds()).to_series(), "tqdm"


def _tqdm_seconds() -> pl.Expr:
    """Seconds per step over the steps since the bar update before (`n`, `elapsed_s`,
    `rate_s`, `rate_error` columns). tqdm prints its elapsed clock in whole seconds, so a
    difference of two readings is right to a second over the record; its rate (`{:5.2f}s/it`
    or `it/s`) is an exponential average over the last updates (smoothing 0.3) on a fine
    clock, to its two decimals. The rate is taken where the elapsed clock agrees with it
    within the clock's resolution (a steady record, which the whole seconds would quantise);
    the elapsed difference where it does not (a stall, which the average would smear over
    the records after it)."""
    gap = pl.col("n") - pl.col("n").shift(1)
    covered = pl.when(gap > 0).then(gap).otherwise(pl.col("n"))
    elapsed = pl.when(gap > 0).then(pl.col("elapsed_s") - pl.col("elapsed_s").shift(1))
    clock = elapsed.otherwise(pl.col("elapsed_s")) / covered
    rate = pl.col("rate_s")
    agrees = ((clock - rate) * covered).abs() <= 1.0 + pl.col("rate_error") * rate * covered
    return pl.when(rate.is_not_null() & agrees).then(rate).otherwise(clock).alias("step_time_s")


def _tokens_per_step(train: pl.DataFrame, config: dict[str, ConfigValue], source: str) -> None:
    """Tokens per optimizer step from the cumulative `num_input_tokens_seen` (constant over
    the run, or nothing is said)."""
    if "num_input_tokens_seen" not in train.columns or train.height < 2:
        return
    per_step = train.select(
        (pl.col("num_input_tokens_seen").diff() / pl.col("step").diff()).alias("t")
    )["t"]
    per_step = per_step.filter(per_step.is_finite())  # a step logged twice divides by 0
    if per_step.len() and per_step.min() == per_step.max():
        value = per_step[0]
        config["tokens_per_step"] = ConfigValue(
            int(value), Provenance("derived", f"num_input_tokens_seen in {source}")
        )


def _finish(
    config: dict[str, ConfigValue],
    train: pl.DataFrame,
    long: pl.DataFrame,
    times: pl.Series | None,
    used: str | None,
    source: str,
    warnings: list[str],
    saves: pl.DataFrame,
    resolution: float | None = None,
) -> Run:
    config["framework"] = ConfigValue(FRAMEWORK, Provenance("log", source))
    if used is not None:
        config["step_time_source"] = ConfigValue(used, Provenance("derived", source))
        warnings.append(f"{source}: step times from {STEP_TIME_SOURCES[used]}")
    elif train.height:
        warnings.append(
            f"{source}: step times unknown: no train_runtime in the logged entries, no"
            " progress bar and no final metrics"
        )
    table = iteration_table(train, times, source)
    return Run(
        framework=FRAMEWORK,
        config=config,
        table=table,
        metrics=pl.concat([other_metrics(long, train, source), saves]),
        sources=[
            SourceInfo(
                source,
                HfTrainerParser.name,
                table.height,
                # tqdm's elapsed clock prints whole seconds (see _tqdm_seconds)
                clock_resolution_s=1.0 if used == "tqdm" else resolution,
            )
        ],
        warnings=warnings,
    )
