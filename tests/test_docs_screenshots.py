"""The docs show the report and a comparison as Chromium draws them: the screenshots in
docs/img/ are taken here, at the first screen's size, from the bundled example and the shared
BigScience runs (`LOGANALYZER_UPDATE_GOLDENS=1` takes them again).

A PNG differs from machine to machine (fonts, anti-aliasing), so the check is that each
screenshot is there, is a first screen of that size, and is shown by its page.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loganalyzer.cli import main
from tests.chromium import Page, screen
from tests.conftest import FIXTURES, ROOT, UPDATE

WIDTH, HEIGHT = 1400, 900
IMAGES = ROOT / "docs" / "img"
DS_3D = "bigscience/gpt2-meg-ds-3d"


@pytest.fixture(scope="module")
def page() -> Iterator[Page]:
    with screen(WIDTH, HEIGHT) as tab:
        yield tab


def _size(png: Path) -> tuple[int, int]:
    width, height = struct.unpack(">II", png.read_bytes()[16:24])  # the IHDR chunk
    return width, height


def _shown(image: str) -> None:
    target = IMAGES / image
    assert target.exists(), f"{target} is missing: LOGANALYZER_UPDATE_GOLDENS=1"
    assert _size(target) == (WIDTH, HEIGHT)
    assert f"(img/{image})" in (ROOT / "docs" / "report.md").read_text(encoding="utf-8")


def test_the_reports_first_screen_in_the_docs(page: Page, tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    example = FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out"
    result = CliRunner().invoke(
        main, ["report", "-q", str(example), "--gpu", "v100-sxm2", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    if UPDATE:
        page.open(out)
        page.screenshot(IMAGES / "report-first-screen.png")
    _shown("report-first-screen.png")


def test_a_comparisons_first_screen_in_the_docs(
    page: Page, tmp_path: Path, shared_logs: Path
) -> None:
    runs = sorted(p for p in (shared_logs / DS_3D).iterdir() if p.is_file())[:2]
    out = tmp_path / "compare.html"
    result = CliRunner().invoke(
        main, ["compare", "-q", *map(str, runs), "--gpu", "v100-sxm2", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    if UPDATE:
        page.open(out)
        page.screenshot(IMAGES / "compare-first-screen.png")
    _shown("compare-first-screen.png")
