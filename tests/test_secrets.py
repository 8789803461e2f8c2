"""Credentials are masked by their context, commit ids stay readable: both ways, as
properties over generated keys, commits and surrounding text, and end to end through every
output that shows a log's config."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from loganalyzer import secrets
from loganalyzer.secrets import MASK, mask_secrets, mask_text
from tests.bad_inputs import BAD
from tests.test_regex_bounds import worst_lines

HEX = "0123456789abcdef"
hex40 = st.text(HEX, min_size=40, max_size=40) | st.text(HEX.upper(), min_size=40, max_size=40)
# API keys and tokens of every shape a context names: a W&B key, longer keys, short passwords
key_like = hex40 | st.from_regex(r"[A-Za-z0-9_][A-Za-z0-9_-]{7,60}", fullmatch=True).filter(
    lambda k: k.lower() not in ("none", "null", "true", "false", "unset")
)
# Text around a value that can spell no credential's and no commit's name.
NEUTRAL = "bdfjklpquwxyz0123456789 ,;"
neutral = st.text(NEUTRAL, max_size=30)

CREDENTIAL_CONTEXTS = (
    "WANDB_API_KEY={}",
    'export WANDB_API_KEY="{}"',
    "--wandb-api-key {} --lr 1e-4",
    "--hf_token={}",
    "{{'wandb_api_key': '{}', 'lr': 0.0001}}",
    '{{"api_key": "{}"}}',
    "  wandb_api_key ................................... {}",
    "HF_TOKEN: {}",
    "aws_secret_access_key = {}",
    "db.password={}",
    "Authorization: Bearer {}",
    "authorization: Basic {}",
    "'Authorization': 'token {}'",
    "https://user:{}@api.wandb.ai/graphql",
    "git clone https://oauth2:{}@gitlab.example.com/team/repo.git",
    "machine api.wandb.ai login user password {}",
    "X-Api-Key: {}",
)
COMMIT_CONTEXTS = (
    "git_hash: {}",
    "git_hash ........................................ {}",
    "DeepSpeed info: version=0.14.0, git-hash={}, git-branch=master",
    "commit {}",
    "Megatron commit_id={}",
    "sha={}",
    "{{'git_commit': '{}'}}",
    "revision {}",
    "megatron git hash {}",
)
PREFIXED = (
    "sk-" + "a1B2" * 10,
    "hf_" + "Ab3" * 12,
    "ghp_" + "Z9y8" * 10,
    "AKIA" + "ABCDEFGHIJ234567",
    "xoxb-1234567890-abcdefghij",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NSJ9.c2lnbmF0dXJlX2hlcmU",
    "local-" + HEX * 2 + HEX[:8],
)


@settings(deadline=None)  # a loaded machine's pauses are not the code's
@given(
    key=key_like,
    context=st.sampled_from(CREDENTIAL_CONTEXTS),
    before=neutral,
    after=neutral,
)
def test_a_key_its_context_names_is_masked(key: str, context: str, before: str, after: str) -> None:
    masked = mask_text(f"{before} {context.format(key)} {after}")
    assert key not in masked
    assert MASK in masked


@settings(deadline=None)  # a loaded machine's pauses are not the code's
@given(commit=hex40, context=st.sampled_from(COMMIT_CONTEXTS), before=neutral, after=neutral)
def test_a_commit_id_named_as_one_stays_readable(
    commit: str, context: str, before: str, after: str
) -> None:
    text = f"{before} {context.format(commit)} {after}"
    assert mask_text(text) == text


@settings(deadline=None)  # a loaded machine's pauses are not the code's
@given(value=hex40, before=neutral, after=neutral)
def test_a_40_hex_string_no_name_explains_is_masked(value: str, before: str, after: str) -> None:
    """What is not named a commit may be a W&B key: masked."""
    assert mask_text(f"{before} {value} {after}") == f"{before} {MASK} {after}"


@settings(deadline=None)  # a loaded machine's pauses are not the code's
@given(token=st.sampled_from(PREFIXED), before=neutral, after=neutral)
def test_a_token_its_prefix_names_is_masked_anywhere(token: str, before: str, after: str) -> None:
    assert mask_text(f"{before} {token} {after}") == f"{before} {MASK} {after}"


@settings(deadline=None)  # a loaded machine's pauses are not the code's
@given(
    key=key_like,
    commit=hex40,
    name=st.sampled_from(("wandb_api_key", "HF_TOKEN", "db-password", "github.token", "secret")),
)
def test_in_a_document_names_decide_and_a_masked_value_is_masked_where_it_is_quoted(
    key: str, commit: str, name: str
) -> None:
    assume(key not in commit)  # a commit id that is also the key is masked: it is the key
    document = {
        "config": {name: key, "git_hash": commit, "commit": commit, "tokens_per_iteration": 8},
        "warnings": [f"run.log:20: {name} = {key} differs (run.log:3)", f"key was {key}."],
    }
    masked = mask_secrets(document, {})
    assert masked["config"] == {
        name: MASK,
        "git_hash": commit,
        "commit": commit,
        "tokens_per_iteration": 8,
    }
    if len(key) >= 8:
        assert key not in json.dumps(masked)


def test_a_key_shaped_value_under_a_name_ending_in_key_is_masked() -> None:
    masked = mask_secrets(
        {"wandb_key": "abcd1234" * 4, "sort_key": "loss", "key": "validation_loss"}, {}
    )
    assert masked == {"wandb_key": MASK, "sort_key": "loss", "key": "validation_loss"}


def test_names_that_only_look_like_credentials_are_left_alone() -> None:
    text = "tokens_per_iteration=4096 tokenizer_type=GPT2BPETokenizer hf_token = None token 5"
    assert mask_text(text) == text


def _log_with_a_commit(tmp_path: Path) -> tuple[Path, str, str]:
    """The credential fixture with a commit id among its arguments."""
    commit = "89abcdef0123456789abcdef0123456789abcdef"
    lines = (BAD / "secret_in_config.log").read_text().splitlines(keepends=True)
    lines.insert(4, f"  git_hash ........................................ {commit}\n")
    log = tmp_path / "run.log"
    log.write_text("".join(lines))
    return log, commit, "0123456789abcdef0123456789abcdef01234567"


def test_report_export_and_compare_show_the_commit_and_mask_the_key(tmp_path: Path) -> None:
    log, commit, key = _log_with_a_commit(tmp_path)
    planted = "planted-env-secret-value-123"
    env = {**os.environ, "WANDB_API_KEY": planted}

    def run(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "loganalyzer", *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr

    other = tmp_path / "other.log"
    other.write_text(log.read_text().replace(commit, commit[::-1]))
    shown = {
        "report": run("report", "-q", str(log), "-o", str(tmp_path / "r.html")),
        "report file": (tmp_path / "r.html").read_text(),
        "export": run("export", "-q", str(log), "-o", str(tmp_path / "steps.csv")),
        "export config": (tmp_path / "steps.csv.config.json").read_text(),
        "compare": run("compare", "-q", "--json", str(log), str(other)),
    }
    for where, text in shown.items():
        assert key not in text, where
        assert planted not in text, where
    assert f"git_hash</td><td>{commit}<" in shown["report file"]
    assert json.loads(shown["export config"])["config"]["git_hash"]["value"] == commit
    assert json.loads(shown["export config"])["config"]["wandb_api_key"]["value"] == MASK
    differences = json.loads(shown["compare"])["config_differences"]
    assert differences["git_hash"] == [commit, commit[::-1]]


@pytest.mark.parametrize(
    "name", sorted(n for n, v in vars(secrets).items() if isinstance(v, re.Pattern))
)
def test_masking_a_megabyte_of_near_matches_is_linear(name: str) -> None:
    """Every pattern at once, as a summary's strings are masked, on the worst 1 MB lines
    built from each pattern (tests.test_regex_bounds): about 0.2 s on an idle machine (tens
    of thousands of matches), so 2 s leaves room for a loaded one and still catches
    backtracking, which takes minutes."""
    for kind, line in worst_lines(getattr(secrets, name).pattern).items():
        start = time.perf_counter()
        mask_text(line)
        took = time.perf_counter() - start
        assert took < 2.0, f"{name} {kind}: {took:.2f} s"
