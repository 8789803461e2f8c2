"""Accelerator peak table and device-name resolution.

Device names are matched on whole tokens (letters and digits split at anything else), so a
pattern can never match a prefix of a longer model number: `A10` does not match `A100`, `H20`
does not match `H200`, `L4` does not match `L40S`. A table key typed alone wins over a pattern
spelled the same (`mi250x`, `trn2`), with a warning naming the row the pattern belongs to.
When several patterns match, the one with the most tokens beyond vendor words wins
(`H200 NVL` over `NVIDIA H200`, `TPU v5 lite` over `TPU v5`).

MIG slices are accepted and the peak is scaled by the slice's share of the 7 compute slices
(`3g.20gb` -> 3/7, `1c.3g.20gb` -> 1/7), with a warning: a MIG slice's memory bandwidth and
clocks are not strictly proportional, so the figure is an approximation.
"""

from __future__ import annotations

import csv
import difflib
import functools
import io
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.resources import files
from types import MappingProxyType

DTYPES = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
_DTYPE_ALIASES = {
    "float32": "fp32",
    "float": "fp32",
    "tensorfloat32": "tf32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8": "fp8",
    "e4m3": "fp8",
    "float4": "fp4",
}
_VENDOR_WORDS = {"nvidia", "amd", "instinct", "tesla", "geforce", "google", "intel", "aws"}
_MIG = re.compile(r"\bmig\s+(?:(\d+)c\.)?(\d+)g\.\d+gb\b", re.IGNORECASE)
MIG_COMPUTE_SLICES = 7
_MEMORY = re.compile(r"(\d+)\s*GB\b", re.IGNORECASE)


@dataclass(frozen=True)
class Accelerator:
    """One row of the peak table (TFLOP/s, dense)."""

    key: str
    vendor: str
    name: str
    patterns: tuple[str, ...]
    memory_gb: float | None
    mem_bw_tbs: float | None
    peaks: Mapping[str, float | None]
    source: str


@dataclass(frozen=True)
class Resolution:
    """Which table row a name resolved to, through which pattern, and at what scale."""

    accelerator: Accelerator
    matched: str
    scale: float = 1.0
    warnings: tuple[str, ...] = field(default=())
    device: str = ""

    @property
    def memory_gb(self) -> float | None:
        """The memory the device name states (a row covers "16/32GB" variants: a
        `Tesla V100-PCIE-16GB` has 16), else the row's."""
        stated = _MEMORY.search(self.device)
        return float(stated.group(1)) if stated else self.accelerator.memory_gb

    def peak_tflops(self, dtype: str) -> float | None:
        """The dense peak for `dtype`, scaled for a MIG slice."""
        peak = peak_tflops(self.accelerator, dtype)
        return None if peak is None else peak * self.scale


def _tokens(text: str) -> tuple[str, ...]:
    return tuple(t for t in re.split(r"[^0-9a-z]+", text.lower()) if t)


def _float(text: str) -> float | None:
    return float(text) if text.strip() else None


@functools.cache
def accelerators() -> tuple[Accelerator, ...]:
    """Every row of `loganalyzer/data/hardware.csv`, in table order."""
    text = (files("loganalyzer") / "data/hardware.csv").read_text(encoding="utf-8")
    return tuple(
        Accelerator(
            key=row["key"],
            vendor=row["vendor"],
            name=row["name"],
            patterns=tuple(p for p in row["device_name_patterns"].split(";") if p),
            memory_gb=_float(row["memory_gb"]),
            mem_bw_tbs=_float(row["mem_bw_tbs"]),
            peaks=MappingProxyType({d: _float(row[d]) for d in DTYPES}),
            source=row["source"],
        )
        for row in csv.DictReader(io.StringIO(text))
    )


def normalise_dtype(dtype: str) -> str:
    """`bf16` from `bfloat16`, `torch.bfloat16`, `BF16`..."""
    key = dtype.lower().removeprefix("torch.")
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose from {', '.join(DTYPES)}")
    return key


def peak_tflops(acc: Accelerator, dtype: str) -> float | None:
    """The dense peak TFLOP/s for `dtype`, or None if the device has no such figure."""
    return acc.peaks[normalise_dtype(dtype)]


def has_bf16(acc: Accelerator) -> bool:
    """Whether the device runs bf16 at all: the table gives its bf16 peak, or (a device whose
    peaks are not known, fp16 included) cannot say it does not. A V100 or T4 lists fp16
    and no bf16."""
    return acc.peaks.get("bf16") is not None or acc.peaks.get("fp16") is None


def precisions(acc: Accelerator) -> list[str]:
    """The precisions the table gives a peak for, in its column order."""
    return [dtype for dtype in DTYPES if acc.peaks.get(dtype) is not None]


def _specificity(pattern: str) -> tuple[int, int]:
    tokens = _tokens(pattern)
    return (sum(t not in _VENDOR_WORDS for t in tokens), len("".join(tokens)))


def _contains(name: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    n = len(pattern)
    return any(name[i : i + n] == pattern for i in range(len(name) - n + 1))


def resolve(name: str) -> Resolution | None:
    """Resolve a table key or a device name (torch, nvidia-smi, W&B); None if unknown."""
    wanted = name.strip().lower()
    for acc in accelerators():
        if acc.key == wanted:
            return Resolution(acc, acc.key, 1.0, _gcd_note(acc) + _shadow_note(acc))
    mig = _MIG.search(name)
    device = name[: mig.start()] if mig else name
    tokens = _tokens(device)
    candidates = [
        (_specificity(pattern), acc, pattern)
        for acc in accelerators()
        for pattern in acc.patterns
        if _contains(tokens, _tokens(pattern))
    ]
    if not candidates:
        return None
    _, acc, pattern = max(candidates, key=lambda c: c[0])
    if mig is None:
        return Resolution(acc, pattern, 1.0, _gcd_note(acc), device)
    slices = int(mig.group(1) or mig.group(2))
    scale = slices / MIG_COMPUTE_SLICES
    warning = (
        f"MIG slice {mig.group(0).split()[-1]}: peak scaled by {slices}/{MIG_COMPUTE_SLICES}"
        f" compute slices of {acc.key} (approximate)"
    )
    return Resolution(acc, pattern, scale, (warning,), device)


def _shadow_note(acc: Accelerator) -> tuple[str, ...]:
    others = [
        a.key for a in accelerators() if a is not acc and acc.key in map(str.lower, a.patterns)
    ]
    if not others:
        return ()
    return (f"{acc.key!r} is read as the table key; a device name with it resolves to {others[0]}",)


def _gcd_note(acc: Accelerator) -> tuple[str, ...]:
    if acc.key.endswith("-gcd"):
        return (f"{acc.key}: per-GCD peak (one torch device is half an MI250/MI250X module)",)
    return ()


def suggest(name: str, limit: int = 3) -> list[str]:
    """Table keys close to an unknown name, for the error message."""
    wanted = name.strip().lower()
    # Variants of the family named come first: "A100" means one of the a100-* rows.
    family = [acc.key for acc in accelerators() if acc.key.startswith(wanted)]
    if family:
        return family[:limit]
    by_text: dict[str, str] = {}
    for acc in accelerators():
        by_text[acc.key] = acc.key
        for pattern in acc.patterns:
            by_text.setdefault(pattern.lower(), acc.key)
    close = difflib.get_close_matches(wanted, list(by_text), n=limit * 3, cutoff=0.4)
    keys = list(dict.fromkeys(by_text[c] for c in close))
    return keys[:limit]


def unknown_message(name: str) -> str:
    """One line naming the unknown device and the closest keys."""
    hints = suggest(name)
    hint = f"; did you mean {', '.join(hints)}?" if hints else ""
    return f"unknown hardware {name!r}{hint} (see `loganalyzer hardware`; or pass --peak-tflops)"


def resolution_json(resolution: Resolution, source: str | None) -> dict[str, object]:
    """The `gpu` object of the summary and mfu documents: which entry, matched how, from where."""
    return {
        "key": resolution.accelerator.key,
        "name": resolution.accelerator.name,
        "matched": resolution.matched,
        "scale": resolution.scale,
        "source": source,
    }


def peak_json(
    resolution: Resolution | None, dtype: str, override: float | None = None
) -> dict[str, object] | None:
    """The `peak` JSON object: from `--peak-tflops` if given, else the table; None if neither."""
    dtype = normalise_dtype(dtype)
    if override is not None:
        return {"tflops_per_gpu": override, "dtype": dtype, "source": "--peak-tflops"}
    if resolution is None:
        return None
    peak = resolution.peak_tflops(dtype)
    if peak is None:
        return None
    return {
        "tflops_per_gpu": peak,
        "dtype": dtype,
        "source": f"{resolution.accelerator.key}: {resolution.accelerator.source}",
    }


def accelerator_json(
    acc: Accelerator,
    matched: str | None = None,
    scale: float = 1.0,
    memory_gb: float | None = None,
) -> dict[str, object]:
    """The `loganalyzer.hardware/1` object for one row."""
    return {
        "schema": "loganalyzer.hardware/1",
        "key": acc.key,
        "name": acc.name,
        "matched": matched,
        "peak_tflops": {d: (None if p is None else p * scale) for d, p in acc.peaks.items()},
        "memory_gb": acc.memory_gb if memory_gb is None else memory_gb,
        "mem_bw_tbs": acc.mem_bw_tbs,
        "patterns": list(acc.patterns),
        "scale": scale,
        "source": acc.source,
    }
