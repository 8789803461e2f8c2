"""Keeping credentials out of everything loganalyzer writes.

Logs print their arguments, and arguments hold API keys and tokens (`--wandb-api-key`,
`hf_token`); a summary or a report is shared. Before any output is made the summary document
is masked: values under a key named like a credential, strings shaped like API keys, and the
value of every environment variable named like a credential, wherever it appears.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

MASK = "***"

# Names that end like a credential's: wandb_api_key, HF_TOKEN, AWS_SECRET_ACCESS_KEY, but not
# tokens_per_iteration or tokenizer_type.
SECRET_NAME = re.compile(
    r"(?:^|[_-])(?:api[_-]?key|access[_-]?key|private[_-]?key|token|secret|"
    r"passw(?:or)?d|credentials?)$",
    re.I,
)

# W&B keys (40 hex digits; a git commit id has the same shape and is masked too), OpenAI and
# Anthropic style `sk-...`, Hugging Face `hf_...`, GitHub `ghp_...`, AWS access key ids,
# Slack tokens, and JSON web tokens.
KEY_LIKE = re.compile(
    r"(?<![0-9A-Za-z])(?:[0-9a-f]{40}|sk-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}"
    r"|gh[pousr]_[A-Za-z0-9]{36,}|AKIA[0-9A-Z]{16}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})(?![0-9A-Za-z])"
)

# Shorter values would mask ordinary words.
MIN_SECRET_LENGTH = 8


def mask_secrets(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """`value` (a JSON-like document) with every credential replaced by MASK."""
    environ = os.environ if environ is None else environ
    planted = sorted(
        (v for k, v in environ.items() if SECRET_NAME.search(k) and len(v) >= MIN_SECRET_LENGTH),
        key=len,
        reverse=True,
    )
    return _mask(value, planted)


def _mask(value: Any, planted: list[str]) -> Any:
    if isinstance(value, str):
        for secret in planted:
            value = value.replace(secret, MASK)
        return KEY_LIKE.sub(MASK, value)
    if isinstance(value, Mapping):
        return {
            key: MASK
            if isinstance(key, str) and SECRET_NAME.search(key) and _is_scalar_value(item)
            else _mask(item, planted)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_mask(item, planted) for item in value]
    return value


def _is_scalar_value(item: Any) -> bool:
    """A credential's value: text or a number, not a flag, nothing or a nested structure."""
    return isinstance(item, (str, int, float)) and not isinstance(item, bool)
