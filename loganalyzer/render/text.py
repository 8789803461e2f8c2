"""The terminal summary: lays out the summary document, computes nothing."""

from __future__ import annotations

from typing import Any

from loganalyzer.render.escape import terminal_safe
from loganalyzer.render.numbers import number, percent


def _rows(rows: list[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in rows)
    return [f"  {label:<{width}}  {value}" for label, value in rows]


def render_summary(doc: dict[str, Any]) -> str:
    """A few aligned sections a person reads top to bottom."""
    run = doc["run"]
    model = run["model"]
    par = run["parallelism"]
    lines = [f"loganalyzer {doc['tool_version']} — {run['framework']}"]
    for source in doc["sources"]:
        lines.append(f"  {source['path']}  ({source['format']}, {source['records']} records)")

    lines.append("")
    lines.append("Run")
    gpu = run["gpu"]
    shape = ", ".join(
        f"{k}={model[k]}" for k in ("num_layers", "hidden_size", "num_attention_heads")
    )
    lines += _rows(
        [
            ("model", shape),
            ("params", number(model.get("params"), ",d")),
            ("GPUs", f"{number(run['num_gpus'], 'd')} × {gpu['name'] if gpu else 'unknown GPU'}"),
            (
                "parallelism",
                " ".join(f"{k[0].upper()}P={v}" for k, v in par.items() if v is not None)
                or "unknown",
            ),
            ("precision", number(run["dtype"])),
            ("recompute", number(run["recompute"])),
            (
                "batch",
                f"{number(run['global_batch_size'], 'd')} × {number(run['seq_length'], 'd')} tokens"
                f" = {number(run['tokens_per_iteration'], ',d')} tokens/iteration",
            ),
        ]
    )

    it = doc["iterations"]
    st = doc["step_time_s"]
    lines.append("")
    lines.append("Iterations")
    lines += _rows(
        [
            (
                "logged",
                f"{it['logged']} records, iterations {it['first']}–{it['last']}"
                if it["logged"]
                else "no iteration records",
            ),
            ("segments", f"{it['segments']} (restarts: {max(it['segments'] - 1, 0)})"),
            ("step time", f"median {number(st['median'], '.4g', ' s')} (steady state)"),
            (
                "",
                f"mean {number(st['mean'], '.4g', ' s')}, p90 {number(st['p90'], '.4g', ' s')}, "
                f"min {number(st['min'], '.4g', ' s')}, max {number(st['max'], '.4g', ' s')}",
            ),
            ("throughput", f"{number(doc['throughput']['tokens_per_s'], ',.0f')} tokens/s"),
        ]
    )

    flops = doc["flops"]
    reported = doc["reported"]
    peak = doc.get("peak")
    lines.append("")
    lines.append("Efficiency")
    rows = []
    if flops["per_iteration"] is not None:
        rows += [
            ("formula", str(flops["formula"])),
            ("FLOPs/iteration", number(flops["per_iteration"], ".4e")),
            ("TFLOPS/GPU", number(flops["tflops_per_gpu"], ".1f")),
            (
                "peak TFLOPS/GPU",
                f"{number(peak['tflops_per_gpu'], 'g')} ({peak['dtype']}, dense)"
                if peak
                else "unknown",
            ),
            ("MFU", f"{percent(flops['mfu'])} steady, {percent(flops['mfu_overall'])} overall"),
            ("HFU", percent(flops["hfu"])),
        ]
    else:
        rows.append(("recomputed", "unknown (see warnings)"))
    rows.append(("reported TFLOPS/GPU", number(reported["tflops_per_gpu"], ".1f")))
    if reported["recomputed_over_reported"] is not None:
        rows.append(("recomputed/reported", number(reported["recomputed_over_reported"], ".3f")))
    lines += _rows(rows)
    if reported.get("explanation"):
        lines.append(f"  {reported['explanation']}")
    if flops["derivation"]:
        lines.append("")
        lines += ["  " + line for line in flops["derivation"].splitlines()]

    lines.append("")
    lines.append("Where the time went")
    lines.append(f"  {doc['time']['summary']}")
    slow = doc["slow_steps"]
    if slow:
        kinds = ", ".join(
            f"{sum(1 for s in slow if s['kind'] == kind)} {kind}"
            for kind in ("spike", "periodic", "sustained")
            if any(s["kind"] == kind for s in slow)
        )
        lines.append(f"  slow steps: {kinds}")
        for step in sorted(slow, key=lambda s: -s["lost_s"])[:5]:
            took, lost = (
                number(step["step_time_s"], ".4g", " s"),
                number(step["lost_s"], ".4g", " s"),
            )
            lines.append(
                f"    iteration {step['iteration']}: {took} = {number(step['ratio'], '.2f')}×"
                f" baseline, {lost} lost ({step['kind']})"
            )
    for restart in doc["restarts"]:
        lines.append(
            f"  restart after iteration {restart['after_iteration']}, resumed at "
            f"{restart['resumed_at']}: gap {number(restart['gap_s'], '.4g', ' s')}, "
            f"{restart['lost_iterations']} iterations redone, "
            f"{number(restart['lost_s'], '.4g', ' s')} lost"
        )

    if doc.get("verdicts"):
        lines.append("")
        lines.append("Verdicts")
        for verdict in doc["verdicts"]:
            lines.append(f"  [{verdict['severity']}] {verdict['code']}: {verdict['message']}")
    return terminal_safe("\n".join(lines))
