"""Declared formats: the shipped TOML files on their real text, a format written for an
invented trainer read end to end, and each kind of mistake in a format file refused.

Fixture provenance and the truth read from each by hand: fixtures/README.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.declared import parse_format
from loganalyzer.declared.reader import REPORTED_MFU
from loganalyzer.load import load_run
from loganalyzer.model import Run
from loganalyzer.registry import load_registry
from tests.conftest import FIXTURES, ROOT, assert_golden

SHIPPED = ("nanogpt", "modded_nanogpt", "nanochat", "litgpt", "internevo", "pith_train")
CASES = sorted(p for name in SHIPPED for p in (FIXTURES / name).iterdir() if p.is_file())


def summary(*args: str) -> dict[str, Any]:
    result = CliRunner().invoke(main, ["summary", "-q", *args, "--json"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def read(path: Path) -> Run:
    return load_run([str(path)], load_registry()).run


def step_times(run: Run) -> list[float | None]:
    return [None if t is None else round(t, 6) for t in run.table["step_time_s"].to_list()]


def metric(run: Run, name: str) -> list[tuple[int, float]]:
    rows = run.metrics.lazy().filter(pl.col("name").cast(pl.String) == name).collect()
    return list(zip(rows["iteration"].to_list(), rows["value"].to_list(), strict=True))


def config(run: Run, *keys: str) -> dict[str, object]:
    return {key: run.get(key) for key in keys}


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.name}" for p in CASES])
def test_shipped_format_summary_matches_golden(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    document = summary(str(path.relative_to(ROOT)))
    assert document["sources"][0]["format"] == path.parent.name
    assert_golden(f"{path.parent.name}/{path.name}.json", json.dumps(document, indent=2))


def test_shipped_formats_are_listed_with_what_they_were_tested_on() -> None:
    result = CliRunner().invoke(main, ["parsers", "--json"])
    rows = {row["name"]: row for row in json.loads(result.stdout)["parsers"]}
    for name in SHIPPED:
        assert rows[name]["entry_point"] == f"loganalyzer.declared.formats:{name}.toml"
        assert rows[name]["distribution"] == "loganalyzer"
        assert rows[name]["tested_on"], name
        assert rows[name]["description"].endswith("(declared format)")


def test_nanogpt_iter_lines_and_the_mfu_placeholder() -> None:
    # https://github.com/karpathy/nanoGPT/issues/178: `iter 0: loss 4.2648, time 9371.81ms,
    # mfu -100.00%` (running_mfu is -1.0 until the fifth step), then 16.68% ...
    document = summary(str(FIXTURES / "nanogpt" / "shakespeare_mfu.log"))
    assert document["iterations"] == {
        "logged": 25,
        "first": 0,
        "last": 240,
        "segments": 1,
        "covered": 241,
    }
    assert document["step_time_s"]["min"] == pytest.approx(0.89275)
    assert document["step_time_s"]["max"] == pytest.approx(9.37181)
    assert any("1 records print mfu -100" in w for w in document["warnings"])
    run = read(FIXTURES / "nanogpt" / "shakespeare_mfu.log")
    mfu = metric(run, REPORTED_MFU)
    assert mfu[0] == (10, pytest.approx(0.1668)) and len(mfu) == 24  # iter 0's is unknown
    assert run.table["loss"][-1] == pytest.approx(1.6524)
    assert metric(run, "nanogpt/val_loss") == [(250, pytest.approx(1.7220))]


def test_nanogpt_before_the_mfu_field() -> None:
    run = read(FIXTURES / "nanogpt" / "owt_before_mfu.log")
    assert run.table["iteration"].to_list() == list(range(1631, 1642))
    assert step_times(run)[-1] == 0.56731
    assert metric(run, REPORTED_MFU) == []


def test_modded_nanogpt_train_time_clock_with_its_reset() -> None:
    # records/track_1_short/2024-10-14_ModernArch: train_time 54881ms at step 10, 176ms at
    # step 11 (the clock reset after the first 10 steps), 530ms at 13, 706ms at 14
    path = FIXTURES / "modded_nanogpt" / "2024-10-14_ModernArch.txt"
    run = read(path)
    times = dict(zip(run.table["iteration"].to_list(), step_times(run), strict=True))
    assert len(times) == 32 and times[1] is None  # no earlier reading
    assert times[2] == pytest.approx(10.763)  # 53466 - 42703 ms: compilation
    assert times[11] is None  # the clock went back
    assert times[14] == pytest.approx(0.176)
    assert times[122] == pytest.approx((19760 - 1411) / 104 / 1000, abs=1e-6)  # lines cut
    assert run.get("train_iters") == 5100 and run.get("gpu_name") == "NVIDIA H100 80GB HBM3"
    assert metric(run, "modded_nanogpt/val_loss") == [
        (0, pytest.approx(16.0058)),
        (125, pytest.approx(4.9493)),
        (5100, pytest.approx(3.2741)),
    ]
    document = summary(str(path))
    assert document["run"]["gpu"]["key"] == "h100-sxm"
    assert any("the 1 records after which the clock went back" in w for w in document["warnings"])


def test_modded_nanogpt_without_train_loss_and_in_seconds() -> None:
    run = read(FIXTURES / "modded_nanogpt" / "2024-12-08_UNetValueEmbedsTweaks.txt")
    assert run.table.height == 20 and run.table["loss"].null_count() == 20
    assert step_times(run)[-1] == pytest.approx(0.172)  # 236786 - 236614 ms
    seconds = read(FIXTURES / "modded_nanogpt" / "2026-04-30_muonh_seconds.txt")
    assert step_times(seconds)[1] == pytest.approx(0.343)  # train_time:11.405s - 11.062s


def test_parameter_golf_header_gives_the_batch_and_gpus() -> None:
    path = FIXTURES / "modded_nanogpt" / "parameter-golf_2026-03-17_NaiveBaseline.log"
    run = read(path)
    assert config(run, "num_gpus", "params", "seq_length", "num_attention_heads") == {
        "num_gpus": 8,
        "params": 17059912,
        "seq_length": 1024,
        "num_attention_heads": 8,
    }
    assert run.get("num_query_groups") == 4 and run.get("train_iters") == 20000
    assert run.get("global_batch_size") == 512  # 524288 tokens / 1024
    assert run.config["global_batch_size"].provenance.kind == "derived"
    assert step_times(run)[-1] == pytest.approx(0.04298)  # (598726 - 596577) / 50 ms
    assert metric(run, "modded_nanogpt/val_bpb")[-1] == (13780, pytest.approx(1.2172))
    document = summary(str(path))
    assert document["run"]["num_gpus"] == 8 and document["run"]["global_batch_size"] == 512


def test_nanochat_2025_lines_and_model_printout() -> None:
    run = read(FIXTURES / "nanochat" / "run1000_d32_2025-10.log")
    assert step_times(run) == [1.57188, 1.57276]
    assert run.table["tokens_per_s"].to_list() == [83385.0, 83338.0]
    assert [v for _, v in metric(run, REPORTED_MFU)] == [
        pytest.approx(0.5092),
        pytest.approx(0.5089),
    ]
    assert config(run, "num_layers", "hidden_size", "num_attention_heads", "params") == {
        "num_layers": 32,
        "hidden_size": 2048,
        "num_attention_heads": 16,
        "params": 1879048192,
    }
    assert config(run, "vocab_size", "micro_batch_size", "global_batch_size") == {
        "vocab_size": 65536,
        "micro_batch_size": 8,
        "global_batch_size": 256,
    }


def test_nanochat_2026_wording() -> None:
    run = read(FIXTURES / "nanochat" / "base_train_2026-02_format.log")
    assert run.table.height == 12 and step_times(run)[0] == 35.12341
    assert config(run, "num_layers", "hidden_size", "params", "gpu_name") == {
        "num_layers": 12,
        "hidden_size": 768,
        "params": 135266330,
        "gpu_name": "NVIDIA H100 80GB HBM3",
    }
    assert metric(run, "nanochat/val_bpb") == [(0, pytest.approx(3.291455))]
    assert metric(run, REPORTED_MFU)[1] == (1, pytest.approx(0.4087))


def test_litgpt_iter_time_is_scaled_to_the_step() -> None:
    # issue 1607: iter advances 50 and step 10 a line, so a step is 5 micro-batches
    run = read(FIXTURES / "litgpt" / "pretrain_gpt2_issue1607.log")
    assert run.table["iteration"].to_list() == list(range(610140, 610201, 10))
    assert step_times(run)[:2] == [pytest.approx(0.561), pytest.approx(0.55675)]
    assert run.table["interval"].to_list() == [10] * 7
    finetune = read(FIXTURES / "litgpt" / "finetune_lora_issue1110.log")
    assert step_times(finetune) == [0.52946, 0.50353, 0.5221, 0.11527, 0.74331]
    assert metric(finetune, "litgpt/val_loss")[0] == (961, pytest.approx(1.057))


@pytest.mark.parametrize(
    ("name", "first_step_s", "tflops", "grad_norm"),
    [
        ("usage_2023-07_commas.log", 3.834, 63.27010355651958, 63.672620777841004),
        ("7B_demo_2023-09_spaces.log", 4.328, 63.283263603947816, 66.51907327507652),
    ],
)
def test_internevo_both_wordings(
    name: str, first_step_s: float, tflops: float, grad_norm: float
) -> None:
    run = read(FIXTURES / "internevo" / name)
    assert run.table["iteration"].to_list() == list(range(6))
    assert step_times(run)[0] is None and step_times(run)[1] == pytest.approx(first_step_s)
    assert run.table["reported_tflops_per_gpu"][0] == pytest.approx(tflops)
    assert run.table["grad_norm"][0] == pytest.approx(grad_norm)
    assert run.table["loss_scale"][0] == 65536.0
    assert config(run, "data_parallel_size", "tensor_model_parallel_size") == {
        "data_parallel_size": 8,
        "tensor_model_parallel_size": 1,
    }
    document = summary(str(FIXTURES / "internevo" / name))
    assert document["reported"]["tflops_per_gpu"] > 180


def test_pith_train_lines() -> None:
    run = read(FIXTURES / "pith_train" / "pretrain_lm_format.log")
    assert run.table.height == 8 and step_times(run)[0] == 9.871
    assert run.table["mem_max_allocated_gb"][0] == pytest.approx(62.34 * 2**30 / 1e9)
    assert run.get("train_iters") == 4096
    assert metric(run, "pith_train/load_balance_loss")[0] == (1, pytest.approx(1.05))
    # the line its docs show, as printed without the logger's prefix
    line = read(FIXTURES / "pith_train" / "user_guide_line.log")
    assert line.table["iteration"].to_list() == [123] and step_times(line) == [1.234]
    assert line.table["tokens_per_s"].to_list() == [1234567.0]


# An invented trainer, and a format file written for it as a user would.
RECORD = (
    r"^\[acme\] it=(?P<iteration>\d+)/(?P<train_iters>\d+) loss=(?P<loss>\S+) lr=(?P<lr>\S+)"
    r" dt=(?P<step_time>[\d.]+)(?P<step_time_unit>us|ms|s) tflops=(?P<reported_tflops>[\d.]+)"
    r" mfu=(?P<mfu>[\d.]+)"
)
MODEL = (
    r"^\[acme\] model layers=(?P<num_layers>\d+) hidden=(?P<hidden_size>\d+)"
    r" heads=(?P<num_attention_heads>\d+) seq=(?P<seq_length>\d+)"
    r" vocab=(?P<padded_vocab_size>\d+)"
)
TRAINER_FORMAT = r"""
name = "acme"
description = "acme-trainer stdout"
tested_on = ["acme-trainer 0.3"]
metrics = ["eval_ppl"]
notes = ["acme prints throughput per node"]

[record]
pattern = '{record}'
[record.fields.mfu]
unit = "fraction"

[[lines]]
pattern = '^\[acme\] eval it=(?P<iteration>\d+) ppl=(?P<eval_ppl>[\d.]+)'

[[config]]
pattern = '{model}'
[[config]]
pattern = '^\[acme\] batch=(?P<global_batch_size>\d+) gpus=(?P<num_gpus>\d+)'

[fixed]
gpu_name = "NVIDIA H100 80GB HBM3"
dtype = "bf16"
""".replace("{record}", RECORD).replace("{model}", MODEL)


def _trainer_log(steps: int = 40) -> str:
    lines = [
        "[acme] model layers=24 hidden=2048 heads=16 seq=2048 vocab=50304",
        "[acme] batch=256 gpus=8",
    ]
    for it in range(1, steps + 1):
        dt = "2.5s" if it == 1 else "1250ms" if it % 2 else "1250000us"
        lines.append(
            f"[rank0]:[acme] it={it}/{steps} loss={8 - it / 10:.3f} lr=3.0e-4 dt={dt}"
            " tflops=412.5 mfu=0.417"
        )
        if it % 20 == 0:
            lines.append(f"[acme] eval it={it} ppl={30 - it / 10:.2f}")
    lines.append("Traceback (most recent call last):")
    lines.append("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    return "\n".join(lines) + "\n"


def test_a_format_file_for_an_invented_trainer_reads_its_log_end_to_end(tmp_path: Path) -> None:
    fmt, log = tmp_path / "acme.toml", tmp_path / "train.log"
    fmt.write_text(TRAINER_FORMAT)
    log.write_text(_trainer_log())
    document = summary(str(log), "--format-file", str(fmt))
    assert document["sources"][0]["format"] == "acme"
    assert document["iterations"]["logged"] == 40 and document["iterations"]["last"] == 40
    assert document["step_time_s"]["median"] == pytest.approx(1.25)  # s, ms, us alike
    assert document["run"]["model"]["num_layers"] == 24
    assert document["run"]["global_batch_size"] == 256 and document["run"]["num_gpus"] == 8
    assert document["run"]["gpu"]["key"] == "h100-sxm"
    assert document["reported"]["tflops_per_gpu"] == pytest.approx(412.5)
    assert document["flops"]["mfu"] is not None  # recomputed from the printed shape
    assert document["outcome"]["status"] == "crashed" and document["outcome"]["reason"] == "oom"
    assert any("acme prints throughput per node" in w for w in document["warnings"])
    report = tmp_path / "report.html"
    result = CliRunner().invoke(
        main, ["report", "-q", str(log), "--format-file", str(fmt), "-o", str(report)]
    )
    assert result.exit_code == 0, result.output
    assert "acme" in report.read_text()
    # the format was for that command alone
    again = CliRunner().invoke(main, ["summary", "-q", str(log), "--json"])
    assert '"acme"' not in again.stdout


def test_a_format_file_can_be_forced_by_name(tmp_path: Path) -> None:
    fmt, log = tmp_path / "acme.toml", tmp_path / "train.log"
    fmt.write_text(TRAINER_FORMAT)
    log.write_text(_trainer_log(5))
    document = summary(str(log), "--format-file", str(fmt), "--format", "acme")
    assert document["iterations"]["logged"] == 5


def test_a_builtin_parser_keeps_a_file_a_declared_format_also_matches(tmp_path: Path) -> None:
    # a pattern that matches Megatron's iteration lines: the Megatron parser reads them
    fmt = tmp_path / "greedy.toml"
    fmt.write_text(
        'name = "greedy"\ndescription = "x"\n[record]\n'
        "pattern = 'iteration\\s+(?P<iteration>\\d+)/'\n"
    )
    megatron = FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out"
    document = summary(str(megatron), "--format-file", str(fmt), "--gpu", "v100-sxm2")
    assert document["sources"][0]["format"] == "megatron"


BASE = 'name = "bad"\ndescription = "x"\n'
GOOD_RECORD = "[record]\npattern = 'it (?P<iteration>\\d+) t (?P<step_time>[\\d.]+)'\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name = [", "not valid TOML"),
        (BASE + "[record]\npattern = 'it (?P<iteration>\\d+'\n", "record.pattern: not a valid"),
        (
            BASE + "[record]\npattern = 'it (?P<iteration>\\d+) x (?P<stepp>\\d+)'\n",
            "record.pattern: group 'stepp' is not a field",
        ),
        (BASE + "[record]\npattern = 'time (?P<step_time>\\d+)'\n", "has no group (?P<iteration>"),
        (
            BASE + GOOD_RECORD + '[record.fields.step_time]\nunit = "sec"\n',
            "record.fields.step_time.unit: 'sec' is not one of s, ms, us",
        ),
        (BASE + GOOD_RECORD, "record.fields.step_time.unit: missing"),
        (
            BASE + GOOD_RECORD + '[record.fields.step_time]\nunit = "s"\n[record.fields.mfu]\n',
            "record.fields.mfu: the pattern has no group (?P<mfu>...)",
        ),
        (
            BASE
            + GOOD_RECORD
            + '[record.fields.step_time]\nunit = "s"\n'
            + "[[config]]\npattern = 'layers=(?P<layers>\\d+)'\n",
            "config[0].pattern: group 'layers' is not a field",
        ),
        (
            BASE + GOOD_RECORD + '[record.fields.step_time]\nunit = "s"\n[fixed]\ngpus = 8\n',
            "fixed.gpus: not a run fact",
        ),
        (BASE + GOOD_RECORD + "colour = 1\n", "colour: unknown key"),
        (
            'name = "megatron"\ndescription = "x"\n'
            + GOOD_RECORD
            + '[record.fields.step_time]\nunit = "s"\n',
            "name 'megatron' is already registered",
        ),
    ],
    ids=[
        "toml",
        "regex",
        "unknown-field",
        "no-iteration",
        "bad-unit",
        "missing-unit",
        "group-lacking",
        "config-key",
        "fixed-key",
        "top-key",
        "name-taken",
    ],
)
def test_a_mistake_in_a_format_file_is_one_line_naming_the_file(
    tmp_path: Path, text: str, message: str
) -> None:
    fmt = tmp_path / "my_loop.toml"
    fmt.write_text(text)
    log = FIXTURES / "nanogpt" / "owt_before_mfu.log"
    result = CliRunner().invoke(main, ["summary", str(log), "--format-file", str(fmt)])
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: {fmt}: "), result.stderr
    assert message in lines[0]


def test_a_broken_data_only_plugin_is_reported_and_the_others_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from importlib.metadata import EntryPoint

    from loganalyzer import registry as registry_module

    real = registry_module.entry_points
    missing = EntryPoint(
        "missing", "loganalyzer.declared.formats:missing.toml", registry_module.ENTRY_POINT_GROUP
    )
    monkeypatch.setattr(
        registry_module, "entry_points", lambda group: [*real(group=group), missing]
    )
    loaded = load_registry()
    assert "nanogpt" in loaded.parsers
    assert "cannot read the format file" in loaded.broken["missing"]


def test_the_reference_example_loads() -> None:
    doc = (ROOT / "docs" / "declared-formats.md").read_text()
    example = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    fmt = parse_format(example, "docs/declared-formats.md")
    assert fmt.name == "my_loop" and fmt.fields["step_time"].factor == pytest.approx(1e-3)
    assert [line.groups for line in fmt.config][1] == (
        "global_batch_size",
        "seq_length",
        "num_gpus",
    )
