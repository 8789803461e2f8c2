"""The exceptions loganalyzer raises on purpose, and the exit code each maps to.

Only the CLI turns them into messages and exit codes; everything else raises.
"""

EXIT_INPUT = 1
EXIT_USAGE = 2
EXIT_UNRECOGNISED = 3
EXIT_GATE = 4


class LogAnalyzerError(Exception):
    """A problem the user can act on; the message is one line and says what to do."""

    exit_code = EXIT_INPUT


class InputError(LogAnalyzerError):
    """An input could not be read or held nothing usable."""


class NothingReadError(InputError):
    """A parser found nothing of its format in a file: when it was chosen by detection, the
    file goes on to the next parser that claims it (`--format` forces the one named)."""


class SeveralRunsError(InputError):
    """The sources hold several runs where one was asked for; `runs` describes each."""

    def __init__(
        self,
        runs: list[str],
        sources: str,
        hint: str = "Pick one with --run N, or report each with --split-runs.",
    ) -> None:
        self.runs = runs
        listed = "".join(f"\n  run {n}: {line}" for n, line in enumerate(runs, 1))
        super().__init__(
            f"{sources} holds {len(runs)} different runs (model shape, GPUs, parallelism or "
            f"iteration total differ, or the iteration counter starts again from 1):"
            f"{listed}\n{hint}"
        )


class UsageProblem(LogAnalyzerError):
    """A command-line value that cannot be used (exit 2, as click's own usage errors)."""

    exit_code = EXIT_USAGE


class StorageError(LogAnalyzerError):
    """The temporary folder could not take what is written there (full, or not writable)."""


class OutputError(LogAnalyzerError):
    """stdout could not take the data asked for (a full device, a closed stream)."""


class SchemaError(LogAnalyzerError):
    """A parser produced a table that breaks the data model (a bug in that parser)."""


class UnrecognisedSourceError(LogAnalyzerError):
    """No parser recognises a source, or two claim it equally."""

    exit_code = EXIT_UNRECOGNISED


class GateFailedError(LogAnalyzerError):
    """A quality gate such as --fail-under-mfu failed."""

    exit_code = EXIT_GATE
