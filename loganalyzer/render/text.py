"""The terminal summary: lays out the summary document, computes nothing."""

from __future__ import annotations

from typing import Any

from loganalyzer.render.clip import clip
from loganalyzer.render.clocks import pace_label
from loganalyzer.render.ending import ending_sentence, evidence_lines, restart_sentence
from loganalyzer.render.escape import terminal_safe
from loganalyzer.render.loglines import location
from loganalyzer.render.numbers import (
    TIMES,
    UNKNOWN,
    duration,
    iterations,
    number,
    percent,
    plural,
    ratio,
    seconds,
)
from loganalyzer.render.why import render_why, unknown_mfu

# An evidence line is cut here in the terminal (the JSON has it whole, up to its limit).
EVIDENCE_WIDTH = 300
# The slow steps the terminal lists, those that lost the most time.
SLOW_LISTED = 5


def _rows(rows: list[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in rows)
    return [f"  {label:<{width}}  {value}" for label, value in rows]


def _known(pairs: list[tuple[str, object]]) -> str:
    """`name=value` for the values known, and the unknown ones named once."""
    shown = [f"{name}={value}" for name, value in pairs if value is not None]
    missing = [name for name, value in pairs if value is None]
    if not shown:
        return UNKNOWN
    return ", ".join(shown) + (f" ({', '.join(missing)} {UNKNOWN})" if missing else "")


def _gpus(run: dict[str, Any]) -> str:
    gpu, count = run["gpu"], run["num_gpus"]
    if gpu is None and count is None:
        return UNKNOWN
    name = gpu["name"] if gpu else f"GPU type {UNKNOWN}"
    if gpu and gpu["source"] not in ("flag", "log"):  # read from a run's metadata: say so
        name += f" (from {gpu['source']})"
    return f"{count} {TIMES} {name}" if count is not None else f"{name} (count {UNKNOWN})"


def _batch(run: dict[str, Any]) -> str:
    batch, seq, tokens = run["global_batch_size"], run["seq_length"], run["tokens_per_iteration"]
    if tokens is not None:
        return f"{batch} {TIMES} {seq} tokens = {number(tokens, ',d')} tokens/iteration"
    if batch is not None:
        return f"{plural(batch, 'sequence')}/iteration (sequence length {UNKNOWN})"
    if seq is not None:
        return f"sequences of {seq} tokens (batch size {UNKNOWN})"
    return UNKNOWN


def _params(model: dict[str, Any]) -> str:
    total = number(model.get("params"), ",d")
    active = model.get("active_params")
    if active is None or active == model.get("params"):
        return total
    return f"{total} total, {number(active, ',d')} active per token"


def _run_section(doc: dict[str, Any]) -> list[str]:
    run = doc["run"]
    model = run["model"]
    par = run["parallelism"]
    shape = _known([(k, model[k]) for k in ("num_layers", "hidden_size", "num_attention_heads")])
    precision = number(run["dtype"]) + (" (assumed)" if run.get("dtype_assumed") else "")
    recompute = number(run["recompute"]) + (" (assumed)" if run.get("recompute_assumed") else "")
    return [
        "Run",
        *_rows(
            [
                ("model", shape),
                ("params", _params(model)),
                ("GPUs", _gpus(run)),
                (
                    "parallelism",
                    " ".join(f"{k[0].upper()}P={v}" for k, v in par.items() if v is not None)
                    or UNKNOWN,
                ),
                ("precision", precision),
                ("recompute", recompute),
                ("batch", _batch(run)),
            ]
        ),
    ]


def _iterations_section(doc: dict[str, Any]) -> list[str]:
    it = doc["iterations"]
    st = doc["step_time_s"]
    restarts = max(it["segments"] - 1, 0)
    logged = (
        f"{plural(it['logged'], 'record')}, {iterations(it['first'], it['last'])}"
        if it["logged"]
        else "no iteration records"
    )
    steady = (
        f"{pace_label(st.get('pace_method'))} {seconds(st['median'])} "
        f"over {plural(st['steady_records'], 'record')}"
    )
    if doc.get("confidence") == "low":
        steady += " (low confidence)"
    return [
        "Iterations",
        *_rows(
            [
                ("logged", logged),
                ("segments", f"{it['segments']} ({plural(restarts, 'restart')})"),
                ("step time", steady),
                (
                    "",
                    f"all records: mean {seconds(st['mean'])}, p90 {seconds(st['p90'])}, "
                    f"min {seconds(st['min'])}, max {seconds(st['max'])}",
                ),
                ("throughput", f"{number(doc['throughput']['tokens_per_s'], ',.0f')} tokens/s"),
            ]
        ),
    ]


def _mfu(flops: dict[str, Any]) -> list[tuple[str, str]]:
    if all(flops.get(k) is None for k in ("mfu", "mfu_overall", "mfu_goodput")):
        return [("MFU", unknown_mfu(flops, None))]
    rows = [("MFU", f"{percent(flops['mfu'])} at the steady pace")]
    rows.append(("", f"{percent(flops['mfu_overall'])} over all logged step time"))
    if "mfu_goodput" in flops:
        rows.append(
            ("", f"{percent(flops['mfu_goodput'])} goodput (useful work over the wall clock)")
        )
    if flops.get("mfu_vs_bf16") is not None:
        rows.append(("", f"{percent(flops['mfu_vs_bf16'])} against the bf16 peak"))
    return rows


def _efficiency_section(doc: dict[str, Any]) -> list[str]:
    flops = doc["flops"]
    reported = doc["reported"]
    peak = doc.get("peak")
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
                else UNKNOWN,
            ),
            *_mfu(flops),
            ("HFU", percent(flops["hfu"])),
        ]
    else:
        peak_tflops = peak.get("tflops_per_gpu") if isinstance(peak, dict) else None
        rows.append(("MFU", unknown_mfu(flops, peak_tflops)))
    rows.append(("reported TFLOPS/GPU", number(reported["tflops_per_gpu"], ".1f")))
    if reported.get("mfu") is not None:
        rows.append(("reported MFU", percent(reported["mfu"])))
    if reported["recomputed_over_reported"] is not None:
        rows.append(("recomputed/reported", ratio(reported["recomputed_over_reported"], 3)))
    lines = ["Efficiency", *_rows(rows)]
    if reported.get("explanation"):
        lines.append(f"  {reported['explanation']}")
    if flops["derivation"]:
        lines.append("")
        lines += ["  " + line for line in flops["derivation"].splitlines()]
    return lines


def _slow_step(step: dict[str, Any]) -> str:
    span = iterations(step["first_iteration"], step["last_iteration"])
    lost = duration(step["lost_s"])
    baseline = f"{ratio(step['ratio'])} the baseline of {seconds(step['baseline_s'])}"
    if step["kind"] == "sustained":
        records = (
            f" ({plural(step['records'], 'record')}, {step['first_record']} to "
            f"{step['last_record']})"
            if step["interval"] > 1
            else ""
        )
        return (
            f"{span}{records} ran at {seconds(step['step_time_s'])} per iteration, "
            f"{baseline}: {lost} lost (sustained)"
        )
    if step["interval"] > 1:
        return (
            f"{span} averaged {seconds(step['step_time_s'])}, {baseline}: {lost} lost "
            f"({step['kind']})"
        )
    return f"{span} took {seconds(step['step_time_s'])}, {baseline}: {lost} lost ({step['kind']})"


def _time_section(doc: dict[str, Any]) -> list[str]:
    lines = ["Where the time went", f"  {doc['time']['summary']}"]
    slow = doc["slow_steps"]
    if slow:
        kinds = ", ".join(
            f"{sum(1 for s in slow if s['kind'] == kind)} {kind}"
            for kind in ("spike", "stall", "periodic", "sustained")
            if any(s["kind"] == kind for s in slow)
        )
        lines.append(f"  slow steps: {kinds}")
        if len(slow) > SLOW_LISTED:
            lines.append(f"  {SLOW_LISTED} slowest of {len(slow)} (the JSON has them all):")
        for step in sorted(slow, key=lambda s: -s["lost_s"])[:SLOW_LISTED]:
            lines.append(f"    {_slow_step(step)}")
    for restart in doc["restarts"]:
        gap = duration(restart["gap_s"]) if restart["gap_s"] is not None else UNKNOWN
        lines.append(
            f"  {restart_sentence(restart)}, gap {gap}, {duration(restart['lost_s'])} lost"
        )
    return lines


def _incidents_section(doc: dict[str, Any]) -> list[str]:
    """The training instabilities, worst kinds first, at most `_INCIDENTS_LISTED`."""
    found = doc.get("incidents") or []
    if not found:
        return []
    lines = ["Incidents"]
    for incident in found[:_INCIDENTS_LISTED]:
        span = iterations(incident["first_iteration"], incident["last_iteration"])
        evidence = incident.get("evidence") or {}
        where = (
            f" ({location(doc, evidence['file'], evidence['line'], *_step_and_tag(incident))})"
            if evidence.get("file") and evidence.get("line") is not None
            else ""
        )
        lines.append(f"  {incident['kind']}: {span}, {_incident_size(incident)}{where}")
    if len(found) > _INCIDENTS_LISTED:
        lines.append(f"  {len(found) - _INCIDENTS_LISTED} more (the JSON has them all)")
    return lines


_INCIDENTS_LISTED = 10


def _step_and_tag(incident: dict[str, Any]) -> tuple[object, str | None]:
    """The step an incident's evidence is at and the column it measured (for its tag)."""
    return (incident.get("evidence") or {}).get("iteration"), incident.get("metric")


def _incident_size(incident: dict[str, Any]) -> str:
    kind = incident["kind"]
    counted = plural(incident["iterations"], "iteration")
    if kind in ("nan", "inf"):
        return f"{counted} ({incident['metric']})"
    if kind == "loss_scale_collapse":
        return (
            f"loss scale {number(incident['baseline'], ',g')} to "
            f"{number(incident['peak'], ',g')}, {counted} skipped"
        )
    what = "grad norm" if kind == "grad_norm_spike" else "loss"
    size = (
        f"{what} {number(incident['peak'], '.4g')} against {number(incident['baseline'], '.4g')}"
        f" ({ratio(incident['ratio'])})"
    )
    back = incident.get("recovery_iterations")
    if kind == "divergence":
        return size
    return size + (
        f", back in {plural(back, 'iteration')}" if back is not None else ", not back by the end"
    )


def render_summary(doc: dict[str, Any]) -> str:
    """How the run ended, then a few aligned sections a person reads top to bottom."""
    run = doc["run"]
    lines = []
    if doc.get("outcome"):
        lines.append(ending_sentence(doc["outcome"]))
        lines += [f"  {line[:EVIDENCE_WIDTH]}" for line in evidence_lines(doc["outcome"])]
        lines.append("")
    lines.append(f"loganalyzer {doc['tool_version']} — {run['framework']}")
    for source in doc["sources"]:
        lines.append(
            f"  {source['path']}  ({source['format']}, {plural(source['records'], 'record')})"
        )
    for section in (_run_section, _iterations_section, _efficiency_section, _time_section):
        lines.append("")
        lines += section(doc)
    if incidents := _incidents_section(doc):
        lines += ["", *incidents]
    lines += render_why(doc)
    if doc.get("verdicts"):
        lines.append("")
        lines.append("Verdicts")
        for verdict in doc["verdicts"]:
            lines.append(f"  [{verdict['severity']}] {verdict['code']}: {verdict['message']}")
    if doc.get("warnings"):
        lines.append("")
        lines.append("Warnings")
        lines += [f"  {clip(warning)}" for warning in doc["warnings"]]
    return terminal_safe("\n".join(lines))
