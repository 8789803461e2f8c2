"""The one assumption behind clock times read from text logs, stated once per run.

Megatron, DeepSpeed and the Trainer print local times without a zone (`[2025-11-10
09:43:39,573]`); `textlog.to_timestamp` reads them as UTC. Step times, gaps and wall-clock
spans are differences and do not depend on it; the clock times shown (a report's time span)
do. TensorBoard and W&B store epoch seconds, which are UTC.
"""

from __future__ import annotations

import polars as pl

from loganalyzer.model import Run

# Formats whose timestamps are printed text (a plugin's own format is not assumed to be).
PRINTED_CLOCK_FORMATS = frozenset({"megatron", "deepspeed", "hf_trainer"})

ZONELESS_TIMESTAMPS = (
    "assumption: log timestamps printed without a time zone are read as UTC (step times and"
    " gaps do not depend on it; clock times may be off by the zone the machines ran in)"
)


def clock_assumptions(run: Run) -> list[str]:
    """The assumption, when some record's timestamp was read from a printed log."""
    printed = {s.path for s in run.sources if s.format in PRINTED_CLOCK_FORMATS}
    if not printed or run.table.height == 0:
        return []
    stamped = run.table.filter(
        pl.col("timestamp").is_not_null() & pl.col("source").is_in(list(printed))
    )
    return [ZONELESS_TIMESTAMPS] if stamped.height else []
