"""`loganalyzer --help` starts without the heavy libraries the commands load themselves."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("polars", "jinja2", "wandb", "tensorboard", "plotly")


def test_help_imports_no_heavy_library() -> None:
    probe = (
        "import sys; from click.testing import CliRunner; from loganalyzer.cli import main; "
        "result = CliRunner().invoke(main, ['--help']); assert result.exit_code == 0; "
        f"print(','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""
