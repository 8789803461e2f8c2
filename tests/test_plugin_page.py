"""The plugin page's example parser runs as shown: its `detect()` claims its own log and
passes over what `text_head` leaves out, beside the built-in parsers."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from loganalyzer.plugin import Parser
from loganalyzer.registry import LoadedParser, Registry, claimants, load_registry
from tests.conftest import ROOT

PAGE = ROOT / "docs" / "plugins.md"


def _example() -> Parser:
    """The page's one Python block, run, and its parser made."""
    (code,) = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    names: dict[str, object] = {}
    exec(compile(code, str(PAGE), "exec"), names)
    parser = names["MyFormatParser"]
    assert isinstance(parser, type)
    made = parser()
    assert isinstance(made, Parser)
    return made


def test_the_example_claims_its_log_and_nothing_text_head_leaves_out(tmp_path: Path) -> None:
    parser = _example()
    log = "myformat step 1 | loss 2.31\nmyformat step 2 | loss 2.29\n"
    (tmp_path / "train.log").write_text(log)
    (tmp_path / "train.log.gz").write_bytes(gzip.compress(log.encode()))
    (tmp_path / "train.json").write_text(log)
    (tmp_path / "empty.log").write_text("")
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)) * 400)
    (tmp_path / "other.log").write_text("epoch 1 done\n")
    claimed = {path.name: parser.detect(path) for path in sorted(tmp_path.iterdir())}
    assert claimed == {
        "blob.bin": 0.0,
        "empty.log": 0.0,
        "other.log": 0.0,
        "train.json": 0.0,
        "train.log": 0.9,
        "train.log.gz": 0.9,
    }
    assert parser.detect(tmp_path) == 0.0


def test_the_example_is_handed_its_log_first(tmp_path: Path) -> None:
    parser = _example()
    built_in = load_registry()
    registry = Registry(
        {**built_in.parsers, parser.name: LoadedParser(parser, "docs", "plugins.md")}, {}
    )
    log = tmp_path / "train.log"
    log.write_text("myformat step 1 | loss 2.31\n")
    assert claimants(registry, log)[0] == ["myformat"]
