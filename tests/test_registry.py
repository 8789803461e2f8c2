"""Parser plugins: discovered through entry points, the built-in ones like any other."""

from __future__ import annotations

from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from loganalyzer import registry as registry_module
from loganalyzer.errors import UnrecognisedSourceError
from loganalyzer.model import Run
from loganalyzer.registry import ENTRY_POINT_GROUP, choose, load_registry
from tests.conftest import FIXTURES


class _ClaimsEverything:
    name = "greedy"
    description = "claims every file"

    def detect(self, path: Path) -> float:
        return 0.95

    def parse(self, path: Path) -> Run:
        raise NotImplementedError


GREEDY = _ClaimsEverything()


def _with_extra_entry_points(monkeypatch: pytest.MonkeyPatch, *extra: EntryPoint) -> None:
    real = registry_module.entry_points

    def fake(group: str) -> Any:
        return [*real(group=group), *extra]

    monkeypatch.setattr(registry_module, "entry_points", fake)


def test_builtin_parser_is_registered_through_its_entry_point() -> None:
    loaded = load_registry()
    assert "megatron" in loaded.parsers
    assert loaded.parsers["megatron"].distribution == "loganalyzer"
    assert loaded.parsers["megatron"].entry_point == "loganalyzer.parsers.megatron:MegatronParser"
    assert loaded.broken == {}


def test_a_broken_plugin_is_reported_by_name_and_the_others_still_load(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _with_extra_entry_points(
        monkeypatch, EntryPoint("broken", "no_such_module:Parser", ENTRY_POINT_GROUP)
    )
    loaded = load_registry()
    assert "megatron" in loaded.parsers
    assert "ModuleNotFoundError" in loaded.broken["broken"]


def test_two_parsers_claiming_a_file_equally_is_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_extra_entry_points(
        monkeypatch, EntryPoint("greedy", "tests.test_registry:GREEDY", ENTRY_POINT_GROUP)
    )
    loaded = load_registry()
    with pytest.raises(UnrecognisedSourceError, match="greedy, megatron claim it equally") as err:
        choose(loaded, FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out")
    assert err.value.exit_code == 3


def test_every_registered_parser_has_fixtures_and_goldens() -> None:
    for name in load_registry().parsers:
        fixtures = sorted((FIXTURES / name).glob("**/*"))
        assert [f for f in fixtures if f.is_file()], (
            f"parser {name} has no fixture under fixtures/{name}/"
        )
        goldens = sorted((Path(__file__).parent / "golden" / name).glob("*.json"))
        assert goldens, f"parser {name} has no golden summary under tests/golden/{name}/"
