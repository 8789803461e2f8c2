"""One chunk of a log's lines: which lines matter, and what each kind of line holds."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from loganalyzer.endings import candidates as ending_candidates
from loganalyzer.parsers.megatron.command import COMMAND_MARKS, command_facts
from loganalyzer.parsers.megatron.config import DEEPSPEED_BATCH_KEYS, changes_only
from loganalyzer.parsers.megatron.markers import CANDIDATES, GPU_MARKS
from loganalyzer.parsers.megatron.metrics import (
    EFFECTIVE_TFLOPS_MARK,
    checkpoint_saves,
    effective_tflops,
    memory_lines,
    timers,
    validation_lines,
)
from loganalyzer.parsers.megatron.records import iteration_records
from loganalyzer.parsers.megatron.template import read_fields
from loganalyzer.parsers.megatron.templated import take_reports
from loganalyzer.textlog import (
    clean,
    launcher_label,
    line_frames,
    split_glued,
    strip_launcher,
)

# Where a record starts, for splitting glued lines: an iteration line (with its timestamp),
# a per-rank memory line, a one-line timer report.
RECORD_START = (
    r"(?:\[\d{4}-\d\d-\d\d[ T][\d:.,]+[^\]]*\]\s*)?iteration\s+\d+\s*/\s*\d+\s*\|"
    r"|\[Rank \d+\] \(after|time \(ms\) \|"
)


# An argument's name and the dots before its value; the value is the rest of the line, sliced
# off rather than captured (capturing a long value costs a second per megabyte).
ARG_LINE = r"^  ([A-Za-z_]\w*) (?:\.+ |\s+)"

# An argument line outside a dump (its header and footer cut, or the lines pasted alone):
# `_print_args`' `'  {} {} {}'.format(arg, dots, value)`, at most two spaces before the name
# (copies lose them) and at least two dots; DeepSpeed's op report (`    cpu_adam ......
# [NO] ....... [OKAY]`, four spaces) and timer blocks (`name ....: (min, max)`) are not.
LOOSE_ARG_LINE = r"^ {0,2}([a-z_][a-z0-9_]*) \.{2,} "
LOOSE_ARG_MARK = ".. "
NOT_AN_ARG_VALUE = r"\.{3}"


@dataclass(frozen=True)
class Chunk:
    """What one chunk of lines yielded, before the file-level assembly."""

    records: pl.DataFrame  # one row per iteration line (copies not yet removed)
    extras: pl.DataFrame  # iteration-line fields without a column, with their iteration
    metrics: pl.DataFrame  # timers, memory, events: not yet tied to their iteration
    facts: pl.DataFrame  # arguments and start-up facts: (line, launch, key, value)
    keys: frozenset[str]  # every iteration-line field name seen
    endings: pl.DataFrame  # the lines that may say how the run ended (`endings.candidates`)


def stateful_frames(path: Path) -> Iterator[pl.DataFrame]:
    """Line chunks tagged with the launch and arguments state.

    The state (which launch, inside an arguments dump or not) is carried across chunks so
    a dump split between two chunks is still read whole. Only that state is computed here,
    in file order; everything else is done per chunk by `scan_chunk`, on the thread pool.
    """
    launch_offset = 0
    in_args = 0
    for frame in line_frames(path):
        text = frame["text"]
        # Most chunks hold no dump: one literal search rules both markers out.
        if not in_args and not text.str.contains("arguments --", literal=True).any():
            yield frame.with_columns(
                launch=pl.lit(launch_offset, dtype=pl.Int32), in_args=pl.lit(False)
            )
            continue
        start = text.str.contains("-- arguments --", literal=True)
        end = text.str.contains("-- end of arguments --", literal=True)
        depth = (start.cast(pl.Int32) - end.cast(pl.Int32)).cum_sum() + in_args
        launch = start.cast(pl.Int32).cum_sum() + launch_offset
        if frame.height:
            launch_offset = int(launch[-1])
            in_args = max(int(depth[-1]), 0)
        yield frame.with_columns(launch=launch, in_args=(depth > 0) & ~start)


def candidate_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """The lines this parser reads: cheap literal tests pick them, so the regular expressions
    only ever see those."""
    frame = rejoined(frame)
    return frame.filter(pl.col("in_args") | pl.col("text").str.contains(any_of(CANDIDATES)))


# A line that ends with a field's key, and one that starts with a number: its value. A
# number, not a launcher's label (`0:     forward-backward ...` under srun's `(min, max) time
# across ranks (ms):`): a digit run followed by a colon is no value.
ENDS_WITH_KEY = r":\s*$"
STARTS_WITH_VALUE = r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?:\s|\||$)"


def rejoined(frame: pl.DataFrame) -> pl.DataFrame:
    """The lines of a paste wrapped at a fixed width put back where a field's key ends one
    line and its value starts the next (`... | lm loss:` / `2.324108E+01 | loss scale:
    1024.0 | ...`; `... Effective Tera Flops per GPU:` / `0.21 and total parameters 29.998
    B`): Megatron never ends a line on a key, so such a line is read with the next one
    appended (at its own line number), and the next one not on its own. A wrap inside a
    value, or between two fields, cannot be told from a line's end and is not undone.

    Every line gets literal tests only; the patterns see the few lines that end in a colon
    and the line after each (a pattern over every line cost a fifth of the parse)."""
    text = pl.col("text")
    ending = text.str.ends_with(":") | text.str.ends_with(": ") | text.str.ends_with(":\t")
    ends = frame.select(pl.arg_where(ending)).to_series()
    ends = ends.filter(ends + 1 < frame.height)
    if ends.is_empty():
        return frame
    keyed = frame["text"].gather(ends).str.contains(ENDS_WITH_KEY)
    after = (ends + 1).filter(keyed)
    after = after.filter(frame["text"].gather(after).str.contains(STARTS_WITH_VALUE))
    if after.is_empty():
        return frame
    continues = pl.repeat(False, frame.height, eager=True).scatter(after, True)
    logical = (~continues).cum_sum().alias("logical")
    return (
        frame.with_columns(logical)
        .group_by("logical", maintain_order=True)
        .agg(pl.all().exclude("text").first(), text.str.join(" "))
        .select(frame.columns)
    )


def unlabelled(frame: pl.DataFrame) -> pl.DataFrame:
    """The lines without launcher labels and colour codes, with the rank and time stamp the
    labels gave."""
    text = pl.col("text")
    rank, stamp = launcher_label(text)
    return frame.with_columns(
        rank, stamp.alias("line_stamp"), clean(strip_launcher(text)).alias("text")
    )


def scan_chunk(lines: pl.DataFrame) -> Chunk:
    candidates = candidate_lines(lines)
    # Report lines in their run's usual shape are read whole; the rest field by field.
    taken = take_reports(candidates)
    if taken.lines.len():
        candidates = candidates.filter(~pl.col("line").is_in(taken.lines.implode()))
    frame = unlabelled(candidates)
    # A report line inside a dump is no argument: the dump's footer was cut off.
    frame = frame.with_columns(
        in_args=pl.col("in_args") & ~pl.col("text").str.contains("|", literal=True)
    )
    other = frame.filter(~pl.col("in_args"))
    args = pl.concat(
        [
            arguments(frame.filter(pl.col("in_args")), ARG_LINE),
            arguments(
                having(other, LOOSE_ARG_MARK),
                LOOSE_ARG_LINE,
                NOT_AN_ARG_VALUE,
            ),
        ]
    )
    # Relaunches print the same arguments again, and each rank its start-up lines: only a
    # change of a value is kept (`changes_only`).
    startup = having(
        other, "world size", "padded vocab", "parameters", *DEEPSPEED_BATCH_KEYS, *GPU_MARKS
    )
    # Most chunks have no start-up line: skip the dozen small selections that would find none.
    found = [args, startup_facts(startup)] if startup.height else [args]
    commands = having(other, *COMMAND_MARKS)
    if commands.height:
        found.append(command_facts(commands))
    facts = changes_only(pl.concat(found, how="diagonal_relaxed"))
    pieces = split_glued(other, RECORD_START)
    general = iteration_records(having(pieces, "iteration"))
    fields = read_fields(general)
    records = general.drop("rest").join(
        fields.wide, on=["line", "piece"], how="left", maintain_order="left"
    )
    extras = fields.extras
    if taken.records.height:
        records = pl.concat([records, taken.records], how="vertical_relaxed").sort("line", "piece")
    if taken.extras.height:
        extras = pl.concat([extras, taken.extras], how="vertical_relaxed").sort(
            "line", "piece", "position"
        )
    metrics = pl.concat(
        [
            taken.rows,
            timers(having(pieces, "time (ms)", ".:")),
            memory_lines(having(pieces, "memory (MB)")),
            checkpoint_saves(having(pieces, "saving checkpoint")),
            validation_lines(having(pieces, "validation")),
            effective_tflops(having(pieces, EFFECTIVE_TFLOPS_MARK)),
        ],
        how="diagonal_relaxed",
    )
    return Chunk(
        records=records,
        extras=extras.join(
            records.select("line", "piece", "launch", "iteration", record_key="key"),
            on=["line", "piece"],
            maintain_order="left",
        ).select(
            "line",
            "iteration",
            name=pl.col("printed").cast(pl.Categorical),
            value="value",
            rank=pl.lit(None, dtype=pl.Int32),
            copy_key=pl.struct("record_key", "printed").hash(),
        ),
        metrics=metrics,
        facts=facts,
        keys=fields.keys | taken.keys,
        endings=ending_candidates(lines),
    )


def arguments(frame: pl.DataFrame, pattern: str, refused: str | None = None) -> pl.DataFrame:
    """(line, launch, key, value) of the lines `pattern` (an argument's name in its group,
    then the dots) matches, but for those whose value the pattern `refused` finds in."""
    found = (
        frame.with_columns(head=pl.col("text").str.extract(f"({pattern})"))
        .select(
            "line",
            "launch",
            key=pl.col("head").str.extract(pattern),
            value=pl.col("text").str.slice(pl.col("head").str.len_chars()).str.strip_chars(),
        )
        .drop_nulls("key")
    )
    return found if refused is None else found.filter(~pl.col("value").str.contains(refused))


def having(frame: pl.DataFrame, *markers: str) -> pl.DataFrame:
    """The rows whose text contains any of the literal markers."""
    return frame.filter(pl.col("text").str.contains(any_of(markers)))


def any_of(markers: tuple[str, ...]) -> str:
    """A regular expression matching any of the literal markers. polars' `contains_any`
    gives the same answer but was measured up to 30x slower with six markers or more."""
    return "|".join(re.escape(marker) for marker in markers)


# The sizes the world-size line names, as printed (`data-parallel-size` or `data-parallel size`)
# and as the arguments are called. Megatron-LM and Megatron-DeepSpeed printed the line in
# at least seven wordings over the years (`arguments.py`): 2019's `using world size: W and
# model-parallel size: M`, 2020's `data-parallel-size`, `tensor-model-parallel size`,
# `pipeline-model-parallel size`, Megatron-DeepSpeed's added `sequence-parallel size`, then
# Megatron-LM's `context-parallel size`, `hierarchical context-parallel sizes` (a list) and
# `encoder-tensor-/encoder-pipeline-model-parallel size`, some with a comma missing between
# two of them (`context-parallel size: 1 tensor-model-parallel size: 1`,
# `hierarchical context-parallel sizes: Nonetensor-model-parallel size: 1`). So each size
# is read by its own name wherever it stands on the line, not by its place in a sequence.
WORLD_SIZES = {
    "world": "world_size",
    "model-parallel": "tensor_model_parallel_size",
    "data-parallel": "data_parallel_size",
    "sequence-parallel": "ds_sequence_parallel_size",
    "context-parallel": "context_parallel_size",
    "tensor-model-parallel": "tensor_model_parallel_size",
    "encoder-tensor-model-parallel": "encoder_tensor_model_parallel_size",
    "pipeline-model-parallel": "pipeline_model_parallel_size",
    "encoder-pipeline-model-parallel": "encoder_pipeline_model_parallel_size",
}


def world_size_facts(frame: pl.DataFrame) -> list[pl.DataFrame]:
    """Every size the `using world size: ...` line states, each by its printed name. A name
    preceded by `-` is the tail of a longer one (`model-parallel` in `tensor-model-parallel`),
    and `sizes:` (the hierarchical list) is not `size:`."""
    lines = frame.filter(pl.col("text").str.contains("using world size: ", literal=True))
    return [
        lines.select(
            "line",
            "launch",
            key=pl.lit(key),
            value=pl.col("text").str.extract(rf"(?:^|[^-]){re.escape(name)}[- ]size: (\d+)"),
        ).drop_nulls("value")
        for name, key in WORLD_SIZES.items()
    ]


# The device's name where a job script ran nvidia-smi into the log: a row of its table
# (`|   5  NVIDIA A100-SXM4-80GB          On  | 00000000:CA:00.0 Off |`; before 2022
# `|   0  Tesla V100-SXM2...  On   | 00000000:06:00.0 Off |`, the name cut at its column)
# or `nvidia-smi -L` (`GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-...)`).
GPU_NAME_LINES = (
    r"^\|\s+\d+\s+((?:NVIDIA|Tesla) \S.*?)\s+(?:On|Off)\s+\|\s+[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:",
    r"^GPU \d+: ((?:NVIDIA|Tesla) .+?) \(UUID: ",
)


def startup_facts(frame: pl.DataFrame) -> pl.DataFrame:
    """Start-up lines outside the arguments dump that state the world size, vocab, dtype,
    and the GPU nvidia-smi names."""
    text = pl.col("text")
    found = world_size_facts(frame)
    found.append(
        frame.select(
            "line",
            "launch",
            key=pl.lit("padded_vocab_size"),
            value=text.str.extract(
                r"padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (\d+)\)"
            ),
        ).drop_nulls("value")
    )
    found.append(
        frame.select(
            "line",
            "launch",
            key=pl.lit("params_dtype"),
            value=text.str.extract(r"^using (torch\.\w+) for parameters"),
        ).drop_nulls("value")
    )
    found.append(
        frame.select(
            "line",
            "launch",
            key=pl.lit("gpu_name"),
            value=pl.coalesce(text.str.extract(p) for p in GPU_NAME_LINES).str.strip_suffix("..."),
        ).drop_nulls("value")
    )
    # Megatron-DeepSpeed: the engine's config printout holds the global batch size that
    # 2021-era arguments (batch_size = micro batch) do not.
    for name in DEEPSPEED_BATCH_KEYS:
        found.append(
            frame.select(
                "line",
                "launch",
                key=pl.lit(f"deepspeed_{name}"),
                value=text.str.extract(rf"\b{name}\s+\.*\s*(\d+)\s*$"),
            ).drop_nulls("value")
        )
    return pl.concat(found)
