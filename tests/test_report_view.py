"""The report's view model, pinned per fixture, and its figures against `summary --json`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from loganalyzer.render.html import view_json
from loganalyzer.render.numbers import percent
from loganalyzer.render.view import SLOW_ROWS, build_view
from tests.conftest import FIXTURES, ROOT, assert_golden
from tests.report_helpers import loaded_run, summary_json, write_report
from tests.test_golden import CASES, EXTRA_ARGS, _name


@pytest.mark.parametrize("path", CASES, ids=[p.name for p in CASES])
def test_view_matches_golden(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    source = str(path.relative_to(ROOT))
    document = summary_json([source], EXTRA_ARGS.get(path.name, []))
    view = build_view(document, loaded_run([source]))
    assert_golden(_name(path) + ".view.json", view_json(view))

    figures = {f.key: f for f in view.headline}
    assert figures["mfu"].value == document["flops"]["mfu"]
    assert figures["step_time"].value == document["step_time_s"]["median"]
    assert figures["tflops"].value == document["flops"]["tflops_per_gpu"]
    if document["flops"]["mfu"] is not None:
        assert figures["mfu"].text == percent(document["flops"]["mfu"])
    assert [v.code for v in view.verdicts] == [v["code"] for v in document["verdicts"]]
    assert len(view.slow_steps) == min(SLOW_ROWS, len(document["slow_steps"]))


def test_unknown_mfu_says_what_would_supply_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    source = "fixtures/megatron/bigscience_gpt2_tp4_pp8.out"
    view = build_view(summary_json([source], []), loaded_run([source]))
    mfu = next(f for f in view.headline if f.key == "mfu")
    assert mfu.value is None
    assert mfu.text == "unknown: pass --gpu"


def test_budget_parts_add_up_to_the_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    source = "fixtures/megatron/restart_dir"
    document = summary_json([source], ["--gpu", "h100-sxm"])
    view = build_view(document, None)
    assert sum(p.width for p in view.budget) == pytest.approx(100, abs=0.01)
    parts = {p.key: p.seconds for p in view.budget}
    lines = {line["name"]: line["seconds"] for line in document["goodput"]["lines"]}
    assert parts["productive"] == lines["productive steady steps"]
    assert parts["gaps"] == lines["restart gaps"]
    assert parts["redone"] == lines["redone work"]
    assert sum(parts.values()) == pytest.approx(document["goodput"]["wall_s"], rel=1e-12)


def test_an_older_or_newer_document_still_builds() -> None:
    """Fields the view reads are optional: a document without them gives an emptier view."""
    view = build_view({"schema": "loganalyzer.summary/1"}, None)
    assert view.verdicts == ()
    assert view.budget == ()
    assert next(f for f in view.headline if f.key == "mfu").text == "unknown: pass --gpu"


# Megatron-DeepSpeed argument dumps, `zero_stage ... N`: the BigScience 3D run with DeepSpeed
# on (fixtures/README.md), its ZeRO-3 run cut by the time limit (fixtures/endings/README.md),
# and a 2022 MoE run's `zero_stage ... 1.0` (fixtures/README.md). Stage 0 is no ZeRO.
@pytest.mark.parametrize(
    ("log", "parallelism"),
    [
        ("megatron_deepspeed/bigscience_gpt2_3d_ds_on.out", "TP=4 PP=16 DP=1"),
        ("endings/time_limit/bigscience_megds_zero_step_then_job.log", "TP=4 DP=16 ZeRO-3"),
        ("corpus/megatron_deepspeed/msds_2022_moe64_ep4_fp16.log", "TP=1 PP=1 DP=4 EP=4 ZeRO-1"),
    ],
)
def test_the_identity_line_names_zero_from_stage_1(
    log: str, parallelism: str, tmp_path: Path
) -> None:
    report = write_report([str(FIXTURES / log)], ["--gpu", "v100-sxm2"], tmp_path / "report.html")
    setup = re.search(r'<p class="meta setup">(.*?)</p>', report.read_text(), re.S)
    assert setup is not None
    assert re.findall(r"<span>(.*?)</span>", setup.group(1))[0] == parallelism
