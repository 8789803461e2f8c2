"""Where the harness's own wall time goes: per stage, writing its inputs against running its
commands, so a table can say how long it took to make and why."""

from __future__ import annotations

from dataclasses import dataclass, field

from bench.harness import Measurement


@dataclass
class StageTime:
    """One stage's wall seconds: `inputs` is its `cases()` call (input generation and any
    set-up), `commands` every run of every measured command, whole processes."""

    name: str
    inputs: float = 0.0
    commands: list[Measurement] = field(default_factory=list)

    @property
    def running(self) -> float:
        return sum(m.spent for m in self.commands)

    @property
    def total(self) -> float:
        return self.inputs + self.running


def progress(measurement: Measurement) -> str:
    """The stderr line of one measured command: its runs and the wall time they took."""
    m = measurement
    return f"  {m.command.label}: {m.runs} run(s) in {m.spent:.1f} s (median {m.seconds:.3f} s)"


def breakdown(stages: list[StageTime], total: float) -> str:
    """The line under the table: the harness's wall time, then each stage's, split into
    inputs and runs (what is left is start-up, imports and printing)."""
    inputs = sum(s.inputs for s in stages)
    running = sum(s.running for s in stages)
    parts = "; ".join(
        f"{s.name} {s.total:.0f} s (inputs {s.inputs:.0f} s, runs {s.running:.0f} s)"
        for s in stages
    )
    return (
        f"harness wall time {total:.0f} s: inputs {inputs:.0f} s, measured runs"
        f" {running:.0f} s, other {total - inputs - running:.0f} s; {parts}"
    )
