"""Hostile inputs (`bench.hostile`): `loganalyzer summary --json` of each, against the same
command on a benign input of about the same size. The subject's speed relative to its
baseline is the ratio that matters: near 1 (or above) when the hostile input costs what its
size does; it was 1/100 to 1/1000 when these inputs took time superlinear in their size."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from bench import hostile
from bench.harness import PYTHON, Case, Command

NAME = "hostile"


def cases(workdir: Path, quick: bool) -> list[Case]:
    tb_long = (4 if quick else 16) << 20
    tb_forged = (1 if quick else 4) << 20
    text = 160 << 10
    flood = 256 << 20 if quick else 4 << 30
    made = [
        (
            "TensorBoard, one record of",
            hostile.tensorboard_long_record(workdir / "events.out.tfevents.long", tb_long),
            hostile.tensorboard_scalars(workdir / "events.out.tfevents.scalars", tb_long),
            _warns(None),
        ),
        (
            "TensorBoard, 100,000 forged headers in",
            hostile.tensorboard_forged_headers(
                workdir / "events.out.tfevents.forged", tb_forged, count=100_000
            ),
            hostile.tensorboard_scalars(workdir / "events.out.tfevents.forged-twin", tb_forged),
            _warns("not searched for intact records"),
        ),
        (
            "Megatron timer field `a:a:...: x y` of",
            hostile.megatron_timer_field(workdir / "timer-field.log", text),
            hostile.megatron_benign(workdir / "timer-field-twin.log", text),
            _warns(None),
        ),
        (
            f"Megatron, two iteration lines of {text // 20:,} fields,",
            hostile.megatron_many_fields(workdir / "many-fields.log", text),
            hostile.megatron_benign(workdir / "many-fields-twin.log", text),
            _warns(None),
        ),
    ]
    bomb = hostile.gzip_flood(workdir / "newlines.log.gz", flood, b"\n")
    twin = hostile.gzip_benign(workdir / "newlines-twin.log.gz", 24 * bomb.stat().st_size)
    made.append(
        (
            f".gz of {flood >> 20:,} MB of newlines,",
            bomb,
            twin,
            _warns("decompression bomb"),
        )
    )
    return [
        Case(
            NAME,
            f"{what} {path.stat().st_size / 1e6:,.1f} MB",
            path.stat().st_size / 1e6,
            "MB",
            Command("loganalyzer summary --json", _summary(path), check),
            (Command(f"the same on a benign {benign.name}", _summary(benign)),),
        )
        for what, path, benign, check in made
    ]


def _summary(path: Path) -> list[str]:
    return [PYTHON, "-m", "loganalyzer", "summary", "-q", str(path), "--json"]


def _warns(words: str | None) -> Callable[[str], str | None]:
    """The summary was printed and, if `words`, one of its warnings holds them."""

    def check(output: str) -> str | None:
        warnings = json.loads(output)["warnings"]
        if words is None or any(words in w for w in warnings):
            return None
        return f"no warning says {words!r}"

    return check
