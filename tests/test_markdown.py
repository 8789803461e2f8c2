"""`summary --markdown`: headline, verdicts and time budget as a Markdown block."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.render.markdown import render_markdown
from loganalyzer.render.view import build_view
from tests.conftest import ROOT, assert_golden


@pytest.mark.parametrize(
    ("source", "args", "golden"),
    [
        ("fixtures/megatron/bigscience_gpt2_tp4_pp8.out", ["--gpu", "v100-sxm2"], "example"),
        ("fixtures/megatron/restart_dir", ["--gpu", "h100-sxm"], "restart_dir"),
    ],
)
def test_markdown_matches_golden(
    source: str, args: list[str], golden: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(main, ["summary", "-q", source, *args, "--markdown"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("### ")
    assert "| figure | value | verdict | note |" in result.stdout
    assert_golden(f"markdown/{golden}.md", result.stdout)


def test_log_text_cannot_break_a_table_or_become_markup() -> None:
    document = {
        "sources": [{"path": "a|b<script>.log", "format": "megatron", "records": 1}],
        "verdicts": [{"severity": "warning", "code": "X", "message": "<img src=x> | cell"}],
    }
    text = render_markdown(build_view(document, None, charts=False))
    assert "a\\|b&lt;script&gt;.log" in text
    assert "&lt;img src=x&gt; \\| cell" in text
    assert "<img" not in text and "<script" not in text
