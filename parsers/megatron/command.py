"""A launch command echoed into the log (`python pretrain_gpt.py --num-layers 24 ...`, or
`torchrun ... pretrain_gpt.py ...` over lines continued with ` \\`): its options are the
run's arguments, each with the line it was read from.

Only options after the script (`*.py`) are the script's: the launcher's own (`--nnodes`)
come before it. A command pasted from a terminal may be wrapped at its width, cutting an
option or value in two (`--global-bat` / `ch-size 96`): a line whose next line starts
mid-token (and does not end in ` \\`) loses its last option, and the next line the fragment,
rather than give a value that may be cut short (`--save-interval 20` / `0 ...`).
"""

from __future__ import annotations

import re
import shlex

import polars as pl

# The script's token: `pretrain_gpt.py`, `/path/to/pretrain_gpt_alcf.py` (not `file.py:12:`).
SCRIPT = re.compile(r"(?:^|\s)\S*\.py(?=\s|$)")
# Options echoed under their shell array's name (`echo "MODEL_ARGS: ${MODEL_ARGS[@]}"`, as
# in scripts built on Megatron-LM's examples' GPT_MODEL_ARGS, TRAINING_ARGS, ... arrays):
# `MODEL_ARGS: --disable-bias-linear --seq-length 2048 ...`. Anchored: searched along a long
# line of spaces or letters, an unanchored `\s*`/`\w*` would be tried from every position.
LABEL = re.compile(r"^\s*[A-Za-z_]\w*:\s+--[A-Za-z]")
# torchrun's own options, which an echoed `DISTRIBUTED_ARGS: --nproc_per_node 8 ...` states
# with no script before them to tell them apart; none is a Megatron argument.
LAUNCHER_OPTIONS = frozenset(
    {
        "nproc_per_node",
        "nnodes",
        "node_rank",
        "master_addr",
        "master_port",
        "rdzv_backend",
        "rdzv_endpoint",
        "rdzv_id",
        "standalone",
        "max_restarts",
        "monitor_interval",
    }
)
OPTION = re.compile(r"--([A-Za-z][\w-]*)(?:=(.*))?")
# Lines that may belong to a command: options after a space or at the start, or the script's
# line continued with ` \` (`torchrun ... \` / `pretrain_gpt.py \` / `--num-layers 24 \`).
COMMAND_LINE = r"(?:^|\s)--[A-Za-z]|\\\s*$"
# The literal marks of those lines (cheap to test before the pattern).
COMMAND_MARKS = ("--", "\\")
# Where the command ends: a pipe, a redirection, the next command.
ENDS = frozenset({"|", "|&", ">", ">>", "2>&1", "&&", "||", ";", "&"})

FACT_SCHEMA = {"line": pl.Int64, "launch": pl.Int32, "key": pl.String, "value": pl.String}


def command_facts(frame: pl.DataFrame) -> pl.DataFrame:
    """(line, launch, key, value) of the options of every command in `frame`'s lines (line,
    launch, text: launcher labels removed), with `command` True."""
    lines = frame.filter(pl.col("text").str.contains(COMMAND_LINE)).select("line", "launch", "text")
    rows: list[tuple[int, int, str, str]] = []
    for block in _blocks(lines.rows()):
        rows.extend(_options(block))
    return pl.DataFrame(rows, schema=FACT_SCHEMA, orient="row").with_columns(command=pl.lit(True))


def _blocks(
    lines: list[tuple[int, int, str]],
) -> list[list[tuple[int, int, str]]]:
    """Runs of consecutive lines, each cut to start at its script's line (or, for options
    pasted alone, its first line if that starts with an option or an array's label); runs
    with neither dropped."""
    runs: list[list[tuple[int, int, str]]] = []
    for row in lines:
        if runs and runs[-1][-1][0] == row[0] - 1:
            runs[-1].append(row)
        else:
            runs.append([row])
    blocks = []
    for run in runs:
        start = next((i for i, (_, _, text) in enumerate(run) if SCRIPT.search(text)), None)
        if start is None and (run[0][2].lstrip().startswith("--") or LABEL.match(run[0][2])):
            start = 0
        if start is not None:
            blocks.append(run[start:])
    return blocks


def _options(block: list[tuple[int, int, str]]) -> list[tuple[int, int, str, str]]:
    """The options of one command, each at its line; a cut one left out (see the module)."""
    found: list[tuple[int, int, str, str]] = []
    for index, (line, launch, text) in enumerate(block):
        script = SCRIPT.search(text) if index == 0 else None
        tokens = _words(text[script.end() :] if script else text)
        continued = bool(tokens) and tokens[-1] == "\\"
        following = block[index + 1][2].split() if index + 1 < len(block) else []
        cut = not continued and bool(following) and not following[0].startswith("--")
        options, ended = _read(tokens, cut)
        found.extend((line, launch, key, value) for key, value in options)
        if ended:
            break
    # an option given twice takes its last value, as argparse does
    last = {key: (line, launch, key, value) for line, launch, key, value in found}
    return sorted(last.values())


def _words(text: str) -> list[str]:
    """The shell words of one line of a command: quotes removed as the shell removes them
    (`--num-layers "24"`, `--seq-length='2048'`), a continuation ` \\` kept as the last word;
    a line whose quotes do not close (a string the next line goes on with) split on white
    space."""
    body = text.rstrip()
    continued = body.endswith("\\")
    if continued:
        body = body[:-1]
    try:
        words = shlex.split(body)
    except ValueError:
        words = body.split()
    return [*words, "\\"] if continued else words


def _read(tokens: list[str], cut: bool) -> tuple[list[tuple[str, str]], bool]:
    """(key, value) of each `--option [value ...]` among `tokens` (a flag's value "True"), and
    whether the command ended on this line; the last option left out when the line is `cut`.
    Tokens before the first option are a fragment of the line before; an option whose value
    names a shell variable (`$TP`) states nothing."""
    options: list[tuple[str, str | None]] = []
    for token in tokens:
        if token in ENDS:
            return _stated(options), True
        if token == "\\":
            continue
        option = OPTION.fullmatch(token)
        if option:
            options.append((option[1].replace("-", "_"), option[2]))
        elif options:
            key, value = options[-1]
            options[-1] = (key, token if value is None else f"{value} {token}")
    return _stated(options[:-1] if cut else options), False


def _stated(options: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    return [
        (key, "True" if value is None else value)
        for key, value in options
        if (value is None or "$" not in value) and key not in LAUNCHER_OPTIONS
    ]
