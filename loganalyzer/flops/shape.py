"""The shape of a transformer, as far as FLOPs and parameter counts need it.

Field names follow Megatron-LM's arguments so that a log's `arguments` dump, the command-line
overrides and the formulas in `flops.md` all speak the same language. Every field may be
unknown (None): runs rarely log everything, and the FLOPs module says what is missing.

Presets carry published shapes only; the training sequence length is a run fact, so presets
and Hugging Face configs leave `seq_length` unset. GPT-2/GPT-3 presets keep the raw BPE
vocabulary (50257) and let Megatron's padding rule apply; the other presets' vocabularies are
their released embedding sizes.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loganalyzer import jsontext

MAX_LAYER_PATTERN = 100_000


@dataclass(frozen=True)
class ModelShape:
    """Architecture facts of one model; None means "not known"."""

    num_layers: int | None = None
    hidden_size: int | None = None
    num_attention_heads: int | None = None
    num_query_groups: int | None = None
    kv_channels: int | None = None
    ffn_hidden_size: int | None = None
    seq_length: int | None = None
    padded_vocab_size: int | None = None
    vocab_size: int | None = None
    make_vocab_size_divisible_by: int = 128
    tensor_model_parallel_size: int = 1
    swiglu: bool = False
    num_experts: int | None = None
    # The experts each token is routed to: None for a dense model (whatever its arguments
    # print: Megatron-core dumps `moe_router_topk 2` for every model), Megatron's default
    # (`MEGATRON_ROUTER_TOPK`) for a MoE one that does not state it.
    moe_router_topk: int | None = None
    moe_ffn_hidden_size: int | None = None
    moe_shared_expert_intermediate_size: int | None = None
    moe_layer_freq: int | tuple[int, ...] | None = None
    max_position_embeddings: int | None = None
    add_bias_linear: bool | None = None
    add_qkv_bias: bool | None = None
    normalization: str | None = None
    position_embedding_type: str | None = None
    untie_embeddings_and_output_weights: bool | None = None
    params: int | None = None
    trainable_params: int | None = None

    @property
    def head_dim(self) -> int | None:
        """`kv_channels`, defaulting to h / a as Megatron does."""
        if self.kv_channels is not None:
            return self.kv_channels
        if self.hidden_size is None or not self.num_attention_heads:
            return None
        return self.hidden_size // self.num_attention_heads

    @property
    def query_groups(self) -> int | None:
        """KV heads: `num_query_groups`, or one per attention head without GQA."""
        return self.num_query_groups or self.num_attention_heads

    @property
    def ffn_size(self) -> int | None:
        """`ffn_hidden_size`, defaulting to 4h."""
        if self.ffn_hidden_size is not None:
            return self.ffn_hidden_size
        return None if self.hidden_size is None else 4 * self.hidden_size

    @property
    def vocab(self) -> int | None:
        """The padded vocabulary the logit layer multiplies by."""
        if self.padded_vocab_size is not None:
            return self.padded_vocab_size
        if self.vocab_size is None:
            return None
        return padded_vocab(
            self.vocab_size, self.make_vocab_size_divisible_by, self.tensor_model_parallel_size
        )

    def __post_init__(self) -> None:
        topk = (self.moe_router_topk or MEGATRON_ROUTER_TOPK) if self.num_experts else None
        object.__setattr__(self, "moe_router_topk", topk)

    @property
    def router_topk(self) -> int:
        """The experts each token is routed to (a MoE shape's `moe_router_topk`)."""
        return self.moe_router_topk or MEGATRON_ROUTER_TOPK

    def problems(self) -> list[str]:
        """What makes this shape one Megatron would refuse (FLOPs of it would be wrong)."""
        found = [
            f"{name} is {value}: a size must be positive (a damaged log?)"
            for name in POSITIVE_SIZES
            if isinstance(value := getattr(self, name), int) and value <= 0
        ]
        h, a, g = self.hidden_size, self.num_attention_heads, self.num_query_groups
        if h and a and self.kv_channels is None and h % a:
            found.append(f"hidden_size {h} is not a multiple of num_attention_heads {a}")
        if a and g and a % g:
            found.append(f"num_attention_heads {a} is not a multiple of num_query_groups {g}")
        if self.num_experts and self.router_topk > self.num_experts:
            found.append(
                f"moe_router_topk {self.router_topk} exceeds num_experts {self.num_experts}"
            )
        freq = self.moe_layer_freq
        if self.num_experts and isinstance(freq, tuple) and len(freq) != self.num_layers:
            found.append(
                f"moe_layer_freq lists {len(freq)} layers but num_layers is {self.num_layers}"
            )
        return found

    def moe_layers(self) -> int:
        """How many layers hold experts (0 for a dense model)."""
        if not self.num_experts:
            return 0
        return len(moe_layer_indices(self.moe_layer_freq or 1, self.num_layers or 0))


# Megatron-LM's `--moe-router-topk` default.
MEGATRON_ROUTER_TOPK = 2

# Sizes of which zero or less means no model (FLOPs of it would be 0 or negative).
POSITIVE_SIZES = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "kv_channels",
    "ffn_hidden_size",
    "seq_length",
    "padded_vocab_size",
    "vocab_size",
)


@dataclass(frozen=True)
class ParamCounts:
    """Parameter counts as flops.md defines them (a tied table counted once)."""

    total: int
    nonembedding: int
    active: int
    nonembedding_active: int
    layers_active: int
    input_tables: int


def padded_vocab(vocab: int, divisible_by: int = 128, tp: int = 1) -> int:
    """Megatron's rule: round up to a multiple of divisible_by x tensor-parallel size."""
    multiple = max(divisible_by, 1) * max(tp, 1)
    return math.ceil(vocab / multiple) * multiple


def moe_layer_indices(freq: int | tuple[int, ...], num_layers: int) -> list[int]:
    """The layer indices that are MoE layers, from an int frequency or a 0/1 pattern."""
    if isinstance(freq, int):
        return [i for i in range(num_layers) if i % freq == 0]
    if len(freq) != num_layers:
        raise ValueError(f"moe_layer_freq lists {len(freq)} layers but the model has {num_layers}")
    return [i for i, flag in enumerate(freq) if flag]


def parse_moe_layer_freq(text: str | int) -> int | tuple[int, ...]:
    """Parse `--moe-layer-freq`: `2`, `[0,1,1,1]` or Megatron's `([0]*1+[1]*26)`.

    The expression form is read with `ast.parse` and only list, int, `+` and `*` nodes are
    accepted, so nothing is evaluated.
    """
    if isinstance(text, int):
        return _check_freq(text)
    try:
        node = ast.parse(text.strip(), mode="eval").body
        value = _layer_pattern(node, text)
    except SyntaxError as exc:
        raise ValueError(f"cannot parse moe_layer_freq {text!r}") from exc
    except RecursionError:  # a chain of thousands of `+` (Python parses and walks it deep)
        raise ValueError(f"moe_layer_freq {text[:80]!r}… is nested too deep to read") from None
    if isinstance(value, int):
        return _check_freq(value)
    if any(v not in (0, 1) for v in value):
        raise ValueError(f"moe_layer_freq {text!r} must hold only 0 and 1")
    return tuple(value)


def _check_freq(value: int) -> int:
    if value < 1:
        raise ValueError(f"moe_layer_freq must be >= 1, got {value}")
    return value


def _layer_pattern(node: ast.expr, text: str) -> int | list[int]:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_layer_pattern(e, text) for e in node.elts]
        if all(isinstance(i, int) for i in items):
            return [i for i in items if isinstance(i, int)]
        if len(items) == 1 and isinstance(items[0], list):
            return items[0]
    if isinstance(node, ast.BinOp):
        left, right = _layer_pattern(node.left, text), _layer_pattern(node.right, text)
        if isinstance(node.op, ast.Add) and isinstance(left, list) and isinstance(right, list):
            return _bounded(left + right, text)
        if isinstance(node.op, ast.Mult):
            if isinstance(left, list) and isinstance(right, int):
                return _bounded(left * right, text, len(left) * right)
            if isinstance(left, int) and isinstance(right, list):
                return _bounded(right * left, text, len(right) * left)
    raise ValueError(f"cannot parse moe_layer_freq {text!r}: only lists, ints, + and * allowed")


def _bounded(items: list[int], text: str, size: int | None = None) -> list[int]:
    if (size if size is not None else len(items)) > MAX_LAYER_PATTERN:
        raise ValueError(f"moe_layer_freq {text!r} is implausibly long")
    return items


def count_parameters(shape: ModelShape) -> ParamCounts | None:
    """Parameter counts following flops.md's rules; None when the shape is incomplete.

    Structural flags left None take the defaults flops.md ties to `swiglu`: GPT style
    (biases, LayerNorm, learned positions, tied output) or Llama style (none of those).
    """
    nl, h, a = shape.num_layers, shape.hidden_size, shape.num_attention_heads
    d, g, f, vocab = shape.head_dim, shape.query_groups, shape.ffn_size, shape.vocab
    if nl is None or h is None or a is None or d is None or g is None or f is None:
        return None
    if shape.problems():
        return None
    if vocab is None:
        return None
    gpt_style = not shape.swiglu
    bias = _default(shape.add_bias_linear, gpt_style)
    qkv_bias = _default(shape.add_qkv_bias, bias)
    layernorm = (shape.normalization or ("LayerNorm" if gpt_style else "RMSNorm")) == "LayerNorm"
    position = shape.position_embedding_type or ("learned_absolute" if gpt_style else "rope")
    untied = _default(shape.untie_embeddings_and_output_weights, not gpt_style)
    q, k = a * d, g * d
    m = 3 if shape.swiglu else 2
    norm = 2 * h if layernorm else h

    attention = h * (q + 2 * k) + q * h + (q + 2 * k) * qkv_bias + h * bias
    dense_mlp = m * h * f + ((m - 1) * f + h) * bias
    l_moe = shape.moe_layers() if nl else 0
    experts = shape.num_experts or 0
    f_e = shape.moe_ffn_hidden_size or f
    expert = m * h * f_e + ((m - 1) * f_e + h) * bias
    f_sh = shape.moe_shared_expert_intermediate_size or 0
    shared = m * h * f_sh + ((m - 1) * f_sh + h) * bias if f_sh else 0
    router = h * experts
    topk = min(shape.router_topk, experts)

    per_layer = attention + 2 * norm
    layers_total = (
        nl * per_layer + (nl - l_moe) * dense_mlp + l_moe * (experts * expert + router + shared)
    )
    layers_active = (
        nl * per_layer + (nl - l_moe) * dense_mlp + l_moe * (topk * expert + router + shared)
    )
    table_rows = shape.max_position_embeddings or shape.seq_length or 0
    positions = table_rows * h if position == "learned_absolute" else 0
    word = vocab * h
    output = word if untied else 0
    final_norm = norm
    total = layers_total + final_norm + word + positions + output
    active = layers_active + final_norm + word + positions + output
    kept_output = output or word
    return ParamCounts(
        total=total,
        nonembedding=layers_total + final_norm + kept_output,
        active=active,
        nonembedding_active=layers_active + final_norm + kept_output,
        layers_active=layers_active,
        input_tables=word + positions,
    )


def _default(value: bool | None, default: bool) -> bool:
    return default if value is None else value


def layered_shape(
    base: ModelShape | None, model: ModelShape | None, overrides: Mapping[str, Any]
) -> ModelShape:
    """The log's shape (or an empty one), then a preset or config.json, then single facts:
    each layer overrides the one before where it says something."""
    shape = base or ModelShape()
    if model is not None:
        shape = merge_shape(shape, dataclasses.asdict(model))
    return merge_shape(shape, overrides)


def merge_shape(base: ModelShape, overrides: Mapping[str, Any]) -> ModelShape:
    """Apply field overrides; a changed vocabulary or padding input re-derives the padding."""
    changes = {k: v for k, v in overrides.items() if v is not None}
    repad = {"vocab_size", "make_vocab_size_divisible_by", "tensor_model_parallel_size"}
    if repad & changes.keys() and "padded_vocab_size" not in changes:
        changes["padded_vocab_size"] = None
        if base.vocab_size is None and base.padded_vocab_size is not None:
            changes.setdefault("vocab_size", base.padded_vocab_size)
    return dataclasses.replace(base, **changes)


# ---------------------------------------------------------------- Megatron arguments


def _arg(args: Mapping[str, str], name: str) -> str | None:
    value = args.get(name)
    if value is None:
        return None
    value = value.strip()
    return None if value in ("None", "") else value


def _int(args: Mapping[str, str], name: str) -> int | None:
    value = _arg(args, name)
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        raise ArgumentError(name, value) from None
    # `1e400` (inf) echoed in a launch command is no size at all (a size of 0 or below is a
    # number: the shape's check refuses it, saying which)
    if not math.isfinite(number):
        raise ArgumentError(name, value)
    return int(number)


class ArgumentError(ValueError):
    """An argument printed with a value that is not what it should be (a number, a layer
    pattern)."""

    def __init__(self, name: str, value: str, reason: str | None = None) -> None:
        super().__init__(reason or f"argument {name} = {value!r} is not a number")
        self.name = name


def _bool(args: Mapping[str, str], name: str) -> bool | None:
    value = _arg(args, name)
    return None if value is None else value == "True"


def shape_from_megatron_args(args: Mapping[str, str]) -> ModelShape:
    """A shape from the raw strings of a Megatron-LM / Megatron-DeepSpeed `arguments` dump.

    Old Megatron has no `swiglu`/`num_query_groups`; Megatron-DeepSpeed spells GLU as
    `glu_activation` and GQA as `num_key_value_heads`. Megatron ignores `num_query_groups`
    unless `group_query_attention` is True.
    """
    gqa = _bool(args, "group_query_attention")
    groups = _int(args, "num_query_groups") if gqa else None
    if groups is None:
        groups = _int(args, "num_key_value_heads")
    swiglu = bool(_bool(args, "swiglu")) or _arg(args, "glu_activation") is not None
    freq_text = _arg(args, "moe_layer_freq")
    try:
        freq = None if freq_text is None else parse_moe_layer_freq(freq_text)
    except ValueError as exc:
        raise ArgumentError("moe_layer_freq", str(freq_text), f"argument {exc}") from None
    # One expert is the dense MLP (Megatron-DeepSpeed's default `--num-experts 1`).
    experts = _int(args, "num_experts")
    normalization = _arg(args, "normalization")
    position = _arg(args, "position_embedding_type")
    if position is None and _bool(args, "use_rotary_position_embeddings"):
        position = "rope"
    return ModelShape(
        num_layers=_int(args, "num_layers"),
        hidden_size=_int(args, "hidden_size"),
        num_attention_heads=_int(args, "num_attention_heads"),
        num_query_groups=groups,
        kv_channels=_int(args, "kv_channels"),
        ffn_hidden_size=_int(args, "ffn_hidden_size"),
        seq_length=_int(args, "seq_length"),
        padded_vocab_size=_int(args, "padded_vocab_size"),
        vocab_size=_int(args, "vocab_size"),
        make_vocab_size_divisible_by=_int(args, "make_vocab_size_divisible_by") or 128,
        tensor_model_parallel_size=_int(args, "tensor_model_parallel_size") or 1,
        swiglu=swiglu,
        num_experts=experts if experts is not None and experts > 1 else None,
        moe_router_topk=_int(args, "moe_router_topk"),
        moe_ffn_hidden_size=_int(args, "moe_ffn_hidden_size"),
        moe_shared_expert_intermediate_size=_int(args, "moe_shared_expert_intermediate_size"),
        moe_layer_freq=freq,
        max_position_embeddings=_int(args, "max_position_embeddings"),
        add_bias_linear=_bool(args, "add_bias_linear"),
        add_qkv_bias=_bool(args, "add_qkv_bias"),
        normalization=normalization,
        position_embedding_type=position,
        untie_embeddings_and_output_weights=_bool(args, "untie_embeddings_and_output_weights"),
    )


# ---------------------------------------------------------------- Hugging Face configs

_LLAMA_LIKE = {"llama", "mistral", "mixtral", "qwen2"}


def shape_from_hf_config(config: str | Path | Mapping[str, Any]) -> ModelShape:
    """A shape from a Hugging Face `config.json` (path or parsed dict)."""
    if not isinstance(config, Mapping):
        config = jsontext.loads(Path(config).read_text(encoding="utf-8"))
        if not isinstance(config, Mapping):
            raise ValueError(f"{config!r} is not a JSON object")
    model_type = str(config.get("model_type", ""))
    if model_type == "gpt2":
        return _gpt2_shape(config)
    if model_type == "gpt_neox":
        return _neox_shape(config)
    if model_type in _LLAMA_LIKE:
        return _llama_shape(config, model_type)
    raise ValueError(
        f"unsupported model_type {model_type!r}; supported: "
        + ", ".join(sorted(_LLAMA_LIKE | {"gpt2", "gpt_neox"}))
    )


def _gpt2_shape(c: Mapping[str, Any]) -> ModelShape:
    return ModelShape(
        num_layers=c["n_layer"],
        hidden_size=c["n_embd"],
        num_attention_heads=c["n_head"],
        ffn_hidden_size=c.get("n_inner"),
        vocab_size=c["vocab_size"],
        padded_vocab_size=c["vocab_size"],
        max_position_embeddings=c.get("n_positions", 1024),
        add_bias_linear=True,
        normalization="LayerNorm",
        position_embedding_type="learned_absolute",
        untie_embeddings_and_output_weights=not c.get("tie_word_embeddings", True),
    )


def _neox_shape(c: Mapping[str, Any]) -> ModelShape:
    return ModelShape(
        num_layers=c["num_hidden_layers"],
        hidden_size=c["hidden_size"],
        num_attention_heads=c["num_attention_heads"],
        ffn_hidden_size=c.get("intermediate_size"),
        vocab_size=c["vocab_size"],
        padded_vocab_size=c["vocab_size"],
        max_position_embeddings=c.get("max_position_embeddings"),
        add_bias_linear=c.get("attention_bias", True),
        normalization="LayerNorm",
        position_embedding_type="rope",
        untie_embeddings_and_output_weights=not c.get("tie_word_embeddings", False),
    )


def _llama_shape(c: Mapping[str, Any], model_type: str) -> ModelShape:
    heads = c["num_attention_heads"]
    experts = c.get("num_local_experts") if model_type == "mixtral" else None
    qkv_bias = True if model_type == "qwen2" else bool(c.get("attention_bias", False))
    return ModelShape(
        num_layers=c["num_hidden_layers"],
        hidden_size=c["hidden_size"],
        num_attention_heads=heads,
        num_query_groups=c.get("num_key_value_heads") or heads,
        kv_channels=c.get("head_dim"),
        ffn_hidden_size=c["intermediate_size"],
        vocab_size=c["vocab_size"],
        padded_vocab_size=c["vocab_size"],
        swiglu=True,
        num_experts=experts,
        moe_router_topk=c.get("num_experts_per_tok", 2),
        moe_ffn_hidden_size=c["intermediate_size"] if experts else None,
        max_position_embeddings=c.get("max_position_embeddings"),
        add_bias_linear=False,
        add_qkv_bias=qkv_bias,
        normalization="RMSNorm",
        position_embedding_type="rope",
        untie_embeddings_and_output_weights=not c.get("tie_word_embeddings", False),
    )


# ---------------------------------------------------------------- presets

_GPT2 = {"model_type": "gpt2", "vocab_size": 50257, "n_positions": 1024}
_GPT3_ROWS = {
    "gpt3-125m": (12, 768, 12, 64),
    "gpt3-350m": (24, 1024, 16, 64),
    "gpt3-760m": (24, 1536, 16, 96),
    "gpt3-1.3b": (24, 2048, 24, 128),
    "gpt3-2.7b": (32, 2560, 32, 80),
    "gpt3-6.7b": (32, 4096, 32, 128),
    "gpt3-13b": (40, 5140, 40, 128),
    "gpt3-175b": (96, 12288, 96, 128),
}


def _hf(model_type: str, **values: Any) -> dict[str, Any]:
    return {"model_type": model_type, **values}


def _llama(
    layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int, **extra: Any
) -> dict[str, Any]:
    return _hf(
        extra.pop("model_type", "llama"),
        num_hidden_layers=layers,
        hidden_size=hidden,
        num_attention_heads=heads,
        num_key_value_heads=kv,
        intermediate_size=ffn,
        vocab_size=vocab,
        **extra,
    )


_HF_PRESETS: dict[str, dict[str, Any]] = {
    "gpt2": {**_GPT2, "n_layer": 12, "n_embd": 768, "n_head": 12},
    "gpt2-medium": {**_GPT2, "n_layer": 24, "n_embd": 1024, "n_head": 16},
    "gpt2-large": {**_GPT2, "n_layer": 36, "n_embd": 1280, "n_head": 20},
    "gpt2-xl": {**_GPT2, "n_layer": 48, "n_embd": 1600, "n_head": 25},
    "llama2-7b": _llama(32, 4096, 32, 32, 11008, 32000, max_position_embeddings=4096),
    "llama2-13b": _llama(40, 5120, 40, 40, 13824, 32000, max_position_embeddings=4096),
    "llama2-70b": _llama(80, 8192, 64, 8, 28672, 32000, max_position_embeddings=4096),
    "llama3-8b": _llama(32, 4096, 32, 8, 14336, 128256, max_position_embeddings=8192),
    "llama3-70b": _llama(80, 8192, 64, 8, 28672, 128256, max_position_embeddings=8192),
    "llama3.1-8b": _llama(32, 4096, 32, 8, 14336, 128256, max_position_embeddings=131072),
    "llama3.1-70b": _llama(80, 8192, 64, 8, 28672, 128256, max_position_embeddings=131072),
    "llama3.1-405b": _llama(126, 16384, 128, 8, 53248, 128256, max_position_embeddings=131072),
    "mistral-7b": _llama(
        32, 4096, 32, 8, 14336, 32000, model_type="mistral", max_position_embeddings=32768
    ),
    "mixtral-8x7b": _llama(
        32,
        4096,
        32,
        8,
        14336,
        32000,
        model_type="mixtral",
        num_local_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=32768,
    ),
    "mixtral-8x22b": _llama(
        56,
        6144,
        48,
        8,
        16384,
        32768,
        model_type="mixtral",
        num_local_experts=8,
        num_experts_per_tok=2,
        max_position_embeddings=65536,
    ),
    "qwen2.5-0.5b": _llama(
        24, 896, 14, 2, 4864, 151936, model_type="qwen2", tie_word_embeddings=True
    ),
    "qwen2.5-1.5b": _llama(
        28, 1536, 12, 2, 8960, 151936, model_type="qwen2", tie_word_embeddings=True
    ),
    "qwen2.5-3b": _llama(
        36, 2048, 16, 2, 11008, 151936, model_type="qwen2", tie_word_embeddings=True
    ),
    "qwen2.5-7b": _llama(28, 3584, 28, 4, 18944, 152064, model_type="qwen2"),
    "qwen2.5-14b": _llama(48, 5120, 40, 8, 13824, 152064, model_type="qwen2"),
    "qwen2.5-32b": _llama(64, 5120, 40, 8, 27648, 152064, model_type="qwen2"),
    "qwen2.5-72b": _llama(80, 8192, 64, 8, 29568, 152064, model_type="qwen2"),
}

_ALIASES = {
    "gpt2-124m": "gpt2",
    "gpt2-small": "gpt2",
    "gpt2-355m": "gpt2-medium",
    "gpt2-345m": "gpt2-medium",
    "gpt2-774m": "gpt2-large",
    "gpt2-1.5b": "gpt2-xl",
    "llama-2-7b": "llama2-7b",
    "llama-2-13b": "llama2-13b",
    "llama-2-70b": "llama2-70b",
    "llama-3-8b": "llama3-8b",
    "llama-3-70b": "llama3-70b",
    "llama-3.1-8b": "llama3.1-8b",
    "llama-3.1-70b": "llama3.1-70b",
    "llama-3.1-405b": "llama3.1-405b",
}


def preset_names() -> list[str]:
    """Every preset name (aliases excluded), sorted."""
    return sorted([*_HF_PRESETS, *_GPT3_ROWS])


def shape_from_preset(name: str) -> ModelShape:
    """A published model's shape by name (`llama3-8b`, `gpt3-175b`, `gpt2-xl`, ...)."""
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key in _GPT3_ROWS:
        layers, hidden, heads, head_dim = _GPT3_ROWS[key]
        return ModelShape(
            num_layers=layers,
            hidden_size=hidden,
            num_attention_heads=heads,
            kv_channels=head_dim,
            vocab_size=50257,
            max_position_embeddings=2048,
        )
    if key in _HF_PRESETS:
        shape = shape_from_hf_config(_HF_PRESETS[key])
        if key.startswith("gpt2"):
            return dataclasses.replace(shape, padded_vocab_size=None)
        return shape
    raise ValueError(f"unknown model preset {name!r}; known: {', '.join(preset_names())}")
