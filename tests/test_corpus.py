"""The corpus: real public log text, each excerpt beside the truth read from it by hand.

fixtures/corpus/<framework>/<slug>.json states what the text says (records, iterations, the
median of the printed step times, config, the framework's own TFLOPS figure); the excerpt is
the sibling named <slug> with any extension (`.log`, `.txt`, `.log.gz`) or a <slug>/ folder.
One test per truth file runs `summary --json --split-runs` on the excerpt as a user would
and compares every key the truth states; the layout and the keys are described in
fixtures/corpus/README.md. An entry the tool cannot read right today carries `xfail` with
the exact thing it gets wrong, and the test is a strict xfail: a fix makes it fail until the
entry is updated.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "corpus"
TRUTHS = sorted(CORPUS.glob("*/*.json"))

REQUIRED = ("source", "framework", "what", "expect")
OPTIONAL = ("args", "xfail")
RELATIVE = {"step_time_median_s": 0.02, "reported_tflops_per_gpu": 0.01}
# run-level keys and where the summary document holds each
Doc = dict[str, Any]
PLAIN: dict[str, Callable[[Doc], Any]] = {
    "format": lambda doc: sorted({s["format"] for s in doc["sources"]}),
    "records": lambda doc: doc["iterations"]["logged"],
    "first_iteration": lambda doc: doc["iterations"]["first"],
    "last_iteration": lambda doc: doc["iterations"]["last"],
    "step_time_median_s": lambda doc: doc["step_time_s"]["median"],
    "num_gpus": lambda doc: doc["run"]["num_gpus"],
    "dtype": lambda doc: doc["run"]["dtype"],
    "gpu": lambda doc: (doc["run"]["gpu"] or {}).get("key"),
    "global_batch_size": lambda doc: doc["run"]["global_batch_size"],
    "seq_length": lambda doc: doc["run"]["seq_length"],
    "reported_tflops_per_gpu": lambda doc: doc["reported"]["tflops_per_gpu"],
    "restarts": lambda doc: len(doc["restarts"]),
}
NESTED = ("model", "parallelism")  # objects under `run`, compared key by key
# with several runs, the file-wide keys combine the runs; the rest go in `per_run`
COMBINED: dict[str, Callable[[list[Doc]], Any]] = {
    "format": lambda docs: sorted({f for doc in docs for f in PLAIN["format"](doc)}),
    "records": lambda docs: sum(doc["iterations"]["logged"] for doc in docs),
    "first_iteration": lambda docs: min(doc["iterations"]["first"] for doc in docs),
    "last_iteration": lambda docs: max(doc["iterations"]["last"] for doc in docs),
}


def excerpt_of(truth: Path) -> Path:
    """The one sibling named like the truth file: `<slug>.<ext>` or the folder `<slug>/`."""
    stem = truth.name.removesuffix(".json")
    found = [
        p
        for p in truth.parent.iterdir()
        if p != truth and (p.name == stem or p.name.startswith(stem + "."))
    ]
    assert len(found) == 1, f"{truth}: expected one excerpt named {stem}.*, found {found}"
    return found[0]


def problems_in(truth: dict[str, Any]) -> list[str]:
    """What makes a truth file unusable: missing fields, unknown keys, nothing to check."""
    problems = [f"no {key!r}" for key in REQUIRED if not truth.get(key)]
    problems += [f"unknown field {k!r}" for k in truth if k not in REQUIRED + OPTIONAL]
    expect = truth.get("expect") or {}
    known = set(PLAIN) | set(NESTED) | {"runs", "per_run"}
    problems += [f"unknown expect key {k!r}" for k in expect if k not in known]
    for entry in expect.get("per_run", []):
        problems += [f"unknown per_run key {k!r}" for k in entry if k not in known - {"runs"}]
    if not set(expect) - {"format", "runs"}:
        problems.append("expect states nothing beyond the format: a test that cannot fail")
    if expect.get("runs", 1) > 1:
        if "per_run" in expect and len(expect["per_run"]) != expect["runs"]:
            problems.append("per_run must list one entry per run")
        problems += [
            f"{k!r} cannot describe {expect['runs']} runs at once: put it in per_run"
            for k in expect
            if k not in COMBINED and k not in ("runs", "per_run")
        ]
    elif "per_run" in expect:
        problems.append("per_run needs runs > 1")
    return problems


def compare(key: str, want: Any, got: Any, where: str = "") -> str | None:
    """'key: expected X, got Y' when they differ (relative tolerance for measured figures)."""
    if key == "format" and isinstance(want, str):
        want = [want]
    if key in RELATIVE and isinstance(want, int | float) and isinstance(got, int | float):
        same = got == pytest.approx(want, rel=RELATIVE[key])
    else:
        same = want == got
    return None if same else f"{where}{key}: expected {want!r}, got {got!r}"


def mismatches(expect: dict[str, Any], doc: dict[str, Any], where: str = "") -> list[str]:
    """Every key of `expect` that one summary document states otherwise."""
    wrong = []
    for key, want in expect.items():
        if key in PLAIN:
            wrong.append(compare(key, want, PLAIN[key](doc), where))
        elif key in NESTED:
            held = doc["run"][key] or {}
            wrong += [compare(f"{key}.{k}", v, held.get(k), where) for k, v in want.items()]
    return [w for w in wrong if w]


def load(truth: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(truth.read_text(encoding="utf-8"))
    return data


def case(truth: Path) -> Any:
    name = truth.relative_to(CORPUS).as_posix()
    reason = load(truth).get("xfail")
    marks = [pytest.mark.xfail(reason=reason, strict=True)] if reason else []
    return pytest.param(truth, id=name, marks=marks)


@pytest.mark.parametrize("truth_path", [case(t) for t in TRUTHS])
def test_excerpt_reads_as_its_truth(truth_path: Path) -> None:
    truth = load(truth_path)
    problems = problems_in(truth)
    assert not problems, f"{truth_path}: " + "; ".join(problems)
    expect = truth["expect"]
    args = ["summary", "-q", "--json", "--split-runs", str(excerpt_of(truth_path))]
    result = CliRunner().invoke(main, [*args, *truth.get("args", [])])
    assert result.exit_code == 0, f"exit {result.exit_code}: {result.output}{result.exception!r}"
    docs: list[dict[str, Any]] = json.loads(result.stdout)
    runs = expect.get("runs", 1)
    wrong = [] if len(docs) == runs else [f"runs: expected {runs}, got {len(docs)}"]
    if runs == 1 and len(docs) == 1:
        wrong += mismatches(expect, docs[0])
    elif runs > 1:
        wrong += [
            w
            for key, combine in COMBINED.items()
            if key in expect and (w := compare(key, expect[key], combine(docs)))
        ]
        if len(docs) == runs and "per_run" in expect:
            for n, (entry, doc) in enumerate(zip(expect["per_run"], docs, strict=True), 1):
                wrong += mismatches(entry, doc, where=f"run {n} ")
    assert not wrong, f"{truth_path.name}:\n  " + "\n  ".join(wrong)


def test_every_excerpt_has_its_truth() -> None:
    """Every file in the corpus is a truth file, its excerpt, or inside an excerpt folder;
    every truth names its source and framework and checks something."""
    truths = sorted(CORPUS.glob("*/*.json"))
    excerpts = {excerpt_of(t) for t in truths}
    stray = [
        p.relative_to(CORPUS).as_posix()
        for p in CORPUS.rglob("*")
        if p.is_file()
        and p.name != "README.md"
        and p not in truths
        and not any(e == p or e in p.parents for e in excerpts)
    ]
    assert not stray, f"files with no truth file beside them: {stray}"
    bad = {t.name: problems_in(load(t)) for t in truths}
    assert not {k: v for k, v in bad.items() if v}
