"""Keeping credentials out of everything loganalyzer writes.

Logs print their arguments, and arguments hold API keys and tokens (`--wandb-api-key`,
`hf_token`); a summary, a report or a dataset is shared. Every value that leaves the tool goes
through this module: the summary document, the config of every report, comparison, export
and dataset row, the tables' text columns, messages on stderr. The rule is context first, so
that the git commit ids Megatron and DeepSpeed print (40 hex digits, the shape of a W&B API
key) stay readable:

- a name is a credential's by its last word, whatever its style (`wandb_api_key`,
  `WANDB-API-KEY`, `wandbApiKey`, `hubToken`, `db.password`): a word ending in `token`,
  `secret`, `password`, `passwd`, `passphrase`, `credential(s)`, `cookie(s)`, `auth` or
  `authorization`, `apikey`, `accesskey`, `secretkey`, `privatekey`; `key(s)` after `api`,
  `access`, `private`, `secret`, `account`, `auth`, `signing`, `encryption`, `master`,
  `session` or `subscription`; `pwd` after another word (`db_pwd`), or alone unless its value
  is an absolute path (the shell's working directory). Not `author`, `tokenizer_type`,
  `tokens_per_iteration`, `pwd_dir`, nor a tokenizer's `pad_token`, `eos_token` and the like;
- a value under such a name is masked whole: a config value, a nested structure (a W&B
  config's dicts and lists), or in text the value after the name (`WANDB_API_KEY=…`,
  `--hf-token …`, `'api_key': '…'`, `hf_token ..... …`) to its closing quote, else to the
  next blank; under a name ending in `key` after another word (`wandb_key`), a value that
  looks like a key;
- in text also an `Authorization:` header's credentials, the password (or lone token) of a
  URL (`https://user:…@host`), a Slack webhook's path, an Azure SAS `sig=`, the body of a
  PEM private key (`-----BEGIN … PRIVATE KEY-----`);
- tokens whose prefix names them wherever they are (`sk-…`, `hf_…`, `ghp_…`, `github_pat_…`,
  `glpat-…`, `npm_…`, Google `AIza…`, `AKIA…`/`ASIA…`, Slack `xox?-…`, JSON web tokens, W&B
  server keys `local-<40 hex>`);
- a bare 40-hex string, unless the name before it says it is a commit (`git_hash`, `commit`,
  `sha`, `revision`): a key that is not named is still masked, a commit that is named is not;
- the value of every environment variable named like a credential, and every value masked by
  its context above, wherever else it appears (a warning that quotes it).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import polars as pl

    from loganalyzer.model import Run

MASK = "***"

# A name's last word that makes it a credential's when the word ends so (`hubtoken`, `oauth`).
_SECRET_ENDINGS = (
    "apikey",
    "accesskey",
    "secretkey",
    "privatekey",
    "token",
    "secret",
    "password",
    "passwd",
    "passphrase",
    "credential",
    "credentials",
    "cookie",
    "cookies",
    "auth",
    "authorization",
)
# The words before a last word `key` (or `keys`) that make it a credential's.
_KEY_KINDS = frozenset(
    (
        "api",
        "access",
        "private",
        "secret",
        "account",
        "auth",
        "signing",
        "encryption",
        "master",
        "session",
        "subscription",
    )
)
# A tokenizer's special tokens are text, not credentials: `pad_token: <pad>`.
_TOKENIZER_ROLES = frozenset(("pad", "bos", "eos", "unk", "mask", "sep", "cls"))
# Names that say a 40-hex value is a commit: git_hash, git-commit, commit_id, sha, revision.
COMMIT_NAME = re.compile(
    r"(?:^|[_.\s-])(?:git|commit|sha1?|hash|rev|revision)(?:[_\s-]?(?:id|hash|sha))?$",
    re.I,
)

# Tokens whose prefix names them: OpenAI and Anthropic style `sk-...`, Hugging Face `hf_...`,
# GitHub `ghp_...` and fine-grained `github_pat_...`, GitLab `glpat-...`, npm `npm_...`,
# Google API keys `AIza...`, AWS access key ids (long-term and temporary), Slack tokens, JSON
# web tokens, and W&B server keys (a host prefix and a dash before the 40 characters).
PREFIXED_TOKEN = re.compile(
    r"(?<![0-9A-Za-z])(?:sk-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,}"
    r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_-]{20,}"
    r"|npm_[A-Za-z0-9]{36,}|AIza[0-9A-Za-z_-]{35}|A[KS]IA[0-9A-Z]{16}"
    r"|xox[abposre]-[A-Za-z0-9-]{10,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|local-[0-9a-f]{40})(?![0-9A-Za-z])"
)
# 40 hex digits: a W&B API key, or a git commit id (told apart by the name before it).
HEX40 = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{40}(?![0-9A-Za-z])")
# The name (an identifier, or a flag) and separator before a value in text: `NAME=`,
# `NAME: `, `'NAME': '`, `NAME ..... ` (Megatron's argument dump), `--NAME ` (a flag). The
# name only ends like a credential's here; its words decide (`secret_name`).
NAMED_VALUE = re.compile(
    r"(?=[-A-Za-z])(?<![A-Za-z0-9_.-])(?P<name>-{0,2}(?:[A-Za-z][A-Za-z0-9_.-]{0,200}?)?"
    r"(?:keys?|token|secret|passw(?:or)?d|passphrase|credentials?|cookies?|auth|authorization"
    r"|pwd)[0-9]{0,4})(?![A-Za-z0-9_.-])"
    r"(?P<sep>[\"']?[ \t]{0,4}(?:[:=][ \t]{0,4}|\.{2,}[ \t]{1,4}|(?<=\w)[ \t]{1,4})[\"']?)"
    # a value follows (looked at, not consumed: it may hold the next name)
    r"(?=[^\s\"',;:=)\]}])",
    re.I,
)
# An Authorization header's credentials, after its scheme (Bearer, Basic, token).
AUTHORIZATION = re.compile(
    r"(?P<head>\bauthorization[\"']?[ \t]{0,4}[:=][ \t]{0,4}[\"']?(?:[A-Za-z]{1,20}[ \t]{1,4})?)"
    r"(?P<value>[^\s\"']{1,4096})",
    re.I,
)
# A URL's password (`scheme://user:password@`, the password may hold `:` and `@`) or lone
# token (`scheme://token@`).
URL_CREDENTIALS = re.compile(
    r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]{0,20}://(?:[^\s/?#@:]{0,256}:)?)"
    r"(?P<value>[^\s/?#]{1,4096})@"
)


def url_password_masked(url: str) -> str:
    """A URL as a dataset stores and shows it: the password of its `user:password@` (or its
    lone token) masked, the rest as written, so that it names the same file from one index
    to the next without carrying the credential that opens it."""
    return URL_CREDENTIALS.sub(lambda found: f"{found['head']}{MASK}@", url)


# A Slack incoming webhook (or workflow trigger): its path is the credential.
SLACK_WEBHOOK = re.compile(
    r"(?P<head>\bhooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/)"
    r"(?P<value>[^\s\"'<>]{1,4096})",
    re.I,
)
# An Azure shared access signature's signature (`...&sig=...`, in a URL or a SAS token).
SAS_SIGNATURE = re.compile(r"(?<![A-Za-z0-9_.-])sig=(?P<value>[^&\s\"'#;]{16,4096})", re.I)
# The header of a PEM private key (RSA, EC, OpenSSH, encrypted, PGP): its body is masked to
# the footer, or to the end of the text when it was cut.
PEM_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_PEM_FOOTER = "-----END "

# Shorter values would mask ordinary words.
MIN_SECRET_LENGTH = 8
# Values after a credential's name that are not credentials.
_NOT_A_VALUE = {"none", "null", "true", "false", "unset", "***", "<redacted>", "<hidden>"}


def mask_secrets(
    value: Any, environ: Mapping[str, str] | None = None, planted: list[str] | None = None
) -> Any:
    """`value` (a JSON-like document, or one message) with every credential replaced by
    MASK; `planted` adds values to mask wherever they appear (`run_secrets`)."""
    found = planted_secrets({"": value}, environ)
    if planted:
        found = sorted({*found, *planted}, key=len, reverse=True)
    return _mask(value, found)


def run_secrets(run: Run, environ: Mapping[str, str] | None = None) -> list[str]:
    """The values to mask wherever a run's outputs quote them: every credential its config
    holds, and every later launch's (`Run.segment_config`: a warning that a resumed launch
    stated another value quotes both), and the environment's (`planted_secrets`)."""
    configs = [run.config, *run.segment_config.values()]
    found = set(planted_secrets(None, environ))
    for config in configs:
        found.update(planted_secrets({n: v.value for n, v in config.items()}, {}))
    return sorted(found, key=len, reverse=True)


def mask_config(
    config: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """A run's config ({name: value}) as an output may show it, every value masked by its
    name and by every credential the config and the environment hold."""
    planted = planted_secrets(config, environ)
    return {name: mask_value(name, value, planted) for name, value in config.items()}


def planted_secrets(
    config: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> list[str]:
    """The values to mask wherever they appear, longest first: every environment variable's
    named like a credential, and every credential `config` ({name: value}) holds."""
    environ = os.environ if environ is None else environ
    found = {v for k, v in environ.items() if _is_credential(k, v)}
    _collect(dict(config or {}), found)
    return sorted((v for v in found if len(v) >= MIN_SECRET_LENGTH), key=len, reverse=True)


def mask_value(name: str, value: Any, planted: list[str]) -> Any:
    """A config value as an output may show it: MASK for a credential (a whole nested
    structure under a credential's name), text masked, nested structures masked within,
    numbers and flags as they are (`planted` from `planted_secrets`)."""
    if _is_credential(name, value):
        return MASK
    if isinstance(value, str):
        return mask_text(value, planted, commit=bool(COMMIT_NAME.search(name)))
    return _mask(value, planted)


def secret_name(name: str) -> bool:
    """Whether `name`, in any style (snake, kebab, dotted, camel, upper), names a credential
    by its last word (see the module's rules; `key` and a lone `pwd` also need their value)."""
    return _secret_words(_words(name))


def _secret_words(words: tuple[str, ...]) -> bool:
    if not words:
        return False
    last = words[-1]
    before = words[-2] if len(words) > 1 else ""
    if last == "token" and before in _TOKENIZER_ROLES:
        return False
    if last in ("key", "keys"):
        return before in _KEY_KINDS
    if last == "pwd":
        return True  # alone, unless its value is a path (`_is_credential`)
    return last.endswith(_SECRET_ENDINGS)


@functools.lru_cache(maxsize=4096)  # a text repeats its names
def _words(name: str) -> tuple[str, ...]:
    """`wandbApiKey`, `WANDB_API_KEY`, `--wandb-api-key` → wandb, api, key (trailing numbers
    dropped: `hf_token_2`, `password2`)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name[:256])
    spaced = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", spaced)
    words = (w.rstrip("0123456789") for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()))
    return tuple(w for w in words if w)


def _collect(value: Any, found: set[str]) -> None:
    """Every credential the document names by its context, to mask it wherever it appears."""
    if isinstance(value, str):
        found.update(secret for _, secret in _named_secrets(value))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and _is_credential(key, item):
                found.update(_leaves(item))
            else:
                _collect(item, found)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _collect(item, found)


def _leaves(value: Any) -> list[str]:
    """Every text and number a value holds, nested or not."""
    if isinstance(value, Mapping):
        return [leaf for item in value.values() for leaf in _leaves(item)]
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    if value is None or isinstance(value, bool):
        return []
    return [str(value)]


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
    """A credential's value under a credential's name: text, a number, or a nested structure
    holding any (not a flag or nothing), and not the absolute path a lone `pwd` holds; or a
    key-shaped text under a name ending in `key`."""
    if item is None or isinstance(item, bool) or not _holds_a_value(item):
        return False
    words = _words(key)
    if _secret_words(words):
        return not (words == ("pwd",) and isinstance(item, str) and _is_path(item))
    return _qualified_key(words) and isinstance(item, str) and _looks_like_key(item)


def _qualified_key(words: tuple[str, ...]) -> bool:
    """A name ending in `key` after another word (`wandb_key`, `hfKey`); a lone `key` is an
    identifier's (a run's key in the dataset, a key/value pair's)."""
    return len(words) > 1 and words[-1] == "key"


def _holds_a_value(item: Any) -> bool:
    if isinstance(item, (str, int, float)):
        return not isinstance(item, bool)
    if isinstance(item, (Mapping, list, tuple)):
        return bool(_leaves(item))
    return False


def _is_path(text: str) -> bool:
    return text.startswith(("/", "~"))


_KEY_CHARACTERS = re.compile(r"[A-Za-z0-9_-]{20,}")
_DIGIT = re.compile(r"[0-9]")


def _looks_like_key(text: str, start: int = 0, end: int | None = None) -> bool:
    """Twenty or more letters, digits, `_` or `-`, with digits among them (`text[start:end]`)."""
    end = len(text) if end is None else end
    return bool(_KEY_CHARACTERS.fullmatch(text, start, end) and _DIGIT.search(text, start, end))


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


class _NextOf:
    """Where the first of some characters is at or after a position, for positions asked in
    increasing order: each stretch of text is searched once, so a line of many names stays
    linear."""

    def __init__(self, text: str, pattern: re.Pattern[str]) -> None:
        self.text, self.pattern = text, pattern
        self.low, self.high = -1, -1

    def at(self, start: int) -> int:
        if not self.low <= start <= self.high:
            found = self.pattern.search(self.text, start)
            self.low, self.high = start, found.start() if found else len(self.text)
        return self.high


_QUOTES = ('"', "'")
# Where a value ends: at its closing quote, else at the next blank.
_VALUE_ENDS = {'"': re.compile('"'), "'": re.compile("'"), " ": re.compile(r"\s")}


def _named_secrets(text: str) -> list[tuple[tuple[int, int], str]]:
    """The spans and values of credentials their context names in `text`: after a name, the
    whole value (to its closing quote when quoted, else to the next blank)."""
    found = []
    ends = {q: _NextOf(text, pattern) for q, pattern in _VALUE_ENDS.items()}
    # the end of the last value masked, by how values end: a later value that ends there too
    # lies within it (a line of `a_token=a_token=…` is not sliced over and over)
    covered = dict.fromkeys(ends, -1)
    for named in NAMED_VALUE.finditer(text):
        name, sep = named.group("name", "sep")
        words = _words(name)
        secret = _secret_words(words)
        if not secret and not _qualified_key(words):
            continue
        if sep.strip(" \t\"'") == "" and not name.startswith("-") and not _is_password(name):
            continue  # `NAME value` separated by blanks only: a flag, or netrc's `password`
        start = named.end()
        ending = sep[-1] if sep[-1:] in _QUOTES else " "
        end = ends[ending].at(start)
        if end <= covered[ending]:
            continue
        if ending == " ":
            # the punctuation of the dump or quotation it stands in
            while end > start + 1 and text[end - 1] in ",)]}\"'":
                end -= 1
        if not secret and not _looks_like_key(text, start, end):
            continue
        if end - start <= 12 and text[start:end].lower() in _NOT_A_VALUE:
            continue
        if words == ("pwd",) and _is_path(text[start : start + 1]):
            continue
        covered[ending] = ends[ending].high
        found.append(((start, end), text[start:end]))
    for pattern in (AUTHORIZATION, URL_CREDENTIALS, SLACK_WEBHOOK, SAS_SIGNATURE):
        found.extend((m.span("value"), m.group("value")) for m in pattern.finditer(text))
    found.extend(_pem_bodies(text))
    return found


def _pem_bodies(text: str) -> list[tuple[tuple[int, int], str]]:
    """The body of every PEM private key in `text`, from its header to its footer (or to the
    end of the text)."""
    bodies = []
    end = 0
    for header in PEM_PRIVATE_KEY.finditer(text):
        if header.start() < end:
            continue
        footer = text.find(_PEM_FOOTER, header.end())
        end = len(text) if footer < 0 else footer
        if end > header.end():
            bodies.append(((header.end(), end), text[header.end() : end]))
        if footer < 0:
            break
    return bodies


def _is_password(name: str) -> bool:
    return name.lower() in ("password", "passwd", "passphrase")


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


def mask_frame(
    frame: pl.DataFrame | pl.LazyFrame, planted: list[str]
) -> pl.DataFrame | pl.LazyFrame:
    """A table (eager or lazy) with every text column masked (a file's path in `source`, a
    metric's name): each distinct value is masked once, then the column is replaced in one
    vectorised pass, and only when a value changed."""
    import polars as pl

    schema = frame.lazy().collect_schema()
    text = [name for name, kind in schema.items() if kind in (pl.String, pl.Categorical)]
    if not text:
        return frame
    distinct = frame.lazy().select(pl.col(text).unique().implode()).collect()
    replaced = []
    for name in text:
        values = distinct.get_column(name)[0].to_list()
        changed = {v: m for v in values if v is not None and (m := mask_text(v, planted)) != v}
        if changed:
            column = pl.col(name).cast(pl.String).replace(changed).cast(schema[name])
            replaced.append(column)
    return frame.with_columns(replaced) if replaced else frame
