"""Verdicts on training instabilities (`incidents`): one per kind found, its severity by what
it cost the run.

What an instability costs is the iterations it spoiled: those its records cover while the
loss (or gradient norm) stood above its baseline, the NaN and the skipped iterations. A
divergence, or a run that ended in NaN values or with its loss scale at the floor, cost the
rest of the run: critical. Otherwise an incident kind is a warning once its iterations reach
`COST_WARNING` of the run's, and information below that; a gradient-norm spike alone is
information (what it cost shows in the loss, if anywhere).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from loganalyzer.analysis.incidents import Incident, IncidentKind
from loganalyzer.analysis.verdicts import Severity, Verdict
from loganalyzer.render.numbers import iterations, number, percent, plural, ratio

# A share of the run's iterations spoiled that makes an incident kind a warning.
COST_WARNING = 0.01
_LISTED = 3

CODES: dict[IncidentKind, str] = {
    "divergence": "LOSS_DIVERGENCE",
    "nan": "NAN_VALUES",
    "inf": "INF_VALUES",
    "loss_scale_collapse": "LOSS_SCALE_COLLAPSE",
    "loss_spike": "LOSS_SPIKES",
    "grad_norm_spike": "GRAD_NORM_SPIKES",
}


def judge_incidents(
    found: Sequence[Incident],
    run_iterations: int,
    last_iteration: int | None,
    units: Mapping[str, str] | None = None,
) -> list[Verdict]:
    """A verdict per incident kind found; `run_iterations` are the iterations the run's
    records cover, `last_iteration` its last record's; `units` says which sources count
    records rather than lines (TensorBoard, W&B: path -> "record")."""
    verdicts = []
    for kind, code in CODES.items():
        mine = [i for i in found if i.kind == kind]
        if not mine:
            continue
        cost = sum(i.iterations for i in mine)
        ended = last_iteration is not None and any(i.last_iteration == last_iteration for i in mine)
        severity = _severity(kind, cost, run_iterations, ended)
        share = (
            f"{percent(cost / run_iterations)} of the run's iterations" if run_iterations else ""
        )
        message = _message(kind, mine, cost, share, ended, units or {})
        verdicts.append(Verdict(severity, code, message))
    return verdicts


def _severity(kind: IncidentKind, cost: int, run_iterations: int, ended: bool) -> Severity:
    if kind == "divergence" or (ended and kind in ("nan", "inf", "loss_scale_collapse")):
        return "critical"
    if kind == "grad_norm_spike":
        return "info"
    return "warning" if run_iterations and cost >= COST_WARNING * run_iterations else "info"


def _where(incident: Incident, units: Mapping[str, str]) -> str:
    """Where the incident's evidence is: `file:line` in a text log, `file: record N` in a
    binary store (a record index is no line)."""
    evidence = incident.evidence
    if evidence.file is None:
        return ""
    if evidence.line is None:
        return f" ({evidence.file})"
    if units.get(evidence.file) == "record":
        return f" ({evidence.file}: record {evidence.line})"
    return f" ({evidence.file}:{evidence.line})"


def _message(
    kind: IncidentKind,
    mine: list[Incident],
    cost: int,
    share: str,
    ended: bool,
    units: Mapping[str, str],
) -> str:
    worst = sorted(mine, key=lambda i: -(i.ratio or 0.0) if i.ratio else -i.iterations)
    listed = "; ".join(_one(i, units) for i in worst[:_LISTED])
    more = f" (and {len(mine) - _LISTED} more)" if len(mine) > _LISTED else ""
    spoiled = f"{plural(cost, 'iteration')}" + (f", {share}" if share else "")
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
