"""Nothing from a log acts on the user's terminal, and no credential reaches an output."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from click.testing import CliRunner

from loganalyzer.cli import main
from loganalyzer.render.escape import terminal_safe
from loganalyzer.secrets import MASK, mask_secrets
from tests.bad_inputs import BAD

HOSTILE = BAD / "ansi_and_controls.log"
SECRETS = BAD / "secret_in_config.log"
LOGGED_KEYS = (
    "0123456789abcdef0123456789abcdef01234567",
    "fedcba9876543210fedcba9876543210fedcba98",
)
PLANTED = "planted-env-secret-value-123"  # the log prints it too, as an argument's value


def test_control_characters_are_shown_escaped() -> None:
    assert terminal_safe("a\x1b[2Jb\x07c\rd\x08\u202ee\x9bf\tg\nh") == (
        "a\\x1b[2Jb\\x07c\\rd\\x08\\u202ee\\x9bf\tg\nh"
    )
    assert terminal_safe("GPUs  32 × H100 — ok") == "GPUs  32 × H100 — ok"


def test_terminal_summary_and_warnings_of_a_hostile_log_are_escaped() -> None:
    result = CliRunner().invoke(main, ["summary", str(HOSTILE)])
    assert result.exit_code == 0
    for stream in (result.stdout, result.stderr):
        assert not any(c in stream for c in "\x1b\x07\x08\r\u202e")
    # the terminal summary lists its warnings itself
    assert "exp_name = \\x1b]0;pwned\\x07" in result.stdout


def test_credentials_are_masked_by_name_shape_and_environment() -> None:
    document = {
        "config": {"wandb_api_key": "short", "hf_token": 12345, "use_token": True, "lr": 1e-4},
        "run": {"tokens_per_iteration": 4096, "tokenizer_type": "GPT2BPETokenizer"},
        "warnings": [f"key {LOGGED_KEYS[0]} and sk-{'a' * 40} and {PLANTED}!"],
        "sources": [{"path": "run-1234.log", "commit": "not a key: 0123abc"}],
    }
    masked = mask_secrets(document, {"WANDB_API_KEY": PLANTED, "HOME": "/root"})
    assert masked == {
        "config": {"wandb_api_key": MASK, "hf_token": MASK, "use_token": True, "lr": 1e-4},
        "run": {"tokens_per_iteration": 4096, "tokenizer_type": "GPT2BPETokenizer"},
        "warnings": [f"key {MASK} and {MASK} and {MASK}!"],
        "sources": [{"path": "run-1234.log", "commit": "not a key: 0123abc"}],
    }


def test_summary_json_and_text_never_carry_a_planted_key() -> None:
    env = {**os.environ, "WANDB_API_KEY": PLANTED}
    for extra in (["--json"], []):
        done = subprocess.run(
            [sys.executable, "-m", "loganalyzer", "summary", str(SECRETS), *extra],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        for secret in (PLANTED, *LOGGED_KEYS):
            assert secret not in done.stdout + done.stderr
    warnings = json.loads(
        CliRunner().invoke(main, ["summary", "--json", "-q", str(SECRETS)]).stdout
    )["warnings"]
    assert any("wandb_api_key = *** differs from ***" in w for w in warnings)
