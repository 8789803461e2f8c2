"""What `report`, `compare` and `export` share with `summary`: the same options, and runs
loaded, chosen (`--split-runs`, `--run N`) and summarised the same way, so that every output
shows the same figures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from loganalyzer.commands.options import (
    RUN_OPTIONS,
    SHAPE_OPTIONS,
    format_option,
    model_options,
    overrides_from_options,
    quiet_option,
    refresh_option,
    slow_factor_option,
    warmup_option,
)
from loganalyzer.commands.progress import ReadProgress, show_progress
from loganalyzer.commands.runs import choose_runs
from loganalyzer.registry import load_registry
from loganalyzer.secrets import mask_secrets, planted_secrets
from loganalyzer.sources import READ_PROGRESS, REFRESH_REMOTE
from loganalyzer.terminal import echo, warn

if TYPE_CHECKING:  # polars and the analysis load with the command, not with `--help`
    from loganalyzer.load import Loaded

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Settings:
    """The options every summarising command takes, besides the sources."""

    forced_format: str | None
    warmup: int | None
    slow_factor: float
    quiet: bool
    refresh: bool
    facts: dict[str, Any]


def analysis_options(command: F) -> F:
    """`--format`, `--warmup`, `--slow-factor`, `-q`, `--refresh` and the model options, as
    `summary` has them; the command receives them as one `settings` argument."""
    options = (
        format_option,
        warmup_option,
        slow_factor_option,
        quiet_option,
        refresh_option,
    )

    def wrapper(**kwargs: Any) -> Any:
        settings = Settings(
            forced_format=kwargs.pop("forced_format"),
            warmup=kwargs.pop("warmup"),
            slow_factor=kwargs.pop("slow_factor"),
            quiet=kwargs.pop("quiet"),
            refresh=kwargs.pop("refresh"),
            facts={k: kwargs.pop(k) for k in (*SHAPE_OPTIONS, *RUN_OPTIONS) if k in kwargs},
        )
        return command(settings=settings, **kwargs)

    wrapper.__name__ = command.__name__
    wrapper.__doc__ = command.__doc__
    wrapped: Any = model_options(wrapper)
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped  # type: ignore[no-any-return]


def load_sources(
    sources: Sequence[str], forced_format: str | None, quiet: bool, refresh: bool
) -> list[Loaded]:
    """Every run the sources hold (`load_runs`), with broken plugins and progress on stderr
    unless quiet; `refresh` pulls W&B runs again."""
    from loganalyzer.load import load_runs

    registry = load_registry()
    for name, reason in registry.broken.items():
        echo(f"warning: parser plugin {name} failed to load: {reason}", err=True)
    token = READ_PROGRESS.set(None if quiet else ReadProgress())
    refreshing = REFRESH_REMOTE.set(refresh)
    try:
        return load_runs(
            list(sources), registry, forced_format, progress=None if quiet else show_progress
        )
    finally:
        READ_PROGRESS.reset(token)
        REFRESH_REMOTE.reset(refreshing)


def summarise(
    sources: Sequence[str],
    settings: Settings,
    split_runs: bool = False,
    run_number: int | None = None,
    hint: str | None = None,
) -> list[tuple[Loaded, dict[str, Any]]]:
    """The runs chosen among those the sources hold (`choose_runs`: several are refused with
    `hint`, unless `split_runs` or `run_number` chooses), each with its summary document;
    ignored files and warnings on stderr unless quiet."""
    from loganalyzer.summary import build_summary

    runs = load_sources(sources, settings.forced_format, settings.quiet, settings.refresh)
    runs = choose_runs(runs, sources, split_runs, run_number, hint)
    options = overrides_from_options(**settings.facts)
    summarised = [
        (
            loaded,
            build_summary(
                loaded, options, warmup=settings.warmup, slow_factor=settings.slow_factor
            ),
        )
        for loaded in runs
    ]
    if not settings.quiet:
        show_listing(runs[0])
        for _, document in summarised:
            for warning in document["warnings"]:
                warn(warning)
    return summarised


def show_listing(loaded: Loaded) -> None:
    """On stderr: the files passed over and why, and those read as part of another source."""
    # the environment's credentials found once, not once a line (10,000 ignored files)
    environment = planted_secrets()
    for skipped in loaded.ignored:
        echo(mask_secrets(f"ignored {skipped.path}: {skipped.reason}", {}, environment), err=True)
    for part in loaded.read_along:
        echo(mask_secrets(f"read {part.path} {part.how}", {}, environment), err=True)
