"""The command line: the only module that exits; it and its commands print through
`loganalyzer.terminal` alone (escaped for the terminal, a failed write an error).

stdout carries only the data asked for (the summary with its warnings, the JSON); messages,
progress and, beside the JSON, the warnings go to stderr. Errors are one line; `--debug`
shows the traceback.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from loganalyzer import __version__
from loganalyzer.allocator import return_freed_memory_promptly
from loganalyzer.commands.analysed import load_sources, show_listing
from loganalyzer.commands.compare import compare
from loganalyzer.commands.export import export
from loganalyzer.commands.fleet import fleet_command
from loganalyzer.commands.hardware import hardware_command
from loganalyzer.commands.index import index_command
from loganalyzer.commands.mfu import mfu
from loganalyzer.commands.options import (
    debug_option,
    format_option,
    model_options,
    overrides_from_options,
    quiet_option,
    refresh_option,
    run_option,
    slow_factor_option,
    split_runs_option,
    warmup_option,
)
from loganalyzer.commands.report import report
from loganalyzer.commands.runs import choose_runs
from loganalyzer.errors import EXIT_INPUT, GateFailedError, LogAnalyzerError
from loganalyzer.registry import load_registry, schemes_of
from loganalyzer.render.escape import terminal_safe
from loganalyzer.render.numbers import percent
from loganalyzer.secrets import mask_secrets
from loganalyzer.terminal import discard_stdout, echo, warn

# polars and everything built on it (load, summary, rendering) are imported by the commands
# that use them, so `loganalyzer --help` starts without them.


class _Group(click.Group):
    """Turns loganalyzer's exceptions into one-line messages and documented exit codes."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LogAnalyzerError as exc:
            if ctx.obj and ctx.obj.get("debug"):
                raise
            echo(f"Error: {mask_secrets(str(exc))}", err=True)
            sys.exit(exc.exit_code)
        except click.ClickException as exc:  # click prints it: a path in it made safe too
            setattr(exc, "message", terminal_safe(exc.message))  # noqa: B010 (Final in stubs)
            raise
        except (click.exceptions.Exit, click.Abort, SystemExit):
            raise
        except BrokenPipeError:  # the reader (`| head`) has all it wanted: not an error
            discard_stdout()
            sys.exit(0)
        except Exception as exc:  # never a traceback for the user, unless asked for
            if ctx.obj and ctx.obj.get("debug"):
                raise
            echo(
                f"Error: internal error {type(exc).__name__}: {mask_secrets(str(exc))} "
                "(rerun with --debug for the traceback, and please report it)",
                err=True,
            )
            sys.exit(EXIT_INPUT)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="loganalyzer")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """How efficiently did a training run use its hardware?

    Reads what a run left behind (Megatron-LM, Megatron-DeepSpeed, DeepSpeed and Hugging
    Face Trainer logs, TensorBoard event files, W&B runs; more formats through parser
    plugins) and reports step times, TFLOPS and MFU recomputed with one documented formula,
    slow steps, stalls and restarts.

    \b
    Exit codes: 0 success; 1 an input could not be read or held nothing usable;
    2 usage error; 3 no parser recognises a source (or two claim it); 4 a gate failed
    (--fail-under-mfu, --fail-on-crash). A run that died before its first iteration is
    still summarised (exit 0): its outcome says how it ended, its figures are null.
    """
    return_freed_memory_promptly()  # before any command loads polars
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


main.add_command(mfu)
main.add_command(hardware_command)
main.add_command(report)
main.add_command(export)
main.add_command(compare)
main.add_command(index_command)
main.add_command(fleet_command)


@main.command()
@click.argument("sources", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the JSON document on stdout.")
@click.option(
    "--markdown", is_flag=True, help="Print headline, verdicts and time budget as Markdown."
)
@format_option
@warmup_option
@slow_factor_option
@click.option(
    "--fail-under-mfu",
    type=click.FloatRange(min=0, max=1),
    help="Exit 4 when the steady-state MFU is below this fraction (or unknown).",
)
@click.option(
    "--fail-on-crash",
    is_flag=True,
    help="Exit 4 when the run did not complete or stop cleanly (crashed, hung, killed, "
    "or its ending unknown).",
)
@split_runs_option("report each on its own (--json gives a list)")
@run_option
@quiet_option
@refresh_option
@debug_option
@model_options
def summary(
    sources: tuple[str, ...],
    as_json: bool,
    markdown: bool,
    forced_format: str | None,
    warmup: int | None,
    slow_factor: float,
    fail_under_mfu: float | None,
    fail_on_crash: bool,
    split_runs: bool,
    run_number: int | None,
    quiet: bool,
    refresh: bool,
    **facts: Any,
) -> None:
    """Summarise a run: config, step times, throughput, TFLOPS, MFU, slow steps, restarts.

    SOURCES are log files (.gz read transparently) or run directories (searched
    recursively; files no parser recognises are listed as ignored), TensorBoard event files,
    W&B run folders, or W&B runs named wandb:ENTITY/PROJECT/RUN_ID, wandb:PROJECT/RUN_ID or
    by URL (the only network use: WANDB_API_KEY or `wandb login`, WANDB_BASE_URL; a request
    W&B leaves unanswered for 10 s (LOGANALYZER_WANDB_TIMEOUT), an error or a garbled answer
    ends the command with one line naming the cause and exit 1, 2 s later at most; pulled
    runs are cached under $XDG_CACHE_HOME/loganalyzer/wandb, --refresh pulls again).
    Model and hardware options override what the logs say and fill in what they lack.

    Sources that hold several runs (a different model shape, GPU count, parallelism or
    iteration total, or an iteration counter that starts again from 1) are refused with the
    runs listed (exit 1): pick one with --run N, or report each with --split-runs.

    \b
    Examples:
      loganalyzer summary slurm-1234.out --gpu h100-sxm
      loganalyzer summary logs/ --json > summary.json
      loganalyzer summary logs/ --gpu h100-sxm --markdown >> postmortem.md
      loganalyzer summary run.log --format megatron --gpu "NVIDIA A100-SXM4-80GB"
      loganalyzer summary logs/ --gpu h100-sxm --fail-under-mfu 0.35
      loganalyzer summary slurm-1234.out --fail-on-crash
      loganalyzer summary benchmarks/ --split-runs --gpu v100-sxm2
      loganalyzer summary runs/tb/ wandb/offline-run-20260101_120000-abc123/
      loganalyzer summary wandb:my-team/llm/3x7k2p9q --refresh
    """
    from loganalyzer.identity import describe_runs
    from loganalyzer.render.text import render_summary
    from loganalyzer.summary import build_summary

    runs = load_sources(sources, forced_format, quiet, refresh)
    runs = choose_runs(runs, sources, split_runs, run_number)
    options = overrides_from_options(**facts)
    documents = [
        build_summary(loaded, options, warmup=warmup, slow_factor=slow_factor) for loaded in runs
    ]
    if not quiet:
        show_listing(runs[0])
        if as_json:  # the terminal summary shows its warnings itself
            for document in documents:
                for warning in document["warnings"]:
                    warn(warning)
    if as_json:
        shown: object = documents if split_runs else documents[0]
        echo(json.dumps(shown, indent=2, allow_nan=False, default=str))
    elif markdown:
        from loganalyzer.render.markdown import render_markdown
        from loganalyzer.render.view import build_view

        echo(
            "\n\n".join(
                render_markdown(build_view(document, loaded.run, charts=False, quotes=False))
                for document, loaded in zip(documents, runs, strict=True)
            )
        )
    else:
        headings = (
            [
                f"Run {n} of {len(runs)}: {line}\n"
                for n, line in enumerate(describe_runs([loaded.run for loaded in runs]), 1)
            ]
            if split_runs
            else [""]
        )
        echo(
            "\n\n".join(
                heading + render_summary(doc)
                for heading, doc in zip(headings, documents, strict=True)
            )
        )
    if fail_on_crash:
        for number, document in enumerate(documents, 1):
            gate_ending(document, f"run {number}: " if split_runs else "")
    if fail_under_mfu is not None:
        for number, document in enumerate(documents, 1):
            gate_mfu(document, fail_under_mfu, f"run {number}: " if split_runs else "")


# The endings a --fail-on-crash gate lets through: what the run was asked to do.
CLEAN_ENDINGS = ("completed", "stopped")


def gate_ending(document: dict[str, Any], which: str = "") -> None:
    """--fail-on-crash: exit 4 unless the run completed or stopped cleanly; `which` names
    the run where there are several."""
    from loganalyzer.render.ending import ending_sentence

    outcome = document.get("outcome") or {"status": "unknown"}
    if outcome["status"] not in CLEAN_ENDINGS:
        raise GateFailedError(f"{which}{ending_sentence(outcome)}")


def gate_mfu(document: dict[str, Any], fail_under: float, which: str = "") -> None:
    """--fail-under-mfu: exit 4 when the steady-state MFU is below the bar or unknown;
    `which` names the run where there are several."""
    mfu_value = (document["flops"] or {}).get("mfu")
    if mfu_value is None or mfu_value < fail_under:
        # one decimal, unless it would print the MFU equal to the bar it fails
        decimals = 1 if percent(mfu_value) != percent(fail_under) else 3
        shown, bar = percent(mfu_value, decimals), percent(fail_under, decimals)
        raise GateFailedError(f"{which}steady-state MFU {shown} is below {bar}")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@debug_option
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
            "schemes": list(schemes_of(loaded)),
            "tested_on": list(getattr(loaded.parser, "tested_on", ())),
        }
        for name, loaded in sorted(registry.parsers.items())
    ]
    if as_json:
        echo(json.dumps({"parsers": rows, "broken": registry.broken}, indent=2))
        return
    width = max((len(r["name"]) for r in rows), default=0)
    for row in rows:
        schemes = "".join(f" {scheme}:" for scheme in row["schemes"])
        echo(
            f"{row['name']:<{width}}  {row['description']}  [{row['distribution']}]"
            + (f"  schemes:{schemes}" if schemes else "")
            + (f"  tested on: {', '.join(row['tested_on'])}" if row["tested_on"] else "")
        )
    for name, reason in sorted(registry.broken.items()):
        echo(f"{name:<{width}}  FAILED TO LOAD: {reason}")
