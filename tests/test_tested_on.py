"""Every built-in parser says which frameworks and versions its tests read (`tested_on`), and
`loganalyzer parsers` shows it."""

from __future__ import annotations

import json

from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.registry import load_registry


def _builtin() -> dict[str, object]:
    registry = load_registry()
    return {
        name: loaded.parser
        for name, loaded in registry.parsers.items()
        if loaded.distribution == "loganalyzer"
    }


def test_every_builtin_parser_lists_what_it_was_tested_on() -> None:
    builtin = _builtin()
    assert {"deepspeed", "hf_trainer", "launcher", "maxtext", "megatron"} <= set(builtin)
    for name, parser in builtin.items():
        tested_on = getattr(parser, "tested_on", None)
        assert isinstance(tested_on, tuple) and tested_on, f"{name} lists no tested_on"
        assert all(isinstance(entry, str) and entry.strip() for entry in tested_on), name
        assert len(set(tested_on)) == len(tested_on), f"{name} repeats an entry"


def test_parsers_json_and_text_show_tested_on() -> None:
    result = CliRunner().invoke(main, ["parsers", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)["parsers"]}
    for name, parser in _builtin().items():
        assert rows[name]["tested_on"] == list(parser.tested_on)  # type: ignore[attr-defined]
    assert "DeepSpeed 0.19.8 (INFO and default WARNING levels)" in rows["deepspeed"]["tested_on"]
    text = CliRunner().invoke(main, ["parsers"]).output
    line = next(line for line in text.splitlines() if line.startswith("maxtext "))
    assert "tested on: MaxText 2023-10 (TFLOP/s wording; TPU v5e)" in line
