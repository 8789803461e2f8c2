"""FLOPs per iteration, TFLOPS and utilisation: the formulas of docs `flops.md`.

Every formula is split into the same three per-token parts, so that recomputation (HFU) and
frozen weights (LoRA) are applied once, the same way, whatever formula the user picked:
weight GEMMs of the transformer layers, core attention (no weights), and the rest (the logit
layer, or embeddings for `6n`), which full recomputation does not repeat.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from loganalyzer.flops.shape import ModelShape, ParamCounts, count_parameters

FORMULAS = ("megatron", "palm", "6n", "megatron-paper")
RECOMPUTE = ("none", "selective", "full")
PACKING_NOTE = "every sequence is seq_length real tokens (packed/THD runs would use sum s_i^2)"


class ShapeError(ValueError):
    """The model shape lacks what the chosen formula needs."""


@dataclass(frozen=True)
class FlopsResult:
    """FLOPs of one iteration, and how they were obtained (`derivation` is printed by reports)."""

    formula: str
    per_iteration: float
    hardware_per_iteration: float
    derivation: str
    assumptions: tuple[str, ...]


@dataclass(frozen=True)
class _Terms:
    """Per-token FLOPs (forward + backward) of one formula, with its text for the derivation."""

    formula: str
    weights: float
    attention: float
    rest: float
    symbolic: str
    plugged: str
    assumptions: tuple[str, ...] = ()


_OPTION = {
    "num_layers": "--num-layers",
    "hidden_size": "--hidden-size",
    "num_attention_heads": "--num-attention-heads",
    "seq_length": "--seq-length",
    "vocab_size": "--vocab-size",
    "params": "--params",
}


def _need(shape: ModelShape, fields: tuple[str, ...], formula: str) -> None:
    missing = [f for f in fields if _field(shape, f) is None]
    if missing:
        flags = "/".join(_OPTION[f] for f in missing)
        raise ShapeError(
            f"need {', '.join(missing)} to compute {formula} FLOPs; pass {flags} or --model"
        )


def _field(shape: ModelShape, name: str) -> object:
    return shape.vocab if name == "vocab_size" else getattr(shape, name)


def _n(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:.6g}"


def _shape_notes(shape: ModelShape) -> tuple[str, ...]:
    notes = []
    if shape.ffn_hidden_size is None:
        notes.append(f"ffn_hidden_size not given: 4h = {shape.ffn_size} assumed")
    if shape.padded_vocab_size is None and shape.vocab not in (None, shape.vocab_size):
        notes.append(
            f"padded vocabulary {shape.vocab} from vocab_size {shape.vocab_size} by Megatron's"
            f" rule (multiple of {shape.make_vocab_size_divisible_by}"
            f" x TP {shape.tensor_model_parallel_size})"
        )
    return tuple(notes)


def _megatron_terms(shape: ModelShape) -> _Terms:
    _need(shape, ("num_layers", "hidden_size", "num_attention_heads", "vocab_size"), "megatron")
    nl, h, d = shape.num_layers or 0, shape.hidden_size or 0, shape.head_dim or 0
    a, g, f, s, v = (
        shape.num_attention_heads or 0,
        shape.query_groups or 0,
        shape.ffn_size or 0,
        shape.seq_length or 0,
        shape.vocab or 0,
    )
    q, k, m = a * d, g * d, 3 if shape.swiglu else 2
    l_moe = _moe_layers(shape)
    l_dense = nl - l_moe
    weights = 6 * nl * (h * (q + 2 * k) + q * h) + 6 * l_dense * m * h * f
    symbolic = "6·l·(h·(q+2k) + q·h) + 6·l·q·s + 6·l_dense·m·h·f"
    plugged = f"6·{nl}·({h}·({q}+2·{k}) + {q}·{h}) + 6·{nl}·{q}·{s} + 6·{l_dense}·{m}·{h}·{f}"
    if l_moe:
        f_e = shape.moe_ffn_hidden_size or f
        t = shape.router_topk
        f_sh = shape.moe_shared_expert_intermediate_size or 0
        weights += 6 * l_moe * m * h * (f_e * t + f_sh)
        symbolic += " + 6·l_moe·m·h·(f_e·t + f_sh)"
        plugged += f" + 6·{l_moe}·{m}·{h}·({f_e}·{t} + {f_sh})"
    return _Terms(
        formula="megatron",
        weights=weights,
        attention=6 * nl * q * s,
        rest=6 * h * v,
        symbolic=f"F = B·s·[{symbolic} + 6·h·V]",
        plugged=f"[{plugged} + 6·{h}·{v}]",
        assumptions=(*_shape_notes(shape), PACKING_NOTE),
    )


def _moe_layers(shape: ModelShape) -> int:
    try:
        return shape.moe_layers()
    except ValueError as exc:
        raise ShapeError(str(exc)) from exc


def _palm_terms(shape: ModelShape) -> _Terms:
    _need(shape, ("num_layers", "hidden_size", "num_attention_heads", "vocab_size"), "palm")
    counts = _counts(shape)
    nl, a, d = shape.num_layers or 0, shape.num_attention_heads or 0, shape.head_dim or 0
    s = shape.seq_length or 0
    logit = (shape.vocab or 0) * (shape.hidden_size or 0)
    n = counts.nonembedding_active
    return _Terms(
        formula="palm",
        weights=6 * (n - logit),
        attention=12 * nl * a * d * s,
        rest=6 * logit,
        symbolic="F = B·s·(6·N + 12·l·a·d·s)   N = non-embedding parameters (active)",
        plugged=f"(6·{n} + 12·{nl}·{a}·{d}·{s})",
        assumptions=(*_shape_notes(shape), "attention counted in full (non-causal), as PaLM does"),
    )


def _counts(shape: ModelShape) -> ParamCounts:
    counts = count_parameters(shape)
    if counts is None:
        raise ShapeError("cannot count parameters from this shape")
    return counts


def _six_n_terms(shape: ModelShape) -> _Terms:
    counts = count_parameters(shape) if shape.num_layers and shape.hidden_size else None
    if counts is not None:
        n = counts.active
        return _Terms(
            formula="6n",
            weights=6 * counts.layers_active,
            attention=0,
            rest=6 * (n - counts.layers_active),
            symbolic="F = B·s·6·N   N = parameters (active)",
            plugged=f"6·{n}",
            assumptions=_shape_notes(shape),
        )
    _need(shape, ("params",), "6n")
    n = shape.params or 0
    return _Terms(
        formula="6n",
        weights=6 * n,
        attention=0,
        rest=0,
        symbolic="F = B·s·6·N   N = parameters",
        plugged=f"6·{n}",
        assumptions=("only a parameter count is known: no attention term, all of N recomputed",),
    )


def _paper_terms(shape: ModelShape) -> _Terms:
    _need(shape, ("num_layers", "hidden_size", "vocab_size"), "megatron-paper")
    nl, h, s = shape.num_layers or 0, shape.hidden_size or 0, shape.seq_length or 0
    v = shape.vocab or 0
    return _Terms(
        formula="megatron-paper",
        weights=72 * nl * h * h,
        attention=12 * nl * h * s,
        rest=6 * h * v,
        symbolic="F = 72·B·s·l·h²·(1 + s/(6h) + V/(12·l·h))",
        plugged=f"72·{nl}·{h}²·(1 + {s}/(6·{h}) + {v}/(12·{nl}·{h}))",
        assumptions=("GPT-3 shape assumed: ffn 4h, no GQA, no gated MLP (Narayanan et al.)",),
    )


_TERMS = {
    "megatron": _megatron_terms,
    "palm": _palm_terms,
    "6n": _six_n_terms,
    "megatron-paper": _paper_terms,
}


def compute_flops(
    shape: ModelShape,
    global_batch_size: int,
    formula: str = "megatron",
    recompute: str = "none",
    lora: bool = False,
) -> FlopsResult:
    """Model and hardware FLOPs of one iteration of `global_batch_size` sequences."""
    if formula not in FORMULAS:
        raise ValueError(f"unknown formula {formula!r}; choose from {', '.join(FORMULAS)}")
    if recompute not in RECOMPUTE:
        raise ValueError(f"unknown recompute {recompute!r}; choose from {', '.join(RECOMPUTE)}")
    _need(shape, ("seq_length",), formula)
    if problems := shape.problems():
        raise ShapeError("; ".join(problems))
    fallback: tuple[str, ...] = ()
    try:
        terms = _TERMS[formula](shape)
    except ShapeError as exc:
        if shape.params is None or formula == "6n":
            raise
        terms = _six_n_terms(ModelShape(seq_length=shape.seq_length, params=shape.params))
        fallback = (f"{formula} impossible ({exc}); fell back to 6n with --params",)
    return _finish(terms, shape, global_batch_size, recompute, lora, fallback)


def _finish(
    terms: _Terms,
    shape: ModelShape,
    batch: int,
    recompute: str,
    lora: bool,
    fallback: tuple[str, ...],
) -> FlopsResult:
    tokens = batch * (shape.seq_length or 0)
    lines = [
        f"formula:  {terms.symbolic}",
        f"numbers:  F = {batch}·{shape.seq_length}·{terms.plugged}",
    ]
    assumptions = list(fallback) + list(terms.assumptions)
    per_token = terms.weights + terms.attention + terms.rest
    if lora or shape.trainable_params is not None:
        trainable = shape.trainable_params or 0
        # LoRA adapters are weights beside the frozen base: each costs the full 6 FLOPs per
        # token. Without --lora, the trainable weights are among the counted ones (a partly
        # frozen model): they only add the weight gradient the frozen count left out, 2.
        extra_cost = 6 if lora else 2
        per_token = (terms.weights + terms.rest) * 2 / 3 + terms.attention + extra_cost * trainable
        lines.append(
            "frozen:   weight GEMMs skip the weight gradient (4 instead of 6 FLOPs per weight),"
            f" trainable weights add {extra_cost}: F = B·s·(2/3·W + A + {extra_cost}·T) with"
            f" T = {trainable}"
        )
        where = (
            "LoRA adapters beside the counted weights, 6 FLOPs each per token"
            if lora
            else "among the counted weights, 2 more FLOPs each per token"
        )
        assumptions.append(
            f"frozen base weights (4N); {trainable} trainable parameters counted at 6N, {where}"
        )
    model = tokens * per_token
    lines.append(f"result:   F = {model:.6e} FLOPs per iteration")
    extra = 0.0
    if recompute == "full":
        extra = (terms.weights + terms.attention) / 3
        lines.append(
            "hardware: full recompute adds one forward of every transformer layer:"
            f" F_hw = F + B·s·(W + A)/3 = {model:.6e} + {tokens}·{_n(extra)}"
        )
    elif recompute == "selective":
        extra = terms.attention / 3
        lines.append(
            "hardware: selective recompute adds the forward of core attention:"
            f" F_hw = F + B·s·A/3 = {model:.6e} + {tokens}·{_n(extra)}"
        )
        if terms.attention == 0:
            assumptions.append("6n has no attention term: selective recompute adds nothing")
    hardware = model + tokens * extra
    if recompute != "none":
        lines.append(f"result:   F_hw = {hardware:.6e} FLOPs per iteration")
    return FlopsResult(
        formula=terms.formula,
        per_iteration=model,
        hardware_per_iteration=hardware,
        derivation="\n".join(lines),
        assumptions=tuple(assumptions),
    )


@dataclass(frozen=True)
class Achieved:
    """What a step time makes of a FLOP count: TFLOPS/GPU and utilisations (None where the
    step time, GPU count or peak is unknown)."""

    tflops_per_gpu: float | None
    mfu: float | None
    hfu: float | None
    mfu_vs_bf16: float | None


def achieved(
    result: FlopsResult,
    step_time_s: float | None,
    num_gpus: int | None,
    peak_tflops: float | None,
    bf16_peak_tflops: float | None = None,
) -> Achieved:
    """TFLOPS/GPU, MFU, HFU, and MFU against the bf16 peak (given for fp8 runs)."""
    if not step_time_s or not num_gpus:
        return Achieved(None, None, None, None)
    model = tflops_per_gpu(result.per_iteration, step_time_s, num_gpus)
    hardware = tflops_per_gpu(result.hardware_per_iteration, step_time_s, num_gpus)
    return Achieved(
        tflops_per_gpu=model,
        mfu=utilisation(model, peak_tflops) if peak_tflops else None,
        hfu=utilisation(hardware, peak_tflops) if peak_tflops else None,
        mfu_vs_bf16=utilisation(model, bf16_peak_tflops) if bf16_peak_tflops else None,
    )


def tflops_per_gpu(flops_per_iter: float, step_time_s: float, num_gpus: int) -> float:
    """Achieved TFLOP/s per GPU: F / (step time x world size x 1e12)."""
    if step_time_s <= 0 or num_gpus <= 0:
        raise ValueError("step time and number of GPUs must be positive")
    return flops_per_iter / (step_time_s * num_gpus * 1e12)


def utilisation(tflops: float, peak_tflops: float) -> float:
    """MFU (or HFU) as a fraction of the dense peak."""
    if peak_tflops <= 0:
        raise ValueError("peak TFLOPS must be positive")
    return tflops / peak_tflops


# ------------------------------------------------- what other frameworks print


def megatron_deepspeed_reported_flops(
    shape: ModelShape, global_batch_size: int, checkpoint_activations: bool
) -> float:
    """Megatron-DeepSpeed's (bigscience / legacy) `TFLOPs:` count for one iteration.

    `24·factor·B·s·l·h²·(1 + s/(6h) + V/(16·l·h))`, factor 4 with activation checkpointing
    (it counts the recompute) else 3, and 32 instead of 24 for a GLU MLP.
    """
    _need(shape, ("num_layers", "hidden_size", "seq_length", "vocab_size"), "Megatron-DeepSpeed")
    nl, h, s = shape.num_layers or 0, shape.hidden_size or 0, shape.seq_length or 0
    v = shape.vocab or 0
    coefficient = 32 if shape.swiglu else 24
    factor = 4 if checkpoint_activations else 3
    return (
        coefficient
        * factor
        * global_batch_size
        * s
        * nl
        * h
        * h
        * (1 + s / (6 * h) + v / (16 * nl * h))
    )


def megatron_core_v011_flops(shape: ModelShape, global_batch_size: int) -> float:
    """Megatron-LM's count up to core 0.11: causal attention not halved, MoE on every layer."""
    terms = _megatron_terms(shape)
    if shape.num_experts:
        terms = _megatron_terms(dataclasses.replace(shape, moe_layer_freq=1))
    tokens = global_batch_size * (shape.seq_length or 0)
    return tokens * (terms.weights + 2 * terms.attention + terms.rest)


def hf_trainer_flops(shape: ModelShape, global_batch_size: int) -> float:
    """HF Trainer's `floating_point_ops`: 6 x (all parameters but input tables) x tokens."""
    counts = _counts(shape)
    tokens = global_batch_size * (shape.seq_length or 0)
    return 6.0 * (counts.total - counts.input_tables) * tokens


# The frameworks whose own FLOPs count is known, so that a ratio to what they print can be
# read (`render.wording.COUNTS` says how each counts).
EXPLAINED = frozenset(
    {
        "megatron-lm",
        "megatron-lm-0.11",
        "megatron-deepspeed",
        "megatron-deepspeed-microsoft",
        "hf-trainer",
        "torchtitan",
        "nanotron",
        "nanogpt",
        "maxtext",
        "maxtext-2024",
        "deepspeed-profiler",
    }
)


@dataclass(frozen=True)
class RatioReading:
    """Why recomputed / reported TFLOPS is not 1: `count`, the framework's own FLOPs count that
    explains it (one of EXPLAINED); the ratio `observed`; the ratio `expected` from that count
    (None: it cannot be reproduced from the shape); `differs`: the framework counts this same
    formula, so the ratio means the shape, batch or step time used here differs from the
    run's. `render.wording.reported_ratio` words it."""

    count: str
    observed: float
    expected: float | None
    differs: bool = False


def read_reported_ratio(
    framework: str,
    ratio: float,
    recompute: str,
    shape: ModelShape | None = None,
    global_batch_size: int | None = None,
    tolerance: float = 0.02,
) -> RatioReading | None:
    """What recomputed / reported TFLOPS says, or None if there is nothing to say.

    With a shape and batch size, the framework's own count is recomputed so the reading can
    give the expected ratio beside the observed one.
    """
    key = framework.lower()
    if key not in EXPLAINED or abs(ratio - 1) <= tolerance:
        return None
    expected = None
    if shape is not None and global_batch_size:
        expected = expected_reported_ratio(key, shape, global_batch_size, recompute)
    if key == "megatron-lm" and shape is not None and global_batch_size:
        old = expected_reported_ratio("megatron-lm-0.11", shape, global_batch_size, recompute)
        if old is not None and abs(old - ratio) <= tolerance * old:
            return RatioReading("megatron-lm-0.11", ratio, old)
    if key == "maxtext" and shape is not None and global_batch_size:
        old = expected_reported_ratio("maxtext-2024", shape, global_batch_size, recompute)
        if old is not None and expected is not None and abs(old - ratio) < abs(expected - ratio):
            key, expected = "maxtext-2024", old
    return RatioReading(key, ratio, expected, differs=key == "megatron-lm")


def expected_reported_ratio(
    key: str, shape: ModelShape, batch: int, recompute: str
) -> float | None:
    """Recomputed / reported TFLOPS to expect from what framework `key` counts, or None when
    its count cannot be reproduced from the shape."""
    if key.lower() in ("megatron-lm", "maxtext"):
        return 1.0  # core >= 0.12 and MaxText since 2025-07 print the default formula
    try:
        ours = compute_flops(shape, batch).per_iteration
        if key in ("megatron-lm-0.11", "nanotron", "maxtext-2024"):
            theirs = megatron_core_v011_flops(shape, batch)
        elif key == "megatron-deepspeed":
            theirs = megatron_deepspeed_reported_flops(shape, batch, recompute == "full")
        elif key == "hf-trainer":
            theirs = hf_trainer_flops(shape, batch)
        elif key in ("torchtitan", "nanogpt"):
            theirs = compute_flops(shape, batch, "palm").per_iteration
        else:
            return None
    except ShapeError:
        return None
    return ours / theirs if theirs else None  # a degenerate shape counts nothing
