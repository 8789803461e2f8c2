"""The HTML file itself: one file, nothing to fetch, byte-stable, log text escaped; and
`report` on every real log `summary` reads."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.errors import LogAnalyzerError
from loganalyzer.load import load_run
from loganalyzer.registry import load_registry
from loganalyzer.render.html import render_html, script_json
from loganalyzer.render.view import build_view
from loganalyzer.summary import build_summary
from tests.hostile import PAYLOADS, write_hostile_log
from tests.report_helpers import EXAMPLE, EXAMPLE_ARGS, write_report


def _outside_scripts(page: str) -> str:
    return re.sub(r"<script\b[^>]*>.*?</script>", "", page, flags=re.DOTALL)


def _chart_data(page: str) -> dict[str, object]:
    found = re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', page, re.S)
    assert found is not None
    data: dict[str, object] = json.loads(found.group(1))
    return data


def test_same_input_gives_the_same_bytes(tmp_path: Path) -> None:
    args = [*EXAMPLE_ARGS, "--generated-at", "2024-05-01"]
    first = write_report([str(EXAMPLE)], args, tmp_path / "a.html").read_bytes()
    second = write_report([str(EXAMPLE)], args, tmp_path / "b.html").read_bytes()
    assert first == second
    assert b"on 2024-05-01" in first
    plain = write_report([str(EXAMPLE)], EXAMPLE_ARGS, tmp_path / "c.html").read_text()
    assert " on 20" not in plain.split("<footer>")[1].split("</footer>")[0]


def test_one_file_with_nothing_to_fetch(tmp_path: Path) -> None:
    page = write_report([str(EXAMPLE)], EXAMPLE_ARGS, tmp_path / "r.html").read_text()
    markup = _outside_scripts(page)
    assert not re.search(r"<(link|img|iframe|object|embed)\b", markup)
    assert not re.search(r"\b(src|href)\s*=\s*[\"']?(https?:|//)", markup)
    assert not re.search(r"<script\b[^>]*\bsrc=", page)
    assert "Plotly.newPlot" in page
    assert set(_chart_data(page)) >= {"chart-step-time", "chart-tflops", "chart-distribution"}


def test_log_text_is_escaped_in_markup_and_chart_data(tmp_path: Path) -> None:
    log = write_hostile_log(tmp_path)
    page = write_report([str(log)], ["--gpu", "h100-sxm"], tmp_path / "r.html").read_text()
    markup = _outside_scripts(page)
    for payload in PAYLOADS:
        assert payload not in page.replace(
            "</script>\n", ""
        )  # the page's own closing tags aside, no payload is written raw
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in markup
    assert "&lt;img src=x onerror=alert(3)&gt;" in markup
    assert page.count("</script>") == 3  # the JSON block, plotly.js, the page's script
    data = json.dumps(_chart_data(page))
    assert "&lt;img src=x onerror=alert(3)&gt;" in data


def test_script_json_cannot_close_its_element() -> None:
    text = script_json({"a": "</script><script>alert(1)</script>", "b": "\u2028&"})
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"a": "</script><script>alert(1)</script>", "b": "\u2028&"}


def test_report_of_the_bundled_example_in_a_real_process(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "loganalyzer",
            "report",
            str(EXAMPLE),
            *EXAMPLE_ARGS,
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert f"wrote {out}" in done.stderr
    assert out.stat().st_size < 8_000_000


def test_unwritable_output_is_one_line_and_exit_1(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["report", "-q", str(EXAMPLE), "-o", str(tmp_path / "no" / "such" / "r.html")]
    )
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert "cannot write the report" in result.stderr


def _shared_files(shared_logs: Path) -> list[Path]:
    return sorted(p for p in shared_logs.rglob("*") if p.is_file() and p.suffix != ".md")


def test_report_on_every_real_log_summary_reads(shared_logs: Path) -> None:
    registry = load_registry()
    reported = 0
    for path in _shared_files(shared_logs):
        try:
            loaded = load_run([str(path)], registry)
        except LogAnalyzerError:
            continue  # `summary` refuses it too, with its one-line error
        document = build_summary(loaded, {"shape": {}, "run": {}})
        page = render_html(build_view(document, loaded.run))
        assert 'id="figure-mfu"' in page, path
        anchors = set(re.findall(r'\bid="([^"]+)"', page))
        assert set(re.findall(r'href="#([^"]+)"', page)) <= anchors, path  # evidence links
        reported += 1
    assert reported >= 10


def test_help_loads_no_chart_or_template_library() -> None:
    code = (
        "import sys; from loganalyzer.cli import main\n"
        "try: main(['--help'])\n"
        "except SystemExit: pass\n"
        "print(sorted(m for m in ('plotly', 'jinja2', 'loganalyzer.render.view') "
        "if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
