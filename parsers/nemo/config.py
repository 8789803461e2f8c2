"""The config NeMo prints, read as dotted paths and named as the FLOPs formula names them.

What is read:
- the YAML dumps: NeMo 1's hydra config (``logging.info("\\n\\n************** Experiment
  configuration ***********")`` then ``logging.info(f'\\n{OmegaConf.to_yaml(cfg)}')``, the
  YAML indented by NeMo's logger under a ``[NeMo I ... script:N]`` line) and
  Megatron-Bridge's ``------- Task Configuration -------`` (its ConfigContainer as YAML);
- start-up lines: NeMo 1's ``Padded vocab_size: 32000, original vocab_size: 32000, dummy
  tokens: 0.``, Lightning's ``Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8``,
  and gloo's ``[Gloo] Rank 0 is connected to 7 peer ranks.`` (its largest group is the world);
- Megatron-Bridge's ``Step Time : 4.65s GPU utilization: 59892.5TFLOP/s/GPU``
  (``...MODEL_TFLOP/s/GPU`` in later releases): its own TFLOPS per GPU.

A dump is a few hundred lines printed once per launch: its lines are picked in the chunk
scan with polars, and only they are walked in Python to rebuild their nesting.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import polars as pl

from loganalyzer.model import ConfigValue, Provenance
from loganalyzer.textlog import clean, strip_launcher

# The lines that open a dump: its YAML starts within the next few lines.
DUMP_MARKS = ("Experiment configuration ***", "------- Task Configuration -------")
DUMP_STARTS_WITHIN = 3

# A YAML mapping line (`  key: value`, `  key:`) or list item (`  - x`) of an OmegaConf dump,
# after any launcher label; NeMo's logger indents a message's continuation lines.
YAML_LINE = r"^(\s*)(?:([A-Za-z_][\w.\-]*):(?:\s+(.*?))?|(- .*))\s*$"

PADDED_VOCAB = r"Padded vocab_size: (\d{1,12}), original vocab_size: (\d{1,12})"
LIGHTNING_MEMBERS = r"Initializing distributed: GLOBAL_RANK: \d+, MEMBER: \d+/(\d{1,9})"
GLOO_PEERS = r"\[Gloo\] Rank \d+ is connected to (\d{1,9}) peer ranks"
BRIDGE_STEP = r"Step Time : (\d+(?:\.\d+)?)s GPU utilization: (\d+(?:\.\d+)?)(?:MODEL_)?TFLOP/s/GPU"

STARTUP_MARKS = (
    "Padded vocab_size: ",
    "Initializing distributed: ",
    "[Gloo] Rank ",
    "Step Time : ",
)


def dump_lines(frame: pl.DataFrame) -> pl.DataFrame:
    """The chunk's dump markers and YAML-shaped lines: (line, mark, indent, key, value);
    which of them form a dump is settled over the whole file (`dumps`)."""
    text = clean(strip_launcher(pl.col("text")))
    lines = frame.select("line", text=text)
    marks = lines.filter(pl.col("text").str.contains_any(list(DUMP_MARKS))).select(
        "line", mark=pl.lit(True), indent=pl.lit(None, pl.Int32), key=None, value=None
    )
    found = lines.with_columns(parts=pl.col("text").str.extract_groups(YAML_LINE)).filter(
        pl.col("parts").struct.field("1").is_not_null()
    )
    part = pl.col("parts").struct.field
    yaml = found.select(
        "line",
        mark=pl.lit(False),
        indent=part("1").str.len_chars().cast(pl.Int32),
        key=part("2"),
        value=pl.coalesce(part("3"), pl.when(part("4").is_not_null()).then(pl.lit("-"))),
    )
    return pl.concat(
        [
            marks.cast({"key": pl.String, "value": pl.String}),
            yaml,
        ]
    )


def dumps(rows: pl.DataFrame) -> list[pl.DataFrame]:
    """The dumps: after each marker, the run of consecutive YAML lines that starts within
    `DUMP_STARTS_WITHIN` lines of it (the logger's own line comes between)."""
    rows = rows.sort("line").unique("line", keep="first", maintain_order=True)
    marks = rows.filter(pl.col("mark")).get_column("line").to_list()
    yaml = rows.filter(~pl.col("mark"))
    found = []
    for mark in marks:
        after = yaml.filter(pl.col("line") > mark)
        if after.height == 0 or after.item(0, "line") > mark + DUMP_STARTS_WITHIN:
            continue
        run = (pl.col("line").diff().fill_null(1) != 1).cum_sum()
        found.append(after.filter(run == 0))
    return found


def dotted(dump: pl.DataFrame) -> dict[str, tuple[str, int]]:
    """A dump's scalar values by dotted path (`model.num_layers`), with their line; list
    items are left out. A walk over the dump's few hundred lines, not over the log."""
    base = dump.get_column("indent").min()
    assert isinstance(base, int)
    stack: list[tuple[int, str]] = []
    values: dict[str, tuple[str, int]] = {}
    for line, indent, key, value in dump.select("line", "indent", "key", "value").iter_rows():
        if key is None:  # a list item
            continue
        depth = indent - base
        while stack and stack[-1][0] >= depth:
            stack.pop()
        path = ".".join([*(k for _, k in stack), key])
        if value is None or value == "":
            stack.append((depth, key))
        else:
            values[path] = (value, line)
    return values


def startup_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The chunk's start-up facts and Bridge's step reports: (line, key, value) as text."""
    text = clean(strip_launcher(pl.col("text")))
    lines = frame.filter(pl.col("text").str.contains_any(list(STARTUP_MARKS))).select(
        "line", text=text
    )
    text = pl.col("text")
    found = [
        lines.select("line", key=pl.lit(key), value=text.str.extract(pattern, group))
        for key, pattern, group in (
            ("padded_vocab_size", PADDED_VOCAB, 1),
            ("vocab_size", PADDED_VOCAB, 2),
            ("lightning_world_size", LIGHTNING_MEMBERS, 1),
            ("gloo_peers", GLOO_PEERS, 1),
            ("bridge_step_time_s", BRIDGE_STEP, 1),
            ("bridge_tflops_per_gpu", BRIDGE_STEP, 2),
        )
    ]
    return pl.concat(found).drop_nulls("value")


# Dump paths that name a fact the formula reads, in order of preference: the first present
# wins. NeMo 1's hydra config (`model.encoder_seq_length`, `trainer.devices`), Megatron-
# Bridge's ConfigContainer (`train.global_batch_size`, `dataset.sequence_length`).
PATHS: dict[str, tuple[str, ...]] = {
    "num_layers": ("model.num_layers",),
    "hidden_size": ("model.hidden_size",),
    "ffn_hidden_size": ("model.ffn_hidden_size",),
    "num_attention_heads": ("model.num_attention_heads",),
    "num_query_groups": ("model.num_query_groups",),
    "kv_channels": ("model.kv_channels",),
    # the tokens a sample holds: the dataset's, where the model's may be its maximum
    "seq_length": ("dataset.sequence_length", "model.seq_length", "model.encoder_seq_length"),
    "max_position_embeddings": ("model.max_position_embeddings",),
    "vocab_size": ("model.vocab_size", "tokenizer.vocab_size"),
    "make_vocab_size_divisible_by": ("model.make_vocab_size_divisible_by",),
    "num_experts": ("model.num_moe_experts",),
    "moe_router_topk": ("model.moe_router_topk",),
    "moe_ffn_hidden_size": ("model.moe_ffn_hidden_size",),
    "moe_shared_expert_intermediate_size": ("model.moe_shared_expert_intermediate_size",),
    "moe_layer_freq": ("model.moe_layer_freq",),
    "global_batch_size": ("train.global_batch_size", "model.global_batch_size"),
    "micro_batch_size": ("train.micro_batch_size", "model.micro_batch_size"),
    "train_iters": ("train.train_iters", "trainer.max_steps"),
    "log_interval": ("logger.log_interval",),
    "tensor_model_parallel_size": ("model.tensor_model_parallel_size",),
    "pipeline_model_parallel_size": ("model.pipeline_model_parallel_size",),
    "context_parallel_size": ("model.context_parallel_size",),
    "expert_model_parallel_size": ("model.expert_model_parallel_size",),
    "add_bias_linear": ("model.add_bias_linear", "model.bias"),
    "normalization": ("model.normalization",),
    "position_embedding_type": ("model.position_embedding_type",),
    "recompute_granularity": (
        "model.recompute_granularity",
        "model.activations_checkpoint_granularity",
    ),
}

# A dump's value at a dotted path, typed, with where it was printed; None when not printed.
Lookup = Callable[[str], "tuple[object, Provenance] | None"]

INTERPOLATION = re.compile(r"^\$\{([\w.]+)\}$")

# Lightning's `trainer.precision` values, and what they train in.
PRECISIONS = {
    "bf16": "bf16",
    "bf16-mixed": "bf16",
    "bf16-true": "bf16",
    "16": "fp16",
    "16-mixed": "fp16",
    "16-true": "fp16",
    "32": "fp32",
    "32-true": "fp32",
}

# NeMo 1's `model.activation` values that are gated linear units (the formula's swiglu).
GATED = {"swiglu", "fast-swiglu", "geglu", "fast-geglu", "reglu", "fast-reglu"}


def _typed(raw: str) -> object:
    """A YAML scalar as Python: null, a bool, an int, a float, or the text unquoted."""
    text = raw.strip()
    if text in ("null", "~", "None"):
        return None
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text.strip("'\"")


def dump_config(
    values: dict[str, tuple[str, int]], source: str
) -> tuple[dict[str, ConfigValue], list[str]]:
    """The run config a dump states, named like Megatron-LM's arguments, and notes on what
    was chosen between two statements of one fact."""
    config: dict[str, ConfigValue] = {}
    notes: list[str] = []

    def stated(path: str) -> tuple[object, Provenance] | None:
        if path not in values:
            return None
        raw, line = values[path]
        # an unresolved interpolation (`${model.global_batch_size}`, a dump printed before
        # OmegaConf.resolve) stands for the value at the path it names
        reference = INTERPOLATION.match(raw)
        if reference is not None and reference.group(1) in values:
            raw = values[reference.group(1)][0]
        return _typed(raw), Provenance("log", source, line)

    for key, paths in PATHS.items():
        for path in paths:
            found = stated(path)
            if found is not None and found[0] is not None:
                config[key] = ConfigValue(found[0], found[1])
                break
    _sequence_note(stated, notes)
    _precision(stated, config)
    _gated(stated, config)
    _vocabulary(stated, config)
    _recompute(config)
    _world(stated, config)
    groups = config.get("num_query_groups")
    if groups is not None and isinstance(groups.value, int):
        # Megatron reads num_query_groups only with group_query_attention set
        config["group_query_attention"] = ConfigValue(True, groups.provenance)
    return config, notes


def _sequence_note(stated: Lookup, notes: list[str]) -> None:
    """Megatron-Bridge prints the model's sequence length and the dataset's: the dataset's
    is the length trained (a model's may be its longest); say so where they differ."""
    model, data = stated("model.seq_length"), stated("dataset.sequence_length")
    if model is None or data is None or model[0] == data[0]:
        return
    notes.append(
        f"sequence length: the dataset's {data[0]} ({data[1]}) is used, not the model's"
        f" {model[0]} ({model[1]}); Megatron-Bridge's own TFLOPS figure counts the model's"
    )


def _precision(stated: Lookup, config: dict[str, ConfigValue]) -> None:
    """dtype from Bridge's `mixed_precision` (fp8 set, else bf16/fp16 true) or Lightning's
    `trainer.precision`."""
    for path in ("mixed_precision.fp8", "model.fp8"):
        found = stated(path)
        if found is not None and found[0] not in (None, False):
            config["dtype"] = ConfigValue("fp8", found[1])
            return
    for path, dtype in (("mixed_precision.bf16", "bf16"), ("mixed_precision.fp16", "fp16")):
        found = stated(path)
        if found is not None and found[0] is True:
            config["dtype"] = ConfigValue(dtype, found[1])
            return
    found = stated("trainer.precision")
    if found is not None and str(found[0]) in PRECISIONS:
        config["dtype"] = ConfigValue(PRECISIONS[str(found[0])], found[1])


def _gated(stated: Lookup, config: dict[str, ConfigValue]) -> None:
    """swiglu from Bridge's `gated_linear_unit` or NeMo 1's `activation`."""
    glu = stated("model.gated_linear_unit")
    if glu is not None and isinstance(glu[0], bool):
        config["swiglu"] = ConfigValue(glu[0], glu[1])
        return
    activation = stated("model.activation")
    if activation is not None:
        config["swiglu"] = ConfigValue(str(activation[0]) in GATED, activation[1])


def _vocabulary(stated: Lookup, config: dict[str, ConfigValue]) -> None:
    """Bridge pads the vocabulary only with `should_pad_vocab` (an HF model keeps its own
    embedding size): without it the vocabulary is the logit layer's size as it is."""
    pad = stated("model.should_pad_vocab")
    vocab = config.get("vocab_size")
    if pad is not None and pad[0] is False and vocab is not None:
        config["padded_vocab_size"] = vocab


def _recompute(config: dict[str, ConfigValue]) -> None:
    granularity = config.get("recompute_granularity")
    if granularity is not None:
        config["recompute"] = ConfigValue(str(granularity.value), granularity.provenance)


def _world(stated: Lookup, config: dict[str, ConfigValue]) -> None:
    """GPUs from Lightning's `trainer.devices` x `trainer.num_nodes` (whole numbers only:
    `-1` and device lists say nothing of the count)."""
    devices, nodes = stated("trainer.devices"), stated("trainer.num_nodes")
    if devices is None or not isinstance(devices[0], int) or devices[0] < 1:
        return
    count = devices[0]
    if nodes is not None and isinstance(nodes[0], int) and nodes[0] > 0:
        count *= nodes[0]
    config["num_gpus"] = ConfigValue(count, devices[1])
