"""Data flows one way (sources -> parsers -> Run -> analysis and FLOPs -> render), and the imports
say so. The commands, the fleet and the summary builder stand above and call each stage; the
renderers read the analysis' facts and word them, so render imports analysis and flops, never
the reverse; neither the analysis nor the FLOPs count knows the fleet.

Read from the source (the `import` statements of each module, at any depth of the file), so
that an import made late, inside a function, counts as much as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "loganalyzer"

# (the package whose modules are checked, the package they must not import, why)
RULES = [
    ("loganalyzer.render", "loganalyzer.fleet", "the fleet's renderers read its document"),
    ("loganalyzer.render", "loganalyzer.commands", "renderers are called, they do not call"),
    ("loganalyzer.analysis", "loganalyzer.fleet", "one run's analysis knows no fleet"),
    ("loganalyzer.flops", "loganalyzer.fleet", "the FLOPs count knows no fleet"),
    ("loganalyzer.analysis", "loganalyzer.render", "the analysis returns facts, render words"),
    ("loganalyzer.flops", "loganalyzer.render", "the FLOPs count returns facts, render words"),
]


def imported(path: Path) -> set[str]:
    """Every module a source file imports, anywhere in it."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def modules_of(package: str) -> list[Path]:
    folder = PACKAGE.joinpath(*package.split(".")[1:])
    return sorted(folder.rglob("*.py"))


@pytest.mark.parametrize(("package", "forbidden", "why"), RULES)
def test_no_import_against_the_flow(package: str, forbidden: str, why: str) -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for path in modules_of(package)
        for name in sorted(imported(path))
        if name == forbidden or name.startswith(forbidden + ".")
    ]
    assert not offenders, f"{why}: " + "; ".join(offenders)


def test_the_rules_see_the_modules_they_name() -> None:
    for package, _, _ in RULES:
        assert modules_of(package), f"{package} has no modules: a rule on nothing holds trivially"
