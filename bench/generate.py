"""Deterministic benchmark inputs: large Megatron-LM logs in the shapes real runs print.

Every generator writes the same bytes for the same arguments (no clock, no unseeded random),
so a table measured today can be compared with one measured after a change. The line
formats are Megatron-LM's own format strings (see the shared FORMATS reference); the start
of each log (world size, arguments dump) is the head of a bundled fixture, so the config is
real.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "megatron"

# Lines of the current-format log that are not Megatron's: launcher, NCCL and Python noise.
_NOISE = (
    "r7i3n0:38600:38856 [2] NCCL INFO comm 0x1450d4001060 rank {i} nranks 64 cudaDev 2 busId 48000",
    "/usr/lib/python3/dist-packages/torch/distributed/c10d.py:12: UserWarning: barrier() is slow",
    "[W socket.cpp:464] [c10d] The server socket has failed to bind to port 29500 (errno: 98)",
)

_BLOCK = 1000  # iterations written per call to write()

# The dates of the run's days (six seconds an iteration: 2.4 M iterations take 167 days).
_DAYS = [(date(2025, 9, 1) + timedelta(days=d)).isoformat() for d in range(2000)]


def _head(fixture: str, prefix: str) -> str:
    """The fixture's lines before its first iteration line, each with `prefix`."""
    lines = []
    for line in (FIXTURES / fixture).read_text().splitlines():
        if " iteration " in line and "|" in line:
            break
        lines.append(prefix + line)
    return "\n".join(lines) + "\n"


def _current_block(first: int) -> Iterator[str]:
    """Iterations `first`..`first + _BLOCK - 1` as Megatron-LM core 0.12 prints them under
    `srun --label`: timestamped iteration lines (rank 63), a memory line every 3 iterations,
    a (min, max) timer block every 5, and about 30 % noise lines."""
    for i in range(first, first + _BLOCK):
        second = 8 * 3600 + 9 + i * 6
        yield (
            f"63:  [{_DAYS[second // 86400]} {second // 3600 % 24:02d}:{second // 60 % 60:02d}:"
            f"{second % 60:02d}.{i * 7919 % 1000000:06d}] iteration {i:8d}/ 5000000 |"
            f" consumed samples: {i * 128:12d} |"
            f" elapsed time per iteration (ms): {6000 + i * 31 % 400:.1f} |"
            f" throughput per GPU (TFLOP/s/GPU): {130 + i * 17 % 90 / 10:.1f} |"
            f" learning rate: {3e-4 * (1 + i % 1000) / 1000:.6E} | global batch size:   128 |"
            f" lm loss: {2 + i * 13 % 1000 / 1000:.6E} | loss scale: 1.0 |"
            f" grad norm: {0.5 + i * 7 % 100 / 100:.3f} | number of skipped iterations:   0 |"
            " number of nan iterations:   0 |\n"
        )
        if i % 3 == 0:
            yield (
                f"{i % 8}: [Rank {i % 8}] (after {i} iterations) memory (MB) |"
                f" allocated: {17694.36 + i % 50:.2f} | max allocated: 20045.01 |"
                " reserved: 24084.00 | max reserved: 24084.00\n"
            )
        if i % 5 == 0:
            yield "0: (min, max) time across ranks (ms):\n"
            yield f"0:     {'forward-backward ':.<48}: ({5900 + i % 90:.2f}, {5950 + i % 97:.2f})\n"
            yield f"0:     {'optimizer ':.<48}: ({40 + i % 9:.2f}, {45 + i % 11:.2f})\n"
        yield f"{i % 64}: " + _NOISE[i % len(_NOISE)].format(i=i % 64) + "\n"


def _legacy_block(first: int) -> Iterator[str]:
    """Iterations as Megatron-LM printed them in 2021 (v2.x, the BigScience runs): no timestamp,
    a one-line `time (ms)` report of eleven timers after every iteration line, the memory
    lines of all 32 ranks every 10 iterations, and some noise."""
    for i in range(first, first + _BLOCK):
        yield (
            f" iteration {i:8d}/  292968 | consumed samples: {i * 4:12d} |"
            f" elapsed time per iteration (ms): {1600 + i * 31 % 400:.1f} |"
            f" learning rate: {1.5e-4 * (1 + i % 1000) / 1000:.3E} | global batch size:     4 |"
            f" lm loss: {2 + i * 13 % 1000 / 1000:.6E} | loss scale: 16384.0 |"
            f" grad norm: {0.5 + i * 7 % 100 / 100:.3f} | number of skipped iterations:   0 |"
            " number of nan iterations:   0 |\n"
        )
        yield (
            f"time (ms) | forward-compute: {265 + i % 50:.2f} | forward-recv: {1118 + i % 70:.2f}"
            f" | backward-compute: {462 + i % 30:.2f} | backward-send: 65.31"
            " | backward-send-forward-recv: 152.65 | backward-params-all-reduce: 22.00"
            " | backward-embedding-all-reduce: 1000.10 | optimizer-copy-to-main-grad: 9.24"
            " | optimizer-unscale-and-check-inf: 73.55 | optimizer: 82.95"
            f" | batch-generator: {2 + i % 5:.2f}\n"
        )
        if i % 10 == 0:
            for rank in range(32):
                yield (
                    f"[Rank {rank}] (after {i} iterations) memory (MB) |"
                    f" allocated: {17694.361328125 + rank:.9f} | max allocated: 20045.0126953125 |"
                    " reserved: 24084.0 | max reserved: 24084.0\n"
                )
        if i % 4 == 0:
            yield _NOISE[i % len(_NOISE)].format(i=i % 32) + "\n"


FORMATS = {
    "current": (_current_block, ("core_0_12_llama3_8b_throughput.log", "0: ")),
    "legacy": (_legacy_block, ("bigscience_gpt2_tp4_pp8.out", "")),
}


def write_log(path: Path, size_bytes: int, kind: str = "current", first: int = 1) -> int:
    """Write a `kind` log of at least `size_bytes` bytes to `path`; returns the iteration
    lines written (so a parse can be checked against it)."""
    block, (fixture, prefix) = FORMATS[kind]
    written = 0
    iteration = first
    with path.open("w") as out:
        written += out.write(_head(fixture, prefix))
        while written < size_bytes:
            written += out.write("".join(block(iteration)))
            iteration += _BLOCK
    return iteration - first


def write_run_dir(folder: Path, files: int, size_bytes: int) -> int:
    """A run directory of `files` logs of `size_bytes` each, as a job array or a run
    restarted that often leaves: each file continues the iterations of the one before."""
    folder.mkdir(parents=True, exist_ok=True)
    total = 0
    for index in range(files):
        total += write_log(folder / f"slurm-{index:04d}.out", size_bytes, first=1 + total)
    return total


def main() -> None:
    """`python -m bench.generate current|legacy MEGABYTES PATH`: one log of that size (the
    memory figures of the README's memory model were measured on 1 GB and 4 GB ones)."""
    import sys

    kind, megabytes, path = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    print(f"{path}: {write_log(path, megabytes << 20, kind):,} iterations")


if __name__ == "__main__":
    main()
