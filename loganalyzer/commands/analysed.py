"""What `report`, `compare` and `export` share with `summary`: the same options, and one
run loaded and summarised the same way, so that every output shows the same figures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from loganalyzer.commands.options import (
    RUN_OPTIONS,
    SHAPE_OPTIONS,
    format_option,
    model_options,
    overrides_from_options,
    slow_factor_option,
    warmup_option,
)
from loganalyzer.commands.progress import ReadProgress, show_progress
from loganalyzer.registry import load_registry
from loganalyzer.render.escape import terminal_safe
from loganalyzer.sources import READ_PROGRESS

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
    facts: dict[str, Any]


def analysis_options(command: F) -> F:
    """`--format`, `--warmup`, `--slow-factor`, `-q` and the model options, as `summary`
    has them; the command receives them as one `settings` argument."""
    options = (
        format_option,
        warmup_option,
        slow_factor_option,
        click.option("-q", "--quiet", is_flag=True, help="No progress or warnings on stderr."),
    )

    def wrapper(**kwargs: Any) -> Any:
        settings = Settings(
            forced_format=kwargs.pop("forced_format"),
            warmup=kwargs.pop("warmup"),
            slow_factor=kwargs.pop("slow_factor"),
            quiet=kwargs.pop("quiet"),
            facts={k: kwargs.pop(k) for k in (*SHAPE_OPTIONS, *RUN_OPTIONS) if k in kwargs},
        )
        return command(settings=settings, **kwargs)

    wrapper.__name__ = command.__name__
    wrapper.__doc__ = command.__doc__
    wrapped: Any = model_options(wrapper)
    for option in reversed(options):
        wrapped = option(wrapped)
    return wrapped  # type: ignore[no-any-return]


def summarise(sources: Sequence[str], settings: Settings) -> tuple[Loaded, dict[str, Any]]:
    """Load the sources as one run and build its summary document; progress, ignored files
    and warnings on stderr unless quiet."""
    from loganalyzer.load import load_run
    from loganalyzer.summary import build_summary

    registry = load_registry()
    for name, reason in registry.broken.items():
        click.echo(f"warning: parser plugin {name} failed to load: {reason}", err=True)
    token = READ_PROGRESS.set(None if settings.quiet else ReadProgress())
    try:
        loaded = load_run(
            list(sources),
            registry,
            settings.forced_format,
            progress=None if settings.quiet else show_progress,
        )
    finally:
        READ_PROGRESS.reset(token)
    document = build_summary(
        loaded,
        overrides_from_options(**settings.facts),
        warmup=settings.warmup,
        slow_factor=settings.slow_factor,
    )
    if not settings.quiet:
        for skipped in loaded.ignored:
            click.echo(terminal_safe(f"ignored {skipped.path}: {skipped.reason}"), err=True)
        for part in loaded.read_along:
            click.echo(terminal_safe(f"read {part.path} {part.how}"), err=True)
        for warning in document["warnings"]:
            click.echo(terminal_safe(f"warning: {warning}"), err=True)
    return loaded, document
