"""Property tests with hostile values: the Megatron line grammar, merging several sources, and
the fuzz target of every registered parser (the same one `fuzz/fuzz_parsers.py` runs)."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from fuzz.targets import Target, discover, run_pipeline
from loganalyzer.load import load_runs
from loganalyzer.parsers.megatron import MegatronParser
from loganalyzer.registry import load_registry

SETTINGS = settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# What a damaged or unusual log puts where a value belongs.
HOSTILE_VALUES = st.one_of(
    st.sampled_from(
        ["nan", "inf", "-inf", "-", "1e309", "-0", "", "1,234.5", "3.4K", "1/0", "9" * 40, "|"]
    ),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.integers(-(10**30), 10**30).map(str),
    st.text(max_size=20),
)
FIELD_NAMES = st.one_of(
    st.sampled_from(
        [
            "elapsed time per iteration (ms)",
            "lm loss",
            "learning rate",
            "global batch size",
            "throughput per GPU (TFLOP/s/GPU)",
            "number of skipped iterations",
            "grad norm",
        ]
    ),
    st.text(alphabet=st.characters(blacklist_characters="|:\n"), max_size=15),
)
LINE_ENDS = st.sampled_from(["\n", "\r\n", "\r", ""])


@st.composite
def iteration_line(draw: st.DrawFn) -> tuple[int, str]:
    """A line of Megatron's iteration grammar with hostile field values; its iteration."""
    iteration = draw(st.integers(0, 10**15))
    fields = draw(st.lists(st.tuples(FIELD_NAMES, HOSTILE_VALUES), max_size=8))
    prefix = draw(st.sampled_from(["", "3: ", "[rank1]:", " [2025-01-02 03:04:05] ", "\x1b[32m"]))
    body = "".join(f" {name}: {value} |" for name, value in fields)
    return iteration, f"{prefix} iteration {iteration:8d}/ 1000000 |{body}"


def _write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_bytes(text.encode("utf-8", errors="surrogatepass"))
    return path


@SETTINGS
@given(
    lines=st.lists(iteration_line(), min_size=1, max_size=30),
    noise=st.lists(st.text(max_size=80), max_size=10),
    end=LINE_ENDS,
)
# a step time near the largest float: the run's span overflows to infinity
@example(
    lines=[
        (
            90_484_751_107,
            " iteration 90484751107/ 1000000 | elapsed time per iteration (ms):"
            " 1.9867360111722124e+300 |",
        )
    ],
    noise=[],
    end="\n",
)
def test_iteration_grammar_with_hostile_values_never_breaks_the_pipeline(
    lines: list[tuple[int, str]], noise: list[str], end: str
) -> None:
    registry = load_registry()
    text = end.join([*noise, *(line for _, line in lines)]) + "\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = _write(Path(tmp), "run.log", text)
        run_pipeline(path, registry, "megatron")  # raises only on something not ours
        table = MegatronParser().parse(path).table
    assert table.height <= len(lines) + len(noise)
    assert set(table["iteration"].to_list()) <= {iteration for iteration, _ in lines}


@st.composite
def split_run(draw: st.DrawFn) -> tuple[list[int], list[list[int]]]:
    """Iterations of one run, and how the files that logged them divide them (with the copies
    several nodes print)."""
    count = draw(st.integers(2, 30))
    iterations = [10 * (k + 1) for k in range(count)]
    files = draw(st.integers(1, 4))
    owner = [draw(st.integers(0, files - 1)) for _ in iterations]
    copied = [draw(st.booleans()) for _ in iterations]
    parts = [
        [it for it, o, c in zip(iterations, owner, copied, strict=True) if o == f or c]
        for f in range(files)
    ]
    # a file with one record past the first interval says nothing of where its counter began
    # (run identity would call it a run of its own): every file holds two records or the first
    kept = [p for p in parts if len(p) >= 2 or p[:1] == iterations[:1]]
    return sorted({it for p in kept for it in p}), kept


def _record(iteration: int) -> str:
    second = iteration // 10
    return (
        f" [2025-01-02 03:{second // 60 % 60:02d}:{second % 60:02d}] iteration {iteration:8d}/"
        f"    1000 | elapsed time per iteration (ms): {1000 + iteration % 7}.0 |"
        f" lm loss: {1 + iteration / 1e4:.6E} |"
    )


@SETTINGS
@given(run=split_run())
# another node's lone copy of the first record; a node's copies beside a restart-like gap
@example(run=([10, 20], [[10, 20], [10]]))
# two nodes' lone copies of the first record beside the file that holds the run
@example(run=([10, 20], [[10], [10], [10, 20]]))
@example(
    run=(
        [10 * k for k in range(1, 13)],
        [[10, 20, 30, 40, 50, 70, 80, 90, 100, 110, 120], [60, 120]],
    )
)
def test_merging_several_sources_keeps_every_record_once(
    run: tuple[list[int], list[list[int]]],
) -> None:
    iterations, parts = run
    registry = load_registry()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for k, part in enumerate(parts):
            _write(folder, f"node{k}.log", "\n".join(_record(it) for it in part) + "\n")
        # a part whose first record covers iteration 1 is another run (identity); however the
        # parts are told apart, every record is kept once and every file is read
        runs = [loaded.run for loaded in load_runs([tmp], registry)]
    kept = [it for run in runs for it in run.table["iteration"].to_list()]
    assert sorted(kept) == iterations
    assert sum(len(run.sources) for run in runs) == len(parts)


def test_every_registered_parser_has_a_seeded_fuzz_target() -> None:
    targets = discover()
    assert set(targets) == set(load_registry().parsers)
    for target in targets.values():
        assert target.seeds, f"{target.parser}: no fixture it claims to seed fuzzing with"
        assert target.file_name in {seed.name for seed in target.seeds}


@cache
def _targets() -> list[Target]:
    """The fuzz targets, found once: finding them runs every parser's detection on every
    fixture (1.6 s of CPU), which each example repeated."""
    return sorted(discover(load_registry()).values(), key=str)


@SETTINGS
@given(data=st.data())
def test_fuzz_targets_survive_mutated_seeds(data: st.DataObject) -> None:
    """A few hypothesis-driven rounds of what the atheris harness does for hours."""
    registry = load_registry()
    target = data.draw(st.sampled_from(_targets()))
    seed = data.draw(st.sampled_from(target.seeds)).read_bytes()
    cut = data.draw(st.integers(0, len(seed)))
    junk = data.draw(st.binary(max_size=64))
    where = data.draw(st.integers(0, cut))
    with tempfile.TemporaryDirectory() as tmp:
        target.runner(Path(tmp), registry)(seed[:where] + junk + seed[where:cut])
