"""Device-name resolution and the peak table."""

from __future__ import annotations

import csv

import pytest

from loganalyzer.flops.peaks import (
    accelerators,
    peak_json,
    peak_tflops,
    resolve,
    suggest,
    unknown_message,
)
from tests.conftest import SHARED

SPEC = SHARED / "spec" / "hardware-peaks.csv"
KEYS = {a.key for a in accelerators()}
ALL_PATTERNS = [(a.key, p) for a in accelerators() for p in a.patterns if p.lower() not in KEYS]


@pytest.mark.parametrize(("key", "pattern"), ALL_PATTERNS)
def test_every_pattern_resolves_to_its_row(key: str, pattern: str) -> None:
    resolution = resolve(pattern)
    assert resolution is not None and resolution.accelerator.key == key


@pytest.mark.parametrize("key", [a.key for a in accelerators()])
def test_every_key_resolves(key: str) -> None:
    resolution = resolve(key.upper())
    assert resolution is not None and resolution.accelerator.key == key


def test_table_keys_unique_and_sourced() -> None:
    keys = [a.key for a in accelerators()]
    assert len(keys) == len(set(keys))
    assert all(a.source for a in accelerators())


def test_table_covers_every_spec_row_with_the_same_dense_peaks() -> None:
    assert SPEC.exists(), f"{SPEC} missing: the shared reference material must sit beside the repo"
    ours = {a.key: a for a in accelerators()}
    for row in csv.DictReader(SPEC.read_text(encoding="utf-8").splitlines()):
        for dtype in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"):
            expected = float(row[dtype]) if row[dtype] else None
            assert ours[row["key"]].peaks[dtype] == expected, (row["key"], dtype)


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H100 NVL", "h100-nvl"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA A10G", "a10g"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40", "l40"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA H20", "h20"),
        ("NVIDIA H200", "h200-sxm"),
        ("NVIDIA H200 NVL", "h200-nvl"),
        ("NVIDIA GH200 480GB", "gh200-96gb"),
        ("NVIDIA GH200 144G HBM3e", "gh200-144gb"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "gb200"),
        ("NVIDIA B300", "b300"),
        ("NVIDIA GB300", "gb300"),
        ("Tesla V100-SXM2-32GB", "v100-sxm2"),
        ("Tesla V100S-PCIE-32GB", "v100s-pcie"),
        ("AMD Instinct MI300X", "mi300x"),
        ("MI300X VF", "mi300x"),
        ("AMD Instinct MI250X", "mi250x-gcd"),
        ("AMD Instinct MI250X/MI250", "mi250x-gcd"),
        ("AMD Instinct MI250", "mi250-gcd"),
        ("mi250x", "mi250x"),
        ("TPU v5 lite", "tpu-v5e"),
        ("TPU v5p", "tpu-v5p"),
        ("TPU v5", "tpu-v5p"),
        ("nvidia h100 80gb hbm3", "h100-sxm"),
    ],
)
def test_traps(name: str, key: str) -> None:
    resolution = resolve(name)
    assert resolution is not None and resolution.accelerator.key == key


@pytest.mark.parametrize(("key", "device_row"), [("mi250x", "mi250x-gcd"), ("trn2", "trn2-lnc2")])
def test_key_shadowing_pattern_warns(key: str, device_row: str) -> None:
    resolution = resolve(key)
    assert resolution is not None and resolution.accelerator.key == key
    assert device_row in resolution.warnings[-1]


def test_gcd_resolution_warns() -> None:
    resolution = resolve("AMD Instinct MI250X")
    assert resolution is not None and "per-GCD" in resolution.warnings[0]


@pytest.mark.parametrize(
    ("name", "key", "slices"),
    [
        ("NVIDIA A100-SXM4-40GB MIG 3g.20gb", "a100-sxm4-40gb", 3),
        ("NVIDIA H100 80GB HBM3 MIG 1g.10gb", "h100-sxm", 1),
        ("NVIDIA A100-SXM4-80GB MIG 1c.7g.80gb", "a100-sxm4-80gb", 1),
    ],
)
def test_mig_slices_scale_peak(name: str, key: str, slices: int) -> None:
    resolution = resolve(name)
    assert resolution is not None and resolution.accelerator.key == key
    full = peak_tflops(resolution.accelerator, "bf16")
    assert full is not None
    assert resolution.peak_tflops("bf16") == pytest.approx(full * slices / 7)
    assert "MIG" in resolution.warnings[0]


def test_unknown_name_suggests_keys() -> None:
    assert resolve("NVIDIA Z9000") is None
    assert "h100-sxm" in suggest("h100-sxmm")
    message = unknown_message("h100-sxmm")
    assert message.startswith("unknown hardware 'h100-sxmm'; did you mean h100-sxm")


def test_dense_peaks_never_sparse() -> None:
    h100 = resolve("h100-sxm")
    assert h100 is not None
    assert peak_tflops(h100.accelerator, "bf16") == 989.5
    assert peak_tflops(h100.accelerator, "torch.bfloat16") == 989.5
    assert peak_tflops(h100.accelerator, "fp8") == 1979
    l4 = resolve("NVIDIA L4")
    assert l4 is not None and peak_tflops(l4.accelerator, "bf16") == 121


def test_missing_dtype_is_none() -> None:
    v100 = resolve("v100-sxm2")
    assert v100 is not None and peak_tflops(v100.accelerator, "bf16") is None
    with pytest.raises(ValueError, match="unknown dtype"):
        peak_tflops(v100.accelerator, "fp64")


def test_peak_json() -> None:
    resolution = resolve("mi300x")
    assert peak_json(None, "bf16") is None
    assert peak_json(None, "bfloat16", 500.0) == {
        "tflops_per_gpu": 500.0,
        "dtype": "bf16",
        "source": "--peak-tflops",
    }
    document = peak_json(resolution, "bf16")
    assert document is not None and document["tflops_per_gpu"] == 1307.4
    assert str(document["source"]).startswith("mi300x: ")


def test_a_device_name_states_its_memory_variant() -> None:
    found = resolve("Tesla V100-PCIE-16GB")
    assert found is not None and found.accelerator.key == "v100-pcie"
    assert found.memory_gb == 16
    assert resolve("v100-pcie").memory_gb == 32  # type: ignore[union-attr]


@pytest.mark.parametrize("family", ["A100", "H100"])
def test_a_family_name_suggests_its_variants_first(family: str) -> None:
    assert all(key.startswith(family.lower()) for key in suggest(family))
