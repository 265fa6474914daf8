"""The activation journal: one record and one backup per client, in
``<TOMC home>/gateway/activations/``.

- ``<client>.original``: a byte-identical copy of the agent's configuration file as it was
  before the first activation (absent when there was no file).
- ``<client>.json``: the journal (:class:`ActivationRecord`, ``format`` 1), written atomically
  before the agent's file is touched and again once it is written.

A backup without a journal is ignored (an activation that crashed before writing its journal
changed nothing) and overwritten by the next activation.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..._core.errors import GatewayError
from ..settings import atomic_write
from .agent_config import CLIENTS, KeyChange

__all__ = [
    "ActivationRecord",
    "activated_clients",
    "backup_path",
    "drop_record",
    "load_record",
    "record_path",
    "save_record",
    "sha256",
]


def sha256(data: bytes | None) -> str | None:
    """The SHA-256 of a file's bytes (``None`` for no file)."""
    return None if data is None else hashlib.sha256(data).hexdigest()


FORMAT = 1
ACTIVATIONS_DIR = "activations"


@dataclass(frozen=True)
class ActivationRecord:
    """The journal of one client's activation (``<client>.json``)."""

    client: str
    state: str  # "pending" until the agent's file is written, then "active"
    config: str  # the configuration file's path (as the agent names it)
    target: str  # the file actually written (the same unless ``config`` is a symlink)
    existed: bool
    original_sha256: str | None
    original_mode: int | None
    created_dirs: tuple[str, ...]  # folders TOMC created for a file that did not exist
    #: False once restoring the backup byte for byte would lose something: the file was
    #: changed after activation, or already pointed at the gateway before it.
    byte_restore: bool
    written_sha256: str
    port: int
    gateway_url: str
    changes: tuple[KeyChange, ...]
    created: tuple[tuple[str, ...], ...]
    upstreams: Mapping[str, str] = field(default_factory=dict)
    activated_at: str = ""
    format: int = FORMAT

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["changes"] = [change.to_dict() for change in self.changes]
        data["created"] = [list(path) for path in self.created]
        data["created_dirs"] = list(self.created_dirs)
        data["upstreams"] = dict(self.upstreams)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ActivationRecord:
        if data.get("format") != FORMAT:
            raise ValueError(f"unknown format {data.get('format')!r}")
        return cls(
            client=str(data["client"]),
            state=str(data["state"]),
            config=str(data["config"]),
            target=str(data["target"]),
            existed=bool(data["existed"]),
            original_sha256=data.get("original_sha256"),
            original_mode=data.get("original_mode"),
            created_dirs=tuple(str(p) for p in data.get("created_dirs", ())),
            byte_restore=bool(data["byte_restore"]),
            written_sha256=str(data["written_sha256"]),
            port=int(data["port"]),
            gateway_url=str(data["gateway_url"]),
            changes=tuple(KeyChange.from_dict(c) for c in data["changes"]),
            created=tuple(tuple(str(p) for p in path) for path in data.get("created", ())),
            upstreams={str(k): str(v) for k, v in data.get("upstreams", {}).items()},
            activated_at=str(data.get("activated_at", "")),
        )


def folder_of(gateway_folder: Path) -> Path:
    """Where the journals and backups live."""
    return gateway_folder / ACTIVATIONS_DIR


def record_path(gateway_folder: Path, client: str) -> Path:
    return folder_of(gateway_folder) / f"{client}.json"


def backup_path(gateway_folder: Path, client: str) -> Path:
    return folder_of(gateway_folder) / f"{client}.original"


def load_record(gateway_folder: Path, client: str) -> ActivationRecord | None:
    """The client's activation journal, ``None`` when it is not activated."""
    path = record_path(gateway_folder, client)
    try:
        raw = path.read_text("utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise GatewayError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return ActivationRecord.from_dict(json.loads(raw))
    except (ValueError, KeyError, TypeError) as exc:
        raise GatewayError(
            f"the activation record {path} is damaged ({exc}); the original file, if there "
            f"was one, is {backup_path(gateway_folder, client)}"
        ) from None


def save_record(gateway_folder: Path, record: ActivationRecord) -> None:
    data = json.dumps(record.to_dict(), indent=2, sort_keys=True) + "\n"
    atomic_write(record_path(gateway_folder, record.client), data.encode("utf-8"))


def drop_record(gateway_folder: Path, client: str) -> None:
    # The journal goes first: a backup without a journal is ignored and overwritten later.
    for path in (record_path(gateway_folder, client), backup_path(gateway_folder, client)):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def activated_clients(gateway_folder: Path) -> list[str]:
    """Clients with an activation journal (pending or active)."""
    return [c for c in CLIENTS if record_path(gateway_folder, c).exists()]
