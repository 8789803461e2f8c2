"""The sentences the outputs say about a run, written in one place from the analysis' facts.

The analysis computes numbers, kinds and iterations and stops there; this module words them,
so that the document builder and every renderer say the same thing the same way, and the
analysis stands below the renderers (tests/test_import_direction.py holds the direction).
"""

from __future__ import annotations

from collections.abc import Mapping

from loganalyzer.analysis.accounting import TimeAccounting
from loganalyzer.analysis.goodput import HANG, PRODUCTIVE, UNLOGGED, BudgetLine, Goodput, Held
from loganalyzer.analysis.incident_verdicts import IncidentVerdict
from loganalyzer.analysis.incidents import Incident
from loganalyzer.analysis.levers import Lever, LeverFacts
from loganalyzer.analysis.steady import WARMUP_FACTOR, Warmup
from loganalyzer.flops.formulas import RatioReading
from loganalyzer.render.ending import evidence_location
from loganalyzer.render.evidence import cause_evidence
from loganalyzer.render.numbers import (
    TIMES,
    UNKNOWN,
    duration,
    iterations,
    number,
    percent,
    plural,
    ratio,
)

# How each framework counts the FLOPs it prints (the keys of `flops.formulas.EXPLAINED`).
COUNTS = {
    "megatron-lm": "Megatron-LM (core >= 0.12) uses this same formula",
    "megatron-lm-0.11": (
        "Megatron-LM up to core 0.11 does not halve attention for the causal mask"
        " and applies MoE top-k to every layer"
    ),
    "megatron-deepspeed": (
        "Megatron-DeepSpeed's TFLOPs uses 24·factor·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)),"
        " factor 4 with activation checkpointing (it counts the recompute), 32 for GLU"
    ),
    "megatron-deepspeed-microsoft": (
        "current Megatron-DeepSpeed counts MACs x2 x3, adds recompute, and its GQA term"
        " 2//gqa is 0 for gqa >= 3"
    ),
    "hf-trainer": (
        "HF Trainer's total_flos is 6 × tokens × non-embedding parameters: no attention"
        " term, all MoE experts and padding counted"
    ),
    "torchtitan": "torchtitan counts 6·(N - embeddings) + 12·l·a·d·s per token, non-causal",
    "nanotron": (
        "nanotron's model_tflops_per_gpu counts every matmul of a gated-MLP llama x3, attention"
        " in full (not halved for the causal mask), the unpadded vocabulary"
    ),
    "nanogpt": "nanoGPT counts 6N + 12·l·a·d·s per token and divides by a fixed A100 peak of 312",
    # MaxText's calculate_tflops_training_per_device, per device: 6·tokens·(MLP with one
    # matrix per activation + 1, QKV, output projection, logits) + 12·l·s·q·d per token
    "maxtext": (
        "MaxText (since July 2025) counts this same formula, causal attention halved;"
        " sliding-window and chunked-attention layers only over their window"
    ),
    "maxtext-2024": (
        "MaxText from May 2024 (its PR 644) to July 2025 does not halve attention for the"
        " causal mask; before May 2024 its MLP count differed too (llama2-7b: 1033.2"
        " against 1053.4 TFLOPs a step)"
    ),
    "deepspeed-profiler": (
        "the DeepSpeed flops profiler counts executed module ops: recompute included,"
        " some fused kernels missed"
    ),
}


def time_summary(time: TimeAccounting) -> str:
    """Where the logged time went, in one sentence (the document's `time.summary`)."""
    if time.logged_s <= 0:
        return "No timed records were logged."
    share = time.productive_s / time.logged_s
    sentence = (
        f"Of {duration(time.logged_s)} logged, {duration(time.productive_s)} ({percent(share)}) "
        f"ran at the steady pace; {duration(time.slow_steps_s)} went to slow steps, "
        f"{duration(time.warmup_s)} to warm-up and {duration(time.redone_s)} to redone work"
    )
    outside = time.restart_gaps_s + time.stalls_s
    if outside > 0:
        sentence += f", and restarts and stalls added {duration(outside)} of wall-clock time"
    return sentence + "."


def warmup_reason(warmup: Warmup) -> str:
    """Why a segment's warm-up was excluded (the document's `warmup[].reason`)."""
    if warmup.fixed is not None:
        return (
            f"--warmup {warmup.fixed}: the first {warmup.fixed} iterations of each segment "
            "are excluded"
        )
    if warmup.records == 0:
        return f"no leading record above {ratio(WARMUP_FACTOR)} the pace"
    return (
        f"the first {plural(warmup.records, 'record')} ran above {ratio(WARMUP_FACTOR)} the pace "
        f"(up to {ratio(warmup.peak_ratio)}): compilation and start-up"
    )


def hang_note(held: Held) -> str | None:
    """Why the hang before the ending has no line (the document's `goodput.hang.note`); None
    when its time is known."""
    if held.seconds is not None:
        return None
    where = f"iteration {held.last_iteration:,}"
    if held.ending_at is None:
        return (
            f"time from the last progress ({where}) to the ending unknown: no time printed "
            "after the last progress"
        )
    return (
        f"time from the last progress ({where}) to the ending ({held.ending_at}) unknown: the "
        "iteration lines carry no time and nothing after them has one"
    )


def goodput_summary(goodput: Goodput) -> str:
    """The goodput and its three largest losses, in one sentence (the document's
    `goodput.summary`), with why the hang has no line when it has none."""
    covered = goodput.covered_s
    if covered <= 0:
        return "No wall-clock time was logged."
    held = goodput.hang
    bound = held.bound if held else None
    badput = sorted(
        (
            line
            for line in goodput.lines
            if line.name not in (PRODUCTIVE, UNLOGGED) and line.seconds > 0
        ),
        key=lambda line: -line.seconds,
    )
    listed = ", ".join(
        f"{line.name} {_bounded(line, bound)}{duration(line.seconds)} ({percent(line.share)})"
        for line in badput[:3]
    )
    text = f"Goodput {percent(goodput.goodput)} of the {duration(covered)} the log covers"
    text += f"; largest losses: {listed}." if listed else "; no time lost."
    note = hang_note(held) if held else None
    return text + (f" The {HANG}: {note}." if note else "")


def _bounded(line: BudgetLine, bound: str | None) -> str:
    return "at least " if line.name == HANG and bound == "at_least" else ""


def reported_ratio(reading: RatioReading | None) -> str | None:
    """Why recomputed / reported TFLOPS is not 1, in one sentence (the document's
    `reported.explanation`); None when there is nothing to say."""
    if reading is None:
        return None
    count, observed = COUNTS[reading.count], ratio(reading.observed, 3)
    if reading.differs:
        return (
            f"{count}, so a ratio of {observed} means the shape, batch or step time used here"
            " differs from the run's (check padded vocab, GQA groups, FFN size)."
        )
    if reading.expected is None:
        return f"{count}: observed ratio {observed}."
    return f"{count}: expected ratio {ratio(reading.expected, 3)}, observed {observed}."


# The incidents an incident verdict names; the rest are counted.
_LISTED = 3


def _where(incident: Incident, units: Mapping[str, str]) -> str:
    """Where the incident's evidence is: `file:line` in a text log, `file: record N` in a
    binary store (a record index is no line)."""
    evidence = incident.evidence
    if evidence.file is None:
        return ""
    if evidence.line is None:
        return f" ({evidence.file})"
    item = {"file": evidence.file, "line": evidence.line, "unit": units.get(evidence.file)}
    return f" ({evidence_location(item, grouped=False)})"


def incident_message(verdict: IncidentVerdict, units: Mapping[str, str]) -> str:
    """The message of an incident kind's verdict: what it spoiled, and its worst incidents
    (`_LISTED` of them) each with its iterations and the line (or, where `units` says a
    source counts records, the record) that shows it."""
    kind, mine, ended = verdict.kind, verdict.worst, verdict.ended
    share = (
        f"{percent(verdict.cost / verdict.run_iterations)} of the run's iterations"
        if verdict.run_iterations
        else ""
    )
    listed = "; ".join(_one(i, units) for i in mine[:_LISTED])
    more = f" (and {len(mine) - _LISTED} more)" if len(mine) > _LISTED else ""
    spoiled = f"{plural(verdict.cost, 'iteration')}" + (f", {share}" if share else "")
    if kind == "divergence":
        return f"the loss rose and did not come back: {listed}"
    if kind in ("nan", "inf"):
        what = "NaN" if kind == "nan" else "infinite"
        end = "; the run's last record has them" if ended else ""
        stretches = plural(len(mine), "stretch", "stretches")
        return f"{what} values in {stretches} ({spoiled}){end}: {listed}{more}"
    if kind == "loss_scale_collapse":
        end = "; the run ended there" if ended else ""
        return (
            f"the fp16 loss scale fell to its floor or skipped iterations in a row "
            f"({spoiled} skipped){end}: {listed}{more}"
        )
    noun = "loss spike" if kind == "loss_spike" else "gradient-norm spike"
    return f"{plural(len(mine), noun)} ({spoiled} above the baseline): {listed}{more}"


def _one(incident: Incident, units: Mapping[str, str]) -> str:
    span = iterations(incident.first_iteration, incident.last_iteration)
    where = _where(incident, units)
    if incident.kind in ("nan", "inf"):
        return f"{span}, {plural(incident.iterations, 'iteration')} ({incident.metric}){where}"
    if incident.kind == "loss_scale_collapse":
        return (
            f"{span}: scale {number(incident.baseline, ',g')} to {number(incident.peak, ',g')}, "
            f"{plural(incident.iterations, 'iteration')} skipped{where}"
        )
    what = "loss" if incident.metric == "loss" else "grad norm"
    back = (
        f", back in {plural(incident.recovery_iterations, 'iteration')}"
        if incident.recovery_iterations is not None
        else ", not back by the segment's end"
    )
    return (
        f"{span}: {what} {number(incident.peak, '.4g')} at iteration {incident.peak_iteration} "
        f"against {number(incident.baseline, '.4g')} ({ratio(incident.ratio)}){back}{where}"
    )


def lever_message(lever: Lever) -> str:
    """The message of a cause-and-lever verdict: what the cause cost and the lever that
    shrinks it, naming a flag only where the run's arguments list it unset."""
    facts = lever.facts
    if lever.code in ("CHECKPOINT_SAVE_COST", "EVALUATION_COST"):
        return _event_message(lever)
    if lever.code == "STRAGGLER_COST":
        worst = cause_evidence(lever.evidence) if lever.evidence is not None else UNKNOWN
        return (
            f"{plural(lever.count, 'slow step')} trace to a straggling rank, "
            f"{duration(lever.seconds)} ({percent(lever.share)}); the worst: {worst}. "
            "Check that rank's node (thermals, ECC errors, a slow link) or exclude it"
        )
    if lever.code == "DATA_LOADING_COST":
        workers = _flag(facts, "num_workers", "--num-workers")
        return (
            f"{plural(lever.count, 'slow step')} waited on the data loader, "
            f"{duration(lever.seconds)} ({percent(lever.share)}); more loader workers"
            f"{f' ({workers})' if workers else ''} or a faster dataset store shrink it"
        )
    given = lever.inputs
    if lever.code == "PIPELINE_BUBBLE":
        virtual = f" and {given['v']} virtual stages" if given["v"] > 1 else ""
        return (
            f"the pipeline bubble idles {percent(given['bubble_share'])} of each step at "
            f"PP={given['p']} with {given['m']} micro-batches per step{virtual} "
            f"((p-1)/(m·v + p-1)); {_bubble_lever(facts)}"
        )
    timers = sorted(given["timers_ms"].items(), key=lambda kv: -kv[1])
    largest = ", ".join(f"{name} {number(ms, ',.0f', ' ms')}" for name, ms in timers[:3])
    return (
        f"communication timers take {percent(given['w'])} of the "
        f"{number(given['step_ms'], ',.0f', ' ms')} step, {percent(given['c'])} beyond "
        f"what the pipeline bubble explains (largest: {largest}); "
        f"{_overlap_lever(facts)} shrinks it "
        f"({TIMES}{lever.factor:.2f} on MFU)"
    )


def _event_message(lever: Lever) -> str:
    facts = lever.facts
    save = lever.code == "CHECKPOINT_SAVE_COST"
    name = "checkpoint saves" if save else "evaluation"
    every = f" every {lever.every} iterations" if lever.every is not None else ""
    what = "save" if save else "evaluation"
    if save:
        flag = _flag(facts, "async_save", "--async-save")
        lever_text = f"asynchronous saving{f' ({flag})' if flag else ''} would hide most of it"
    else:
        fewer, shorter = (
            _flag(facts, "eval_interval", "--eval-interval"),
            _flag(facts, "eval_iters", "--eval-iters"),
        )
        lever_text = (
            f"fewer{f' ({fewer})' if fewer else ''} or shorter{f' ({shorter})' if shorter else ''}"
            " evaluations shrink it"
        )
    return (
        f"{name}{every} cost {percent(lever.share)} of the run ({plural(lever.count, what)} "
        f"attributed, {duration(lever.median_s)} each at the median, {duration(lever.seconds)} "
        f"in all); {lever_text}"
    )


def _flag(facts: LeverFacts, argument: str, flag: str) -> str | None:
    """`flag`, quoted, where the run's arguments list `argument` and it is not set."""
    return f"`{flag}`" if facts.unset(argument) else None


def _bubble_lever(facts: LeverFacts) -> str:
    """More micro-batches per step: a smaller micro-batch only where it is above 1."""
    more = ["a larger global batch"]
    if facts.micro_batch_size is None or facts.micro_batch_size > 1:
        flag = _flag(facts, "micro_batch_size", "--micro-batch-size")
        more.insert(0, f"a smaller micro-batch{f' ({flag})' if flag else ''}")
    flag = _flag(
        facts, "num_layers_per_virtual_pipeline_stage", "--num-layers-per-virtual-pipeline-stage"
    )
    return (
        f"more micro-batches per step ({' or '.join(more)}) or an interleaved schedule"
        f"{f' ({flag})' if flag else ''} shrink it"
    )


def _overlap_lever(facts: LeverFacts) -> str:
    """Overlapping communication with compute, with the flags the run's version has, for the
    reductions data parallelism does (DP > 1) and the sends a pipeline does (PP > 1)."""
    parts = []
    if facts.data_parallel is None or facts.data_parallel > 1:
        flags = [
            f
            for f in (
                _flag(facts, "overlap_grad_reduce", "--overlap-grad-reduce"),
                _flag(facts, "overlap_param_gather", "--overlap-param-gather"),
            )
            if f
        ]
        parts.append(
            "the data-parallel reductions" + (f" ({' and '.join(flags)})" if flags else "")
        )
    if facts.pipeline is None or facts.pipeline > 1:
        flag = _flag(facts, "overlap_p2p_comm", "--overlap-p2p-communication")
        parts.append("the pipeline sends" + (f" ({flag})" if flag else ""))
    what = " and ".join(parts) if parts else "the communication"
    return f"overlapping {what} with compute"
