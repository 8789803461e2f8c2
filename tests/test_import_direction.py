"""Data flows one way, and the imports say so: commands -> fleet -> summary -> parsers -> load ->
flops/analysis -> render. A module may import what stands below it, never what stands above.

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


# The analysis and FLOPs modules whose sentences already moved to `render.wording`: they
# return facts, and none may import a renderer again. A module joins the tuple as its wording
# moves; when every module of both packages is in it, the tuple gives way to two RULES
# ("loganalyzer.analysis" and "loganalyzer.flops" must not import "loganalyzer.render").
CLEAN_OF_WORDING = (
    "loganalyzer.analysis.accounting",
    "loganalyzer.analysis.causes",
    "loganalyzer.analysis.goodput",
    "loganalyzer.analysis.incident_verdicts",
    "loganalyzer.analysis.levers",
    "loganalyzer.analysis.steady",
    "loganalyzer.analysis.verdicts",
    "loganalyzer.flops.formulas",
)


@pytest.mark.parametrize("module", CLEAN_OF_WORDING)
def test_modules_clean_of_wording_import_no_renderer(module: str) -> None:
    path = PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(".py")
    assert path.is_file(), f"{module} is not a module: a rule on nothing holds trivially"
    renderers = sorted(
        name
        for name in imported(path)
        if name == "loganalyzer.render" or name.startswith("loganalyzer.render.")
    )
    assert not renderers, f"{module} returns facts, not words, yet imports {renderers}"
