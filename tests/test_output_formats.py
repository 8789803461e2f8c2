"""Every output format of every fixture prints a figure one way.

A fraction of a whole (MFU, HFU, a share) is a percent, never `0.xx`; a missing value is
"unknown", never `None`; a ratio carries the one multiplication sign "×", never "x". The text
of every registered renderer is checked, and every string inside the JSON documents (verdict
messages, warnings, the time summary), for the summary and the `mfu` calculator alike.
"""

from __future__ import annotations

import json
import pkgutil
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import loganalyzer.render
from loganalyzer.cli import main
from loganalyzer.render import RENDERERS, renderer
from tests.conftest import FIXTURES, ROOT
from tests.test_golden import CASES, EXTRA_ARGS

# A fraction where a percent belongs: after a fraction's name, or a comparison with a bar.
FRACTION = re.compile(
    r"\b(?:MFU|HFU|mfu|hfu|utili[sz]ation|share)\b[^\n%]{0,30}?(?<![\d.])0\.\d+(?![\d%×])(?! %)"
    r"|\b(?:below|above|reached|within)\s+0\.\d+(?![\d%×])(?! %)"
)
# a missing value printed raw; "NaN iterations" (losses that were NaN) is a term, not a value
NONE = re.compile(r"\bNone\b|\bnan\b|(?:[:=(] ?)NaN\b|\bNaN ?(?:%|s\b|×)")
# A percent is printed with one decimal and a space: "41.0 %", never "15.50 %" or "95%".
PERCENT_FORM = re.compile(r"\d\.\d{2,} ?%|\d%")
# "1.50x", "10x": a ratio with the letter x instead of the sign (not "8x7b" or "mi250x").
PLURAL_S = re.compile(r"\w\(s\)")
LETTER_X = re.compile(r"(?<![A-Za-z])\d+(?:\.\d+)?x(?![0-9A-Za-z])")

# Modules of loganalyzer.render that are not output formats.
# helpers of the formats above (the report's view model, charts, downsampling, quoted log
# lines), and the comparison and fleet pages, which render other documents and are checked by
# their own tests
NOT_FORMATS = {
    "numbers",
    "evidence",
    "verdict_wording",
    "wording",
    "ending",
    "view",
    "viewmodel",
    "charts",
    "downsample",
    "loglines",
    "compare",
    "fleet_html",
    "clocks",
    "fleet_text",
    "fleet_view",
    "why",
    "escape",
    "clip",
    "invariants",
}


def problems(text: str) -> list[str]:
    found = []
    for name, pattern in (
        ("fraction", FRACTION),
        ("None", NONE),
        ("letter x", LETTER_X),
        ("plural in brackets", PLURAL_S),
        ("percent form", PERCENT_FORM),
    ):
        found += [
            f"{name}: …{text[max(m.start() - 40, 0) : m.end() + 10]}…"
            for m in pattern.finditer(text)
        ]
    return found


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON document (numbers and nulls are data, not printing)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


class _ReadableText(HTMLParser):
    """The text a reader of a page sees: not its styles, scripts or markup."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._hidden += tag in ("style", "script")

    def handle_endtag(self, tag: str) -> None:
        self._hidden -= tag in ("style", "script")

    def handle_data(self, data: str) -> None:
        if not self._hidden:
            self.parts.append(data)


def rendered(name: str, document: dict[str, Any]) -> str:
    """What format `name` shows a reader of `document`."""
    output = renderer(name)(document)
    if name != "html":
        return output
    reader = _ReadableText()
    reader.feed(output)
    return "\n".join(reader.parts)


def test_every_render_module_is_a_registered_format() -> None:
    modules = {m.name for m in pkgutil.iter_modules(loganalyzer.render.__path__)}
    registered = {RENDERERS[name].split(":")[0].rsplit(".", 1)[-1] for name in RENDERERS}
    unchecked = modules - NOT_FORMATS - registered
    assert not unchecked, (
        f"{sorted(unchecked)}: register each output format in loganalyzer.render.RENDERERS "
        "(or name a helper module in NOT_FORMATS) so that its output is checked here"
    )


def _document(path: Path) -> dict[str, Any]:
    args = ["summary", "-q", "--json", str(path.relative_to(ROOT)), *EXTRA_ARGS.get(path.name, [])]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_every_format_prints_figures_one_way(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    document = _document(path)
    found = [f"json: {p}" for s in strings(document) for p in problems(s)]
    for name in RENDERERS:
        found += [f"{name}: {p}" for p in problems(rendered(name, document))]
    assert not found, "\n".join(found)


MFU_CALLS = [
    "--model llama3-8b --seq-length 8192 --global-batch-size 128 --step-time 6.1 "
    "--num-gpus 64 --gpu h100-sxm",
    "--params 7e9 --formula 6n --seq-length 4096 --global-batch-size 8 --step-time 1.2 "
    "--num-gpus 8 --gpu h100-sxm --dtype fp8",
    "--flops-per-iteration 6.24e14 --step-time 4 --num-gpus 1",
]


@pytest.mark.parametrize("call", MFU_CALLS)
def test_mfu_calculator_prints_figures_one_way(call: str) -> None:
    args = call.split()
    text = CliRunner().invoke(main, ["mfu", *args])
    assert text.exit_code == 0, text.output
    as_json = CliRunner().invoke(main, ["mfu", *args, "--json"])
    found = problems(text.output) + [
        p for s in strings(json.loads(as_json.stdout)) for p in problems(s)
    ]
    assert not found, "\n".join(found)


def test_the_gate_message_prints_percents() -> None:
    path = str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out")
    result = CliRunner().invoke(
        main, ["summary", "-q", path, "--gpu", "v100-sxm2", "--fail-under-mfu", "0.35"]
    )
    assert result.exit_code == 4
    assert "steady-state MFU 11.5 % is below 35.0 %" in result.stderr
    assert not problems(result.stderr)


def test_the_checks_catch_what_they_look_for() -> None:
    assert problems("MFU 0.41 is below the band")
    assert problems("reached 0.213 (GPT-3)")
    assert problems("num_layers=None, hidden_size=None")
    assert problems("1 restart(s) cost 2 s") and not problems("step time (s)")
    assert problems("loss: NaN") and not problems("skipped iterations: 0, NaN iterations: 0")
    assert problems("ran 5.95x the baseline")
    assert problems("MFU 15.50 %, 95% of the time")
    assert not problems("MFU 41.0 % at 0.61 s per step, 5.95× the baseline; mixtral-8x7b")


@pytest.mark.parametrize(
    "name", ["bigscience", "excerpts/megatron_deepspeed_3.txt", "excerpts/megatron_1.txt"]
)
def test_real_logs_split_into_runs_print_figures_one_way(shared_logs: Path, name: str) -> None:
    args = ["summary", "-q", "--split-runs", str(shared_logs / name), "--gpu", "v100-sxm2"]
    as_json = CliRunner().invoke(main, [*args, "--json"])
    assert as_json.exit_code == 0, as_json.output
    found = []
    for document in json.loads(as_json.stdout):
        found += [f"json: {p}" for s in strings(document) for p in problems(s)]
        found += [f"{n}: {p}" for n in RENDERERS for p in problems(rendered(n, document))]
    text = CliRunner().invoke(main, args)
    found += problems(text.stdout)
    assert not found, "\n".join(found)
