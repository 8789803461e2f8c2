"""`index` of a generated tree of Megatron-LM runs (the fleet tests' generator) with two
worker processes, against one process on the same tree (the row's ratio is how the pool
scales) and against reading and fingerprinting every file once (the least any index does).
Each measured index starts from an empty dataset: a first index, not an incremental one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from bench.harness import Case, Command, child_argv
from tests.fleet_tree import CONFIGS, write_tree

NAME = "index"
FULL_RUNS_PER_CONFIG = 20
QUICK_RUNS_PER_CONFIG = 4
RECORDS = 2000


def cases(workdir: Path, quick: bool) -> list[Case]:
    per_config = QUICK_RUNS_PER_CONFIG if quick else FULL_RUNS_PER_CONFIG
    tree = write_tree(workdir / "fleet", per_config, RECORDS)
    runs = len(CONFIGS) * per_config
    megabytes = tree.bytes / 1e6
    root = str(tree.root)
    return [
        Case(
            NAME,
            f"{runs} runs, {megabytes:,.1f} MB, {RECORDS:,} iterations each",
            runs,
            "runs",
            Command("index, 2 processes", child_argv("index", root, "2"), _analysed(runs)),
            (
                Command("index, 1 process", child_argv("index", root, "1"), _analysed(runs)),
                Command("read + fingerprint every file", child_argv("fingerprint", root)),
            ),
            also=((megabytes, "MB"),),
        )
    ]


def _analysed(expected: int) -> Callable[[str], str | None]:
    """Rejects an index that did not analyse every run of the tree."""

    def check(output: str) -> str | None:
        analysed = int(output.split()[0])
        return None if analysed == expected else f"{analysed} runs analysed, {expected} written"

    return check
