"""The command line: the only module that prints or exits.

stdout carries only the data asked for (the summary, the JSON); messages, warnings and
progress go to stderr. Errors are one line; `--debug` shows the traceback.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import click

from loganalyzer import __version__
from loganalyzer.commands.hardware import hardware_command
from loganalyzer.commands.mfu import mfu
from loganalyzer.commands.options import model_options, overrides_from_options
from loganalyzer.errors import EXIT_INPUT, GateFailedError, LogAnalyzerError
from loganalyzer.load import load_run
from loganalyzer.registry import load_registry
from loganalyzer.render.escape import terminal_safe
from loganalyzer.render.text import render_summary
from loganalyzer.sources import READ_PROGRESS
from loganalyzer.summary import build_summary


class _Group(click.Group):
    """Turns loganalyzer's exceptions into one-line messages and documented exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LogAnalyzerError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(terminal_safe(f"Error: {exc}"), err=True)
            sys.exit(exc.exit_code)
        except (click.ClickException, click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BrokenPipeError:  # the reader (`| head`) has all it wanted: not an error
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            sys.exit(0)
        except Exception as exc:  # never a traceback for the user, unless asked for
            if ctx.obj and ctx.obj.get("debug"):
                raise
            click.echo(
                terminal_safe(
                    f"Error: internal error {type(exc).__name__}: {exc} "
                    "(rerun with --debug for the traceback, and please report it)"
                ),
                err=True,
            )
            sys.exit(EXIT_INPUT)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="loganalyzer")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """How efficiently did a training run use its hardware?

    Reads what a run left behind (Megatron-LM, Megatron-DeepSpeed stdout logs; more formats
    through parser plugins) and reports step times, TFLOPS and MFU recomputed with one
    documented formula, slow steps, stalls and restarts.

    \b
    Exit codes: 0 success; 1 an input could not be read or held nothing usable;
    2 usage error; 3 no parser recognises a source (or two claim it); 4 a gate failed.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def _progress(message: str) -> None:
    click.echo(message, err=True)


class _ReadProgress:
    """Reports reading a large file on stderr, every tenth of it or every 256 MB, whichever is
    more (every 256 MB of a .gz, whose size decompressed is unknown)."""

    STEP_BYTES = 256 * 1024 * 1024

    def __init__(self) -> None:
        self.shown: dict[Path, int] = {}

    def __call__(self, path: Path, done: int, total: int | None) -> None:
        step = max(total // 10, self.STEP_BYTES) if total else self.STEP_BYTES
        if done // step <= self.shown.get(path, 0):
            return
        self.shown[path] = done // step
        share = f" ({done * 100 // total} %)" if total else ""
        click.echo(f"  {path}: {done >> 20} MB read{share}", err=True)


main.add_command(mfu)
main.add_command(hardware_command)


@main.command()
@click.argument("sources", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document on stdout.")
@click.option(
    "--format", "forced_format", metavar="NAME", help="Skip detection and use this parser."
)
@click.option(
    "--warmup",
    type=click.IntRange(min=0),
    help="Iterations from each segment's start excluded from steady state (default: detected).",
)
@click.option(
    "--slow-factor",
    type=click.FloatRange(min=1, min_open=True),
    default=1.5,
    show_default=True,
    help="A step this many times its local baseline is slow.",
)
@click.option(
    "--fail-under-mfu",
    type=click.FloatRange(min=0, max=1),
    help="Exit 4 when the steady-state MFU is below this fraction (or unknown).",
)
@click.option("-q", "--quiet", is_flag=True, help="No progress or warnings on stderr.")
@model_options
def summary(
    sources: tuple[str, ...],
    as_json: bool,
    forced_format: str | None,
    warmup: int | None,
    slow_factor: float,
    fail_under_mfu: float | None,
    quiet: bool,
    **facts: Any,
) -> None:
    """Summarise a run: config, step times, throughput, TFLOPS, MFU, slow steps, restarts.

    SOURCES are log files (.gz read transparently) or run directories (searched
    recursively; files no parser recognises are listed as ignored). Model and hardware
    options override what the logs say and fill in what they lack.

    \b
    Examples:
      loganalyzer summary slurm-1234.out --gpu h100-sxm
      loganalyzer summary logs/ --json > summary.json
      loganalyzer summary run.log --format megatron --gpu "NVIDIA A100-SXM4-80GB"
      loganalyzer summary logs/ --gpu h100-sxm --fail-under-mfu 0.35
    """
    registry = load_registry()
    for name, reason in registry.broken.items():
        click.echo(f"warning: parser plugin {name} failed to load: {reason}", err=True)
    token = READ_PROGRESS.set(None if quiet else _ReadProgress())
    try:
        loaded = load_run(
            list(sources), registry, forced_format, progress=None if quiet else _progress
        )
    finally:
        READ_PROGRESS.reset(token)
    document = build_summary(
        loaded, overrides_from_options(**facts), warmup=warmup, slow_factor=slow_factor
    )
    if not quiet:
        for skipped in loaded.ignored:
            click.echo(terminal_safe(f"ignored {skipped.path}: {skipped.reason}"), err=True)
        for warning in document["warnings"]:
            click.echo(terminal_safe(f"warning: {warning}"), err=True)
    if as_json:
        click.echo(json.dumps(document, indent=2, allow_nan=False, default=str))
    else:
        click.echo(render_summary(document))
    if fail_under_mfu is not None:
        mfu_value = (document["flops"] or {}).get("mfu")
        if mfu_value is None or mfu_value < fail_under_mfu:
            shown = "unknown" if mfu_value is None else f"{mfu_value:.4f}"
            raise GateFailedError(f"steady-state MFU {shown} is below {fail_under_mfu}")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def parsers(as_json: bool) -> None:
    """List the registered parsers, built-in and third-party, and any that failed to load.

    \b
    Examples:
      loganalyzer parsers
      loganalyzer parsers --json
    """
    registry = load_registry()
    rows = [
        {
            "name": name,
            "description": loaded.parser.description,
            "distribution": loaded.distribution,
            "entry_point": loaded.entry_point,
        }
        for name, loaded in sorted(registry.parsers.items())
    ]
    if as_json:
        click.echo(json.dumps({"parsers": rows, "broken": registry.broken}, indent=2))
        return
    width = max((len(r["name"]) for r in rows), default=0)
    for row in rows:
        click.echo(f"{row['name']:<{width}}  {row['description']}  [{row['distribution']}]")
    for name, reason in sorted(registry.broken.items()):
        click.echo(f"{name:<{width}}  FAILED TO LOAD: {reason}")
