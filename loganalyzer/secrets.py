"""Keeping credentials out of everything loganalyzer writes.

Logs print their arguments, and arguments hold API keys and tokens (`--wandb-api-key`,
`hf_token`); a summary or a report is shared. Before any output is made the summary document
is masked. The rule is context first, so that the git commit ids Megatron and DeepSpeed print
(40 hex digits, the shape of a W&B API key) stay readable:

- a value under a key named like a credential (`wandb_api_key`, `HF_TOKEN`, `password`), or
  under a key ending in `key` when the value looks like one (`wandb_key: <40 characters>`);
- in text, the value after such a name (`WANDB_API_KEY=…`, `--hf-token …`, `'api_key': '…'`,
  `hf_token ..... …`), an `Authorization:` header's credentials, the password (or token) in a
  URL (`https://user:…@host`);
- tokens whose prefix names them wherever they are (`sk-…`, `hf_…`, `ghp_…`, `AKIA…`, Slack
  `xox?-…`, JSON web tokens, W&B server keys `local-<40 hex>`);
- a bare 40-hex string, unless the name before it says it is a commit (`git_hash`, `commit`,
  `sha`, `revision`): a key that is not named is still masked, a commit that is named is not;
- the value of every environment variable named like a credential, and every value masked by
  its context above, wherever else it appears (a warning that quotes it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

MASK = "***"

_CREDENTIAL = (
    r"(?:api[_-]?key|apikey|access[_-]?key|private[_-]?key|secret[_-]?key|token|secret"
    r"|passw(?:or)?d|credentials?)"
)
# Names that end like a credential's: wandb_api_key, HF_TOKEN, AWS_SECRET_ACCESS_KEY, but not
# tokens_per_iteration or tokenizer_type.
SECRET_NAME = re.compile(rf"(?:^|[_.-]){_CREDENTIAL}$", re.I)
# Names that end in `key` (`wandb_key`): their value is masked when it looks like a key.
KEY_NAME = re.compile(r"(?:^|[_.-])key$", re.I)
# Names that say a 40-hex value is a commit: git_hash, git-commit, commit_id, sha, revision.
COMMIT_NAME = re.compile(
    r"(?:^|[_.\s-])(?:git|commit|sha1?|hash|rev|revision)(?:[_\s-]?(?:id|hash|sha))?$",
    re.I,
)

# Tokens whose prefix names them: OpenAI and Anthropic style `sk-...`, Hugging Face `hf_...`,
# GitHub `ghp_...`, AWS access key ids, Slack tokens, JSON web tokens, and W&B server keys
# (a host prefix and a dash before the 40 characters).
PREFIXED_TOKEN = re.compile(
    r"(?<![0-9A-Za-z])(?:sk-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}"
    r"|gh[pousr]_[A-Za-z0-9]{36,}|AKIA[0-9A-Z]{16}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|local-[0-9a-f]{40})(?![0-9A-Za-z])"
)
# 40 hex digits: a W&B API key, or a git commit id (told apart by the name before it).
HEX40 = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{40}(?![0-9A-Za-z])")
# The name (an identifier, or a flag) and separator before a value in text: `NAME=`,
# `NAME: `, `'NAME': '`, `NAME ..... ` (Megatron's argument dump), `--NAME ` (a flag).
NAMED_VALUE = re.compile(
    r"(?=[-A-Za-z])(?<![A-Za-z0-9_.-])(?P<name>-{0,2}(?:[A-Za-z][A-Za-z0-9_.-]{0,80}?[_.-])?"
    rf"(?:{_CREDENTIAL}|key))(?![A-Za-z0-9_.-])"
    r"(?P<sep>[\"']?[ \t]{0,4}(?:[:=][ \t]{0,4}|\.{2,}[ \t]{1,4}|(?<=\w)[ \t]{1,4})[\"']?)"
    # looked at, not consumed (it may be the next name); no `:` or `=` in it, so that each
    # look ends at the next separator and a line of them takes linear time
    r"(?=(?P<value>[^\s\"',;:=)\]}]{1,512}))",
    re.I,
)
# An Authorization header's credentials, after its scheme (Bearer, Basic, token).
AUTHORIZATION = re.compile(
    r"(?P<head>\bauthorization[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?(?:[A-Za-z]{1,20}[ \t]{1,4})?)"
    r"(?P<value>[^\s\"',;]{1,4096})",
    re.I,
)
# A URL's password (`scheme://user:password@`) or lone token (`scheme://token@`).
URL_CREDENTIALS = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]{0,20}://(?:[^\s/:@]{0,256}:)?)(?P<value>[^\s/:@]{1,4096})@"
)

# Shorter values would mask ordinary words.
MIN_SECRET_LENGTH = 8
# Values after a credential's name that are not credentials.
_NOT_A_VALUE = {"none", "null", "true", "false", "unset", "***", "<redacted>", "<hidden>"}


def mask_secrets(value: Any, environ: Mapping[str, str] | None = None) -> Any:
    """`value` (a JSON-like document) with every credential replaced by MASK."""
    return _mask(value, planted_secrets({"": value}, environ))


def planted_secrets(
    config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The values to mask wherever they appear, longest first: every environment variable's
    named like a credential, and every credential `config` ({name: value}) holds."""
    environ = os.environ if environ is None else environ
    found = {v for k, v in environ.items() if SECRET_NAME.search(k)}
    _collect(dict(config or {}), found)
    return sorted((v for v in found if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def mask_value(name: str, value: Any, planted: list[str]) -> Any:
    """A config value as an output may show it: MASK for a credential, text masked, numbers
    and flags as they are (`planted` from `planted_secrets`)."""
    if _is_credential(name, value):
        return MASK
    if isinstance(value, str):
        return mask_text(value, planted, commit=bool(COMMIT_NAME.search(name)))
    return value


def _collect(value: Any, found: set[str]) -> None:
    """Every credential the document names by its context, to mask it wherever it appears."""
    if isinstance(value, str):
        found.update(secret for _, secret in _named_secrets(value))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and _is_credential(key, item):
                found.add(str(item))
            _collect(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, found)


def _mask(value: Any, planted: list[str]) -> Any:
    if isinstance(value, str):
        return mask_text(value, planted)
    if isinstance(value, Mapping):
        return {
            key: MASK
            if isinstance(key, str) and _is_credential(key, item)
            else _mask_named(key, item, planted)
            for key, item in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_mask(item, planted) for item in value]
    return value


def _mask_named(key: object, item: Any, planted: list[str]) -> Any:
    """A value under a commit's name keeps its 40-hex id; anything else is masked as text."""
    if isinstance(key, str) and isinstance(item, str) and COMMIT_NAME.search(key):
        return mask_text(item, planted, commit=True)
    return _mask(item, planted)


def _is_credential(key: str, item: Any) -> bool:
    """A credential's value: text or a number (not a flag, nothing or a nested structure)
    under a credential's name, or a key-shaped text under a name ending in `key`."""
    if not isinstance(item, (str, int, float)) or isinstance(item, bool):
        return False
    if SECRET_NAME.search(key):
        return True
    return bool(KEY_NAME.search(key)) and isinstance(item, str) and _looks_like_key(item)


def _looks_like_key(text: str) -> bool:
    """Twenty or more letters, digits, `_` or `-`, with digits among them."""
    return bool(re.fullmatch(r"[A-Za-z0-9_-]{20,}", text)) and any(c.isdigit() for c in text)


def mask_text(text: str, planted: list[str] | None = None, commit: bool = False) -> str:
    """`text` with every credential its context or shape gives away replaced by MASK; a
    40-hex string stays when `commit` says the text is a commit's, or a name before it does."""
    for secret in planted or ():
        text = text.replace(secret, MASK)
    spans = [span for span, _ in _named_secrets(text)]
    if not commit:
        spans.extend(
            found.span() for found in HEX40.finditer(text) if not _named_commit(text, found.start())
        )
    spans.extend(found.span() for found in PREFIXED_TOKEN.finditer(text))
    return _replace(text, spans)


def _named_secrets(text: str) -> list[tuple[tuple[int, int], str]]:
    """The spans and values of credentials their context names in `text`."""
    found = []
    for named in NAMED_VALUE.finditer(text):
        name, sep, value = named.group("name", "sep", "value")
        if not SECRET_NAME.search(name.lstrip("-")) and not (
            KEY_NAME.search(name) and _looks_like_key(value)
        ):
            continue
        if sep.strip(" \t\"'") == "" and not name.startswith("-") and not _is_password(name):
            continue  # `NAME value` separated by blanks only: a flag, or netrc's `password`
        if value.lower() in _NOT_A_VALUE:
            continue
        found.append((named.span("value"), value))
    for pattern in (AUTHORIZATION, URL_CREDENTIALS):
        found.extend((m.span("value"), m.group("value")) for m in pattern.finditer(text))
    return found


def _is_password(name: str) -> bool:
    return name.lower() in ("password", "passwd")


def _named_commit(text: str, start: int) -> bool:
    """Whether the name just before `start` (`git_hash: `, `commit `, `sha=`) is a commit's."""
    before = re.sub(r"[\s:=\"'.,(\[]*$", "", text[max(0, start - 64) : start])
    return bool(COMMIT_NAME.search(before))


def _replace(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each span (overlapping ones merged) replaced by MASK."""
    if not spans:
        return text
    out = []
    end = 0
    for low, high in sorted(spans):
        if low < end:
            if high > end:
                end = high
            continue
        out.append(text[end:low])
        out.append(MASK)
        end = high
    out.append(text[end:])
    return "".join(out)
