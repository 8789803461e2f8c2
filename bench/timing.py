"""Where the harness's own time goes: per stage, writing its inputs against running its
commands, so a table can say how long it took to make and why. CPU seconds beside wall
seconds: on a machine shared with other work the wall time stretches, the CPU much less."""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass, field

from bench.harness import Measurement


@dataclass
class StageTime:
    """One stage's seconds: `inputs` is its `cases()` call (input generation and any set-up),
    `commands` every run of every measured command, whole processes."""

    name: str
    inputs: float = 0.0
    inputs_cpu: float = 0.0
    commands: list[Measurement] = field(default_factory=list)

    @property
    def running(self) -> float:
        return sum(m.spent for m in self.commands)

    @property
    def running_cpu(self) -> float:
        return sum(m.cpu_spent for m in self.commands)

    @property
    def total(self) -> float:
        return self.inputs + self.running


def cpu_seconds() -> float:
    """CPU seconds used so far by this process (all threads) and its waited-for children (the
    inputs' writers; not the measured commands, whose parent is the spawner)."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def progress(measurement: Measurement) -> str:
    """The stderr line of one measured command: its runs and the wall time they took."""
    m = measurement
    if m.reused:
        runs = "the runs above"
    elif m.alongside:
        runs = f"{m.runs} run(s) side by side with the command above"
    else:
        runs = f"{m.runs} run(s) in {m.spent:.1f} s"
    return f"  {m.command.label}: {runs} (median {m.seconds:.3f} s)"


def breakdown(stages: list[StageTime], total: float, total_cpu: float) -> str:
    """The lines under the table: the harness's wall (and CPU) time, then each stage's, split
    into inputs and runs (what is left is start-up, imports and printing)."""
    inputs = sum(s.inputs for s in stages)
    running = sum(s.running for s in stages)
    lines = [
        f"harness: {total:.0f} s wall ({total_cpu:.0f} s CPU): inputs {inputs:.0f} s,"
        f" measured commands {running:.0f} s, other {total - inputs - running:.0f} s",
        "| stage | wall s | inputs s (CPU) | command runs s (CPU) |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {s.name} | {s.total:.0f} | {s.inputs:.0f} ({s.inputs_cpu:.0f})"
        f" | {s.running:.0f} ({s.running_cpu:.0f}) |"
        for s in stages
    ]
    return "\n".join(lines)
