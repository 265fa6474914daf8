"""Each agent's configuration file: where it is, what pointing it at the gateway changes,
where it points now, and writing it (or removing it) the way activation and restore need.

The file formats themselves are :mod:`.claude_config` and :mod:`.codex_config`; this module
picks the one for a client.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from ..._core.errors import GatewayError, InvalidOptionError
from ..health import gateway_root, loopback_port
from ..settings import atomic_write
from .agent_config import CLIENTS, ConfigEdit, ConfigRestore, KeyChange
from .claude_config import (
    claude_activate,
    claude_base_url,
    claude_deactivate,
    claude_settings_path,
)
from .codex_config import (
    PROVIDER_ID,
    codex_activate,
    codex_auth_mode,
    codex_config_path,
    codex_deactivate,
    codex_home,
    codex_provider,
)
from .journal import ActivationRecord

__all__ = [
    "ConfigWriter",
    "check_client",
    "check_codex_home",
    "client_config_path",
    "client_gateway_url",
    "config_edit",
    "default_writer",
    "encode_config",
    "gateway_keys",
    "missing_dirs",
    "pointed_url",
    "points_at_gateway",
    "remove_file",
    "undo_keys",
    "write_file",
]

#: Writes the agent's configuration file: ``(path, data, mode)``. Injectable so that tests
#: can make it fail (a crash between the backup and the write).
ConfigWriter = Callable[[Path, bytes, int], None]


def check_client(client: str) -> None:
    """Refuse a client TOMC cannot point at the gateway."""
    if client not in CLIENTS:
        raise InvalidOptionError(f"unknown client {client!r}; use one of {', '.join(CLIENTS)}")


def client_config_path(client: str, environ: Mapping[str, str]) -> Path:
    """The configuration file TOMC edits for ``client``."""
    check_client(client)
    if client == "claude":
        return claude_settings_path(environ)
    return codex_config_path(environ)


def client_gateway_url(client: str, port: int) -> str:
    """What the client's configuration holds when it points at the gateway."""
    return gateway_root(port) if client == "claude" else f"{gateway_root(port)}/v1"


def config_edit(
    client: str, text: str, port: int, environ: Mapping[str, str], where: str
) -> ConfigEdit:
    """What pointing ``client``'s configuration ``text`` at the gateway on ``port`` changes."""
    if client == "claude":
        return claude_activate(text, gateway_root(port), environ, where)
    return codex_activate(text, port, codex_auth_mode(environ), where)


def undo_keys(client: str, text: str, record: ActivationRecord, where: str) -> ConfigRestore:
    """``text`` with the keys TOMC set (``record``) back to what they held."""
    undo = claude_deactivate if client == "claude" else codex_deactivate
    return undo(text, record.changes, record.created, where)


def pointed_url(client: str, text: str | None, where: str = "") -> str | None:
    """Where the configuration sends the client's requests, when it says so explicitly."""
    where = where or ("settings.json" if client == "claude" else "config.toml")
    if client == "claude":
        return claude_base_url(text, where)
    provider = codex_provider(text, where)
    return provider.base_url


def points_at_gateway(client: str, text: str | None, port: int, where: str = "") -> bool:
    """Whether the configuration sends the client's requests to a gateway on ``port`` (Codex:
    or to its ``tomc`` provider on any local port)."""
    if loopback_port(pointed_url(client, text, where)) == port:
        return True
    return client == "codex" and codex_provider(text, where or "config.toml").is_gateway()


def gateway_keys(client: str, url: str | None) -> tuple[KeyChange, ...]:
    """The keys TOMC sets, as if it had set them with nothing there before."""
    if client == "claude":
        return (KeyChange(("env", "ANTHROPIC_BASE_URL"), False, None, url),)
    return (
        KeyChange(("model_provider",), False, None, PROVIDER_ID),
        KeyChange(("model_providers", PROVIDER_ID), False, None, None),
    )


def missing_dirs(path: Path) -> tuple[str, ...]:
    """The folders above ``path`` that do not exist yet, deepest first."""
    missing = []
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(str(parent))
        parent = parent.parent
    return tuple(missing)  # deepest first


def write_file(writer: ConfigWriter, path: Path, data: bytes, mode: int) -> None:
    """Write with ``writer``; a failure is a :class:`GatewayError` naming the file."""
    try:
        writer(path, data, mode)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if isinstance(exc, NotADirectoryError | FileExistsError):
            reason = "a part of that path is a file"
        raise GatewayError(f"cannot write {path}: {reason}") from None


def default_writer(path: Path, data: bytes, mode: int) -> None:
    """Write atomically (a temporary file, then a rename)."""
    atomic_write(path, data, mode)


def encode_config(text: str, like: bytes | None) -> bytes:
    """``text`` as UTF-8, with a byte order mark when the file ``like`` had one."""
    bom = b"\xef\xbb\xbf" if like is not None and like.startswith(b"\xef\xbb\xbf") else b""
    return bom + text.encode("utf-8")


def check_codex_home(client: str, environ: Mapping[str, str]) -> None:
    """Refuse a ``CODEX_HOME`` that is not a folder (Codex needs one)."""
    if client == "codex" and environ.get("CODEX_HOME", "").strip():
        home = codex_home(environ)
        if not home.is_dir():
            raise GatewayError(f"CODEX_HOME is {home}, which is not a folder (Codex needs one)")


def remove_file(target: Path, created_dirs: tuple[str, ...]) -> None:
    """Remove ``target`` and the folders TOMC created for it, while they are empty."""
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    for folder in created_dirs:  # deepest first; a folder the user filled since stays
        try:
            os.rmdir(folder)
        except OSError:
            break
