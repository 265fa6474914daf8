"""What the Claude Code and Codex configuration editors share: the result of an edit, where
a user's home is, and how a configuration file is read.

An edit is pure (text in, text out); :class:`ConfigEdit` also says which keys TOMC set, what
they held before and which containers it created, so the edit can be taken back key by key
when the user changed the file afterwards.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..._core.errors import GatewayError

__all__ = ["CLIENTS", "ConfigEdit", "KeyChange", "read_config", "user_home"]

#: The agents TOMC can point at the gateway, by the name their command has.
CLIENTS = ("claude", "codex")


@dataclass(frozen=True)
class KeyChange:
    """One key TOMC set: its path in the document, what it held before (``existed`` False:
    it was not there) and what TOMC wrote (JSON values; TOML tables as dicts)."""

    path: tuple[str, ...]
    existed: bool
    previous: Any
    written: Any

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"path": list(self.path), "written": self.written}
        if self.existed:
            data["previous"] = self.previous
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> KeyChange:
        return cls(
            tuple(str(part) for part in data["path"]),
            "previous" in data,
            data.get("previous"),
            data.get("written"),
        )


@dataclass(frozen=True)
class ConfigEdit:
    """An agent configuration pointed at the gateway.

    ``text`` is the new file (the input itself when nothing had to change); ``upstreams``
    maps an upstream kind (see :data:`tomc._gateway.settings.DEFAULT_UPSTREAMS`) to the URL
    the agent used before, when it was not the provider's default; ``notes`` are things the
    user should know (a profile that overrides the setting, ...).
    """

    text: str
    changed: bool
    changes: tuple[KeyChange, ...]
    created: tuple[tuple[str, ...], ...] = ()
    upstreams: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfigRestore:
    """The result of taking TOMC's keys out of a file the user changed after activation."""

    text: str
    empty: bool
    kept: tuple[str, ...] = ()  # keys left alone because the user changed them


def user_home(environ: Mapping[str, str]) -> Path:
    """The home folder as the agents see it: ``HOME`` (``USERPROFILE`` on Windows)."""
    name = "USERPROFILE" if os.name == "nt" else "HOME"
    value = environ.get(name, "").strip()
    return Path(value).expanduser() if value else Path.home()


def read_config(path: Path) -> bytes | None:
    """The file's bytes, ``None`` when it does not exist; anything else is a
    :class:`GatewayError` naming the file."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except IsADirectoryError:
        raise GatewayError(f"{path} is a folder, not a configuration file") from None
    except NotADirectoryError:
        raise GatewayError(f"cannot read {path}: a part of that path is a file") from None
    except OSError as exc:
        raise GatewayError(f"cannot read {path}: {exc.strerror or exc}") from None


def decode_config(path: Path, data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise GatewayError(f"{path} is not UTF-8 text (byte {exc.start})") from None
    return text[1:] if text.startswith("\ufeff") else text
