"""The report's view model: plain dataclasses, already printed, that templates only loop and
branch over. `render.view` builds them from the summary document and the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Figure:
    """One headline figure: its text as printed, the document's number behind it, and the
    severity of the verdict that judges it (None: no verdict does)."""

    key: str
    label: str
    text: str
    value: float | None
    severity: str | None = None
    note: str = ""


@dataclass(frozen=True)
class VerdictRow:
    severity: str
    code: str
    message: str
    target: str


@dataclass(frozen=True)
class BudgetPart:
    """One cause in the time budget bar; `width` is its share of the bar in percent."""

    key: str
    label: str
    seconds: float
    text: str
    share: str
    width: float


@dataclass(frozen=True)
class Row:
    """A table row of already-printed cells."""

    cells: tuple[str, ...]


@dataclass(frozen=True)
class LostRow:
    """One cause of lost time, as the first screen ranks them: a line of the goodput budget
    with its share of the wall clock, its GPU-hours and what kind of evidence measures it."""

    key: str
    label: str
    seconds: float
    text: str
    share: str
    gpu_hours: str
    evidence: str


@dataclass(frozen=True)
class WaterfallStep:
    """One factor of the MFU waterfall: what it multiplies by, the MFU before and after, its
    formula and the inputs plugged in (`inputs` in full, `short` for a chart label)."""

    name: str
    factor: str
    before: str
    after: str
    value_before: float
    value_after: float
    formula: str
    inputs: str
    short: str


@dataclass(frozen=True)
class Waterfall:
    """The document's MFU waterfall: from the peak through each factor to what was achieved."""

    start: str
    start_value: str
    steps: tuple[WaterfallStep, ...]
    achieved: str
    achieved_value: float
    achieved_label: str
    notes: tuple[str, ...]


@dataclass(frozen=True)
class CauseRow:
    """One lost interval: where, what it was, the time, its cause and the evidence."""

    iterations: str
    entry: str
    seconds: float
    lost: str
    cause: str
    evidence: str
    location: str


@dataclass(frozen=True)
class Health:
    """Run health as the terminal prints it: timer phases, skipped/NaN iterations, loss-scale
    drops, memory headroom and tokens/s per GPU, each already printed."""

    phases: tuple[Row, ...]
    counts: tuple[Row, ...]
    memory: str
    tokens_per_gpu: str


@dataclass(frozen=True)
class Ending:
    """How the run ended: the sentence, its verdict's severity, and the lines it rests on
    (role, `file:line`, text)."""

    status: str
    severity: str
    sentence: str
    evidence: tuple[Row, ...]


@dataclass(frozen=True)
class SlowRow:
    iteration: int
    kind: str
    time: str
    ratio: str
    lost: str
    phase: str
    location: str
    line: str


@dataclass(frozen=True)
class IncidentRow:
    """A training instability as the incidents table lists it, with its log line."""

    kind: str
    iterations: str
    size: str
    recovery: str
    location: str
    line: str


@dataclass(frozen=True)
class ConfigRow:
    name: str
    value: str
    provenance: str


@dataclass(frozen=True)
class Identity:
    name: str
    framework: str
    gpus: str
    model: str
    dates: str
    sources: tuple[Row, ...]
    ignored: tuple[Row, ...]
    # files read as part of a source (an output_dir's config.json), and how
    read_along: tuple[Row, ...] = ()
    # how the run was set up, each part printed: "TP=4 PP=8 DP=1", "global batch 4 (micro 1)"
    setup: tuple[str, ...] = ()


@dataclass(frozen=True)
class Marker:
    """A flagged slow step as the step-time chart marks it."""

    iteration: int
    step_time_s: float
    kind: str
    hover: str


@dataclass(frozen=True)
class EndingMark:
    """The run's ending as the step-time chart marks it: a vertical line at its last
    iteration, labelled with its status and what it was ("crashed: OutOfMemoryError")."""

    iteration: int
    label: str


@dataclass(frozen=True)
class Span:
    """An iteration range the charts shade (a sustained slowdown, redone work)."""

    start: float
    end: float
    label: str


@dataclass(frozen=True)
class ChartFacts:
    """What the charts take from the document (the series come from the run's tables)."""

    pace_s: float | None
    pace_legend: str
    flops_per_iteration: float | None
    num_gpus: int | None
    peak_tflops: float | None
    reference: Span | None
    markers: tuple[Marker, ...]
    warmup: tuple[Span, ...]
    sustained: tuple[Span, ...]
    restarts: tuple[Span, ...]
    boundaries: tuple[int, ...]
    flagged: tuple[int, ...]
    incidents: tuple[Span, ...] = ()
    ending: EndingMark | None = None
    # sources that count records, not lines (TensorBoard, W&B): hovers say "record N"
    record_sources: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Chart:
    """A chart: its anchor, title, a caption saying how to read it, and the plotly figure."""

    id: str
    title: str
    caption: str
    figure: dict[str, Any]

    @property
    def height(self) -> int:
        """The figure's height in pixels, which its container keeps when the page is
        resized for printing."""
        return int(self.figure.get("layout", {}).get("height", 320))


@dataclass(frozen=True)
class ReportView:
    title: str
    tool_version: str
    generated_at: str | None
    identity: Identity
    headline: tuple[Figure, ...]
    reported: str
    verdicts: tuple[VerdictRow, ...]
    budget: tuple[BudgetPart, ...]
    budget_summary: str
    charts: tuple[Chart, ...]
    slow_steps: tuple[SlowRow, ...]
    slow_more: int
    restarts: tuple[Row, ...]
    stalls: tuple[Row, ...]
    facts: tuple[ConfigRow, ...]
    config: tuple[ConfigRow, ...]
    formula: str
    warnings: tuple[str, ...]
    incidents: tuple[IncidentRow, ...] = ()
    ending: Ending | None = None
    # each restart in words: "restart at iteration 1,000 after an NCCL timeout on rank 5..."
    restart_sentences: tuple[str, ...] = ()
    # the first screen: time lost by cause (largest first) and the verdicts that cost most
    lost: tuple[LostRow, ...] = ()
    top_verdicts: tuple[VerdictRow, ...] = ()
    # below it: the waterfall (table and chart), every lost interval, run health
    waterfall: Waterfall | None = None
    waterfall_chart: Chart | None = None
    # why there is no waterfall: the document's notes and the inputs it lacks
    waterfall_missing: str = ""
    causes: tuple[CauseRow, ...] = ()
    causes_more: int = 0
    health: Health | None = None
