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

from collections.abc import Sequence
from dataclasses import dataclass

from loganalyzer.analysis.incidents import Incident, IncidentKind
from loganalyzer.analysis.verdicts import Severity

# A share of the run's iterations spoiled that makes an incident kind a warning.
COST_WARNING = 0.01

CODES: dict[IncidentKind, str] = {
    "divergence": "LOSS_DIVERGENCE",
    "nan": "NAN_VALUES",
    "inf": "INF_VALUES",
    "loss_scale_collapse": "LOSS_SCALE_COLLAPSE",
    "loss_spike": "LOSS_SPIKES",
    "grad_norm_spike": "GRAD_NORM_SPIKES",
}


@dataclass(frozen=True)
class IncidentVerdict:
    """The verdict on one incident kind, as facts: its incidents worst first (the highest
    ratio to the baseline, else the most iterations), the iterations they spoiled (`cost`) of
    the `run_iterations`, and whether the run's last record is in one (`ended`).
    `render.wording.incident_message` words it."""

    severity: Severity
    code: str
    kind: IncidentKind
    worst: tuple[Incident, ...]
    cost: int
    run_iterations: int
    ended: bool


def judge_incidents(
    found: Sequence[Incident], run_iterations: int, last_iteration: int | None
) -> list[IncidentVerdict]:
    """A verdict per incident kind found; `run_iterations` are the iterations the run's
    records cover, `last_iteration` its last record's."""
    verdicts = []
    for kind, code in CODES.items():
        mine = [i for i in found if i.kind == kind]
        if not mine:
            continue
        cost = sum(i.iterations for i in mine)
        ended = last_iteration is not None and any(i.last_iteration == last_iteration for i in mine)
        worst = sorted(mine, key=lambda i: -(i.ratio or 0.0) if i.ratio else -i.iterations)
        verdicts.append(
            IncidentVerdict(
                _severity(kind, cost, run_iterations, ended),
                code,
                kind,
                tuple(worst),
                cost,
                run_iterations,
                ended,
            )
        )
    return verdicts


def _severity(kind: IncidentKind, cost: int, run_iterations: int, ended: bool) -> Severity:
    if kind == "divergence" or (ended and kind in ("nan", "inf", "loss_scale_collapse")):
        return "critical"
    if kind == "grad_norm_spike":
        return "info"
    return "warning" if run_iterations and cost >= COST_WARNING * run_iterations else "info"
