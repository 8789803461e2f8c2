"""`loganalyzer hardware`: the dense peak table, or which entry a device name resolves to."""

from __future__ import annotations

import json

import click

from loganalyzer.commands.options import debug_option
from loganalyzer.flops import peaks
from loganalyzer.render.numbers import number
from loganalyzer.terminal import echo

_HARDWARE_HELP = """Show the peak table, or which entry a device name resolves to.

Peaks are dense TFLOP/s (never the 'with sparsity' figures).

\b
Examples:
  loganalyzer hardware
  loganalyzer hardware "NVIDIA H100 80GB HBM3"
  loganalyzer hardware mi300x --json
  loganalyzer hardware --json
"""


@click.command("hardware", help=_HARDWARE_HELP)
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print loganalyzer.hardware/1 JSON.")
@debug_option
def hardware_command(name: str | None, as_json: bool) -> None:
    if name is None:
        rows = peaks.accelerators()
        if as_json:
            echo(json.dumps([peaks.accelerator_json(a) for a in rows], indent=2))
            return
        echo(f"{'key':<16} {'bf16':>8} {'fp8':>8} {'fp16':>8}  name")
        for acc in rows:
            shown = [number(acc.peaks[d], "g", missing="n/a") for d in ("bf16", "fp8", "fp16")]
            echo(f"{acc.key:<16} {shown[0]:>8} {shown[1]:>8} {shown[2]:>8}  {acc.name}")
        return
    resolution = peaks.resolve(name)
    if resolution is None:
        raise click.BadParameter(peaks.unknown_message(name), param_hint="NAME")
    acc = resolution.accelerator
    for warning in resolution.warnings:
        echo(f"warning: {warning}", err=True)
    document = peaks.accelerator_json(
        acc, resolution.matched, resolution.scale, resolution.memory_gb
    )
    if as_json:
        echo(json.dumps(document, indent=2))
        return
    echo(f"{'key':<12} {acc.key}\n{'name':<12} {acc.name}\n{'matched':<12} {resolution.matched}")
    for dtype in peaks.DTYPES:
        peak = resolution.peak_tflops(dtype)
        echo(f"{dtype:<12} {number(peak, 'g', missing='n/a')}")
    memory = number(resolution.memory_gb, "g")
    bandwidth = number(acc.mem_bw_tbs, "g")
    echo(f"{'memory':<12} {memory} GB, {bandwidth} TB/s")
    echo(f"{'source':<12} {acc.source}")
