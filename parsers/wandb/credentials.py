"""Whether a W&B API key can be found where the `wandb` client looks for one, checked before
any request: without a key the client still reaches for the server, and the error then names
the network (or the server's refusal) rather than the missing key.

The places, as wandb (0.16 to today) reads them: the WANDB_API_KEY variable (or an identity
token file, WANDB_IDENTITY_TOKEN_FILE), a netrc entry for the W&B host (the file NETRC names,
else ~/.netrc or ~/_netrc), and an `api_key` in the settings file (WANDB_CONFIG_DIR/settings,
else ~/.config/wandb/settings). The key itself is never read further than to see that it is
there.
"""

from __future__ import annotations

import configparser
import netrc
import os
from pathlib import Path
from urllib.parse import urlsplit

DEFAULT_BASE_URL = "https://api.wandb.ai"


def base_url() -> str:
    return os.environ.get("WANDB_BASE_URL") or DEFAULT_BASE_URL


def missing_key() -> str | None:
    """None when a key (or identity token) is set somewhere the client reads it; else what
    was looked at, for the error to say."""
    if os.environ.get("WANDB_API_KEY") or os.environ.get("WANDB_IDENTITY_TOKEN_FILE"):
        return None
    host = urlsplit(base_url()).netloc
    netrc_path = _netrc_path()
    settings_path = _settings_path()
    if _netrc_has(netrc_path, host) or _settings_have(settings_path):
        return None
    return f"WANDB_API_KEY, {netrc_path} (machine {host}), {settings_path}"


def _netrc_path() -> Path:
    if named := os.environ.get("NETRC"):
        return Path(named).expanduser()
    unix = Path("~/.netrc").expanduser()
    windows = Path("~/_netrc").expanduser()
    return windows if not unix.exists() and windows.exists() else unix


def _netrc_has(path: Path, host: str) -> bool:
    try:
        found = netrc.netrc(str(path)).authenticators(host)
    except (OSError, netrc.NetrcParseError):
        return False
    return bool(found and found[2])


def _settings_path() -> Path:
    folder = os.environ.get("WANDB_CONFIG_DIR") or str(Path("~/.config/wandb").expanduser())
    return Path(folder) / "settings"


def _settings_have(path: Path) -> bool:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error, UnicodeDecodeError):
        return False
    return bool(parser.get("default", "api_key", fallback=""))
