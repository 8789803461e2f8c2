"""Coverage-guided fuzzing of every registered parser with atheris (libFuzzer).

    pip install -e ".[fuzz]"
    python fuzz/fuzz_parsers.py megatron --seconds 600     # one parser
    python fuzz/fuzz_parsers.py all --seconds 600          # each registered parser in turn

Each parser's corpus grows in `.fuzz/<parser>/corpus` (seeded with the fixtures it claims) and
any input that raises something other than loganalyzer's own errors is written to
`.fuzz/<parser>/crashes/`; replay one with `python fuzz/fuzz_parsers.py megatron --replay FILE`.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# Inputs are capped: the largest seeds are about 100 KB, and size is the corpus's job.
MAX_INPUT_BYTES = 256 * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parser", help="a registered parser's name, or 'all'")
    parser.add_argument("--seconds", type=int, default=600, help="fuzzing time per parser")
    parser.add_argument("--replay", type=Path, help="run one saved input and show what it raises")
    args, libfuzzer_args = parser.parse_known_args()
    if args.parser == "all":
        from fuzz.targets import discover

        codes = [
            subprocess.call([sys.executable, __file__, name, f"--seconds={args.seconds}"])
            for name in discover()
        ]
        return max(codes, default=0)
    return _fuzz(args.parser, args.seconds, args.replay, libfuzzer_args)


def _fuzz(name: str, seconds: int, replay: Path | None, extra: list[str]) -> int:
    import atheris

    with atheris.instrument_imports(include=["loganalyzer"]):
        from fuzz.targets import discover
        from loganalyzer.registry import load_registry

    registry = load_registry()
    targets = discover(registry)
    if name not in targets:
        print(f"unknown parser {name!r}; registered: {', '.join(targets)}", file=sys.stderr)
        return 2
    target = targets[name]
    workdir = Path(tempfile.mkdtemp(prefix=f"fuzz-{name}-"))
    run = target.runner(workdir, registry)
    if replay is not None:
        run(replay.read_bytes())
        print(f"{replay}: no finding")
        return 0
    home = ROOT / ".fuzz" / name
    corpus, crashes = home / "corpus", home / "crashes"
    crashes.mkdir(parents=True, exist_ok=True)
    if not corpus.exists():
        corpus.mkdir(parents=True)
        for seed in target.seeds:
            shutil.copy(seed, corpus / seed.name)
    print(f"fuzzing {name}: {len(target.seeds)} seeds, input file {target.file_name}", flush=True)
    atheris.Setup(
        [
            sys.argv[0],
            str(corpus),
            f"-max_total_time={seconds}",
            f"-max_len={MAX_INPUT_BYTES}",
            "-timeout=30",
            "-print_final_stats=1",
            f"-artifact_prefix={crashes}/",
            *extra,
        ],
        run,
    )
    atheris.Fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
