"""Start-up: `loganalyzer --help` starts without the heavy libraries the commands load
themselves, and `summary` of a text log loads none of the TensorBoard, W&B or report code."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import FIXTURES

HEAVY = ("polars", "jinja2", "wandb", "tensorboard", "plotly")
# What the README's first command (`summary` of the bundled Megatron-LM log) has no use for:
# numpy and protobuf decode TensorBoard and W&B files, jinja2 and plotly make the HTML report,
# urllib's client diagnoses a failed W&B pull, multiprocessing reads many large files at once.
NOT_FOR_A_TEXT_LOG = (
    "numpy",
    "tensorboard",
    "wandb",
    "google.protobuf",
    "jinja2",
    "plotly",
    "urllib.request",
    "multiprocessing",
    "loganalyzer.parsers.tensorboard.reader",
    "loganalyzer.parsers.wandb.reader",
    "loganalyzer.parsers.scalar_table",
)
EXAMPLE = str(FIXTURES / "megatron" / "bigscience_gpt2_tp4_pp8.out")


def _loaded_after(args: list[str], modules: tuple[str, ...]) -> tuple[str, str]:
    """The command's output and which of `modules` it loaded, run by the CLI in a fresh
    interpreter."""
    probe = (
        "import sys; from click.testing import CliRunner; from loganalyzer.cli import main; "
        f"result = CliRunner().invoke(main, {args!r}); "
        "assert result.exit_code == 0, result.output; print(result.output); "
        f"print('loaded:', ','.join(m for m in {modules!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    output, _, loaded = done.stdout.rstrip("\n").rpartition("\nloaded: ")
    return output, loaded


def test_help_imports_no_heavy_library() -> None:
    _, loaded = _loaded_after(["--help"], HEAVY)
    assert loaded == ""


def test_summary_of_the_bundled_example_loads_no_tensorboard_wandb_or_report_code() -> None:
    output, loaded = _loaded_after(["summary", EXAMPLE, "--gpu", "v100-sxm2"], NOT_FOR_A_TEXT_LOG)
    assert "MFU" in output  # the summary was made, by the Megatron parser
    assert loaded == ""
