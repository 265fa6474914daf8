"""Persistent mode: point an agent's own configuration at the gateway, and put it back.

``activate`` backs up the agent's configuration file into the gateway folder, then edits it
(:mod:`.claude_config`, :mod:`.codex_config`); ``restore_direct`` puts back exactly what was
there. Every step is atomic (temporary file, then rename) and the journal is written before
the agent's file is touched, so a crash at any point leaves a state both commands finish
correctly.

The backup and the journal (:mod:`.journal`) record, per client: the state (``pending``
until the agent's file is written, then ``active``), the file's path, whether it existed, its
SHA-256 and mode, the folders TOMC created for it, the SHA-256 of what TOMC wrote, the keys
TOMC set with their previous values, and the upstreams recorded.

Order of an activation: backup, journal (``pending``), upstreams into the gateway settings,
the agent's file, journal (``active``). Restoring: byte-identical from the backup when the file
is still exactly what TOMC wrote; key by key (only TOMC's keys, previous values put back) when
the user changed it since; then the journal and the backup are deleted.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from ..._core.errors import GatewayError, InvalidOptionError
from ..._notebooks import default_home
from ..local.health import gateway_root, loopback_port, probe, wait_until_answering
from ..local.leases import RUN_GATEWAY_FILE, live_leases, read_run_gateway, run_lock, stop_gateway
from ..local.login import CommandRunner, install_login_entry, login_entry, remove_login_entry
from ..settings import (
    atomic_write,
    gateway_dir,
    load_settings,
    record_upstream,
    remove_leftover_temps,
    save_settings,
)
from .agent_config import (
    CLIENTS,
    ConfigEdit,
    ConfigRestore,
    KeyChange,
    decode_config,
    read_config,
)
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
from .journal import (
    ActivationRecord,
    activated_clients,
    backup_path,
    drop_record,
    load_record,
    record_path,
    save_record,
    sha256,
)

__all__ = [
    "ConfigWriter",
    "activate",
    "client_config_path",
    "client_gateway_url",
    "pointed_url",
    "points_at_gateway",
    "restore_direct",
]

START_TIMEOUT_S = 30.0

#: Writes the agent's configuration file: ``(path, data, mode)``. Injectable so that tests
#: can make it fail (a crash between the backup and the write).
ConfigWriter = Callable[[Path, bytes, int], None]


# ---- per-client adapters ------------------------------------------------------------------


def _check_client(client: str) -> None:
    if client not in CLIENTS:
        raise InvalidOptionError(f"unknown client {client!r}; use one of {', '.join(CLIENTS)}")


def client_config_path(client: str, environ: Mapping[str, str]) -> Path:
    """The configuration file TOMC edits for ``client``."""
    _check_client(client)
    if client == "claude":
        return claude_settings_path(environ)
    return codex_config_path(environ)


def client_gateway_url(client: str, port: int) -> str:
    """What the client's configuration holds when it points at the gateway."""
    return gateway_root(port) if client == "claude" else f"{gateway_root(port)}/v1"


def _edit(client: str, text: str, port: int, environ: Mapping[str, str], where: str) -> ConfigEdit:
    if client == "claude":
        return claude_activate(text, gateway_root(port), environ, where)
    return codex_activate(text, port, codex_auth_mode(environ), where)


def _undo_keys(client: str, text: str, record: ActivationRecord, where: str) -> ConfigRestore:
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


def _gateway_keys(client: str, url: str | None) -> tuple[KeyChange, ...]:
    """The keys TOMC sets, as if it had set them with nothing there before."""
    if client == "claude":
        return (KeyChange(("env", "ANTHROPIC_BASE_URL"), False, None, url),)
    return (
        KeyChange(("model_provider",), False, None, PROVIDER_ID),
        KeyChange(("model_providers", PROVIDER_ID), False, None, None),
    )


def _remove_leftovers(folder: Path, client: str, *paths: Path) -> list[str]:
    """Remove what an interrupted atomic write left beside ``paths`` (the agent's file) and
    beside ``client``'s backup and journal; say what went."""
    managed = (*paths, backup_path(folder, client), record_path(folder, client))
    removed = [temp for path in dict.fromkeys(managed) for temp in remove_leftover_temps(path)]
    return [
        f"{client}: removed {temp}, a temporary file left by an interrupted write"
        for temp in removed
    ]


# ---- activate -----------------------------------------------------------------------------


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _missing_dirs(path: Path) -> tuple[str, ...]:
    missing = []
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(str(parent))
        parent = parent.parent
    return tuple(missing)  # deepest first


def _write(writer: ConfigWriter, path: Path, data: bytes, mode: int) -> None:
    try:
        writer(path, data, mode)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if isinstance(exc, NotADirectoryError | FileExistsError):
            reason = "a part of that path is a file"
        raise GatewayError(f"cannot write {path}: {reason}") from None


def _default_writer(path: Path, data: bytes, mode: int) -> None:
    atomic_write(path, data, mode)


def _encode(text: str, like: bytes | None) -> bytes:
    bom = b"\xef\xbb\xbf" if like is not None and like.startswith(b"\xef\xbb\xbf") else b""
    return bom + text.encode("utf-8")


def _check_codex_home(client: str, environ: Mapping[str, str]) -> None:
    if client == "codex" and environ.get("CODEX_HOME", "").strip():
        home = codex_home(environ)
        if not home.is_dir():
            raise GatewayError(f"CODEX_HOME is {home}, which is not a folder (Codex needs one)")


def _not_answering(port: int, other: bool) -> GatewayError:
    if other:
        return GatewayError(
            f"port {port} is used by another program, not a TOMC gateway; pick another "
            "port with --port"
        )
    return GatewayError(
        f"no TOMC gateway answers on {gateway_root(port)}, so nothing was changed; start it "
        f"with `tomc gateway serve --port {port}` (keep it running), or add --login to start "
        "it now and at every login"
    )


def activate(
    client: str,
    *,
    port: int | None = None,
    home: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    login: bool = False,
    runner: CommandRunner | None = None,
    platform: str = sys.platform,
    write_config: ConfigWriter = _default_writer,
    start_timeout_s: float = START_TIMEOUT_S,
) -> list[str]:
    """Point ``client``'s own configuration at the gateway on ``port`` (default: the saved
    port); return what was done, in words. Refuses while no gateway answers there (with
    ``login``, installs the login entry first and waits for it to answer)."""
    _check_client(client)
    environ = os.environ if environ is None else environ
    home_path = Path(home).expanduser() if home is not None else default_home()
    folder = gateway_dir(home_path)
    settings = load_settings(home_path)
    port = settings.port if port is None else port
    _check_codex_home(client, environ)
    path = client_config_path(client, environ)
    target = Path(os.path.realpath(path))
    done: list[str] = []

    record = load_record(folder, client)
    if record is not None and Path(record.target) != target:
        raise GatewayError(
            f"{client} is activated for {record.config}, not {path}; run "
            f"`tomc restore-direct --client {client}` first"
        )
    data = read_config(target)
    text = decode_config(path, data) if data is not None else ""
    edit = _edit(client, text, port, environ, str(path))
    new_bytes = _encode(edit.text, data) if edit.changed else data or b""
    written = sha256(new_bytes) or ""

    # Everything above only read; from here on things change.
    found = probe(port)
    if found.other:
        raise _not_answering(port, other=True)
    if login:
        if runner is None:
            from ..local.login import run_command

            runner = run_command
        entry = login_entry(port, home_path, folder, platform=platform, environ=environ)
        done += install_login_entry(entry, folder, client, runner, start_now=not found.answering)
        if not found.answering:
            try:
                wait_until_answering(port, start_timeout_s)
            except GatewayError as exc:
                raise GatewayError(
                    f"{exc}, so {path} was not changed; the login entry is installed "
                    "(`tomc restore-direct` removes it)"
                ) from None
    elif not found.answering:
        raise _not_answering(port, found.other)
    recovering = record is None or record.state == "pending"
    before = record  # the journal as it was, to go back to if the write is refused
    done += _remove_leftovers(folder, client, path, target)

    if record is None:
        if data is not None:
            atomic_write(backup_path(folder, client), data)
        record = ActivationRecord(
            client=client,
            state="pending",
            config=str(path),
            target=str(target),
            existed=data is not None,
            original_sha256=sha256(data),
            original_mode=stat.S_IMODE(target.stat().st_mode) if data is not None else None,
            created_dirs=_missing_dirs(target),
            # A file that already pointed at the gateway is no state to go back to.
            byte_restore=not points_at_gateway(client, text, port, str(path)),
            written_sha256=written,
            port=port,
            gateway_url=client_gateway_url(client, port),
            changes=edit.changes,
            created=edit.created,
            upstreams=dict(edit.upstreams),
            activated_at=_now(),
        )
        save_record(folder, record)  # the journal, before the agent's file is touched
    else:
        current = sha256(data)
        foreign = current not in (record.written_sha256, record.original_sha256) or (
            data is None and record.existed
        )
        updated = replace(
            record,
            state="pending" if edit.changed else record.state,
            port=port,
            gateway_url=client_gateway_url(client, port),
            byte_restore=record.byte_restore and not foreign,
            written_sha256=written if edit.changed or not foreign else record.written_sha256,
        )
        if updated != record:
            save_record(folder, updated)  # again before the agent's file is touched
        record = updated

    if recovering:
        for kind, url in sorted(record.upstreams.items()):
            try:
                replaced = record_upstream(kind, url, home_path)
            except InvalidOptionError as exc:
                done.append(f"note: upstream not recorded: {exc}")
                continue
            if replaced is not None:
                done.append(
                    f"gateway settings: {kind} upstream {url} (was {replaced}); restart the "
                    "gateway to use it"
                )

    if edit.changed:
        mode = stat.S_IMODE(target.stat().st_mode) if data is not None else 0o600
        try:
            _write(write_config, target, new_bytes, mode)
        except GatewayError:
            # Refused (not a crash): the agent's file is as it was, so is the journal.
            if before is None:
                drop_record(folder, client)
                if not record.existed:
                    _remove_file(target, record.created_dirs)
            else:
                save_record(folder, before)
            raise
        done.append(f"{client}: {path} now points at {record.gateway_url}")
    else:
        done.append(f"{client}: {path} already points at {record.gateway_url}; nothing changed")
    if record.state != "active":
        save_record(folder, replace(record, state="active"))
    if port != settings.port:  # `tomc run` and the status use the port it is activated on
        save_settings(replace(load_settings(home_path), port=port), home_path)
        done.append(f"gateway settings: port {port}")
    done.extend(f"note: {note}" for note in edit.notes)
    return done


# ---- restore ------------------------------------------------------------------------------


def _remove_file(target: Path, created_dirs: tuple[str, ...]) -> None:
    with contextlib.suppress(FileNotFoundError):
        target.unlink()
    for folder in created_dirs:  # deepest first; a folder the user filled since stays
        try:
            os.rmdir(folder)
        except OSError:
            break


def _restore_one(
    folder: Path, client: str, environ: Mapping[str, str], settings_port: int
) -> list[str]:
    record = load_record(folder, client)
    if record is None:
        return _restore_unrecorded(client, environ, settings_port)
    target = Path(record.target)
    data = read_config(target)
    current = sha256(data)
    where = record.config
    if (data is None and not record.existed) or (
        record.existed and current == record.original_sha256
    ):
        if data is None:
            _remove_file(target, record.created_dirs)
        message = f"{client}: {where} is as it was before activation"
    elif record.byte_restore and current == record.written_sha256:
        if record.existed:
            backup = backup_path(folder, client)
            original = read_config(backup)
            if original is None or sha256(original) != record.original_sha256:
                raise GatewayError(
                    f"the backup {backup} is missing or damaged; {where} was left as it is"
                )
            mode = record.original_mode if record.original_mode is not None else 0o600
            _write(_default_writer, target, original, mode)
            message = f"{client}: {where} restored byte for byte"
        else:
            _remove_file(target, record.created_dirs)
            message = f"{client}: removed {where} (it did not exist before activation)"
    elif data is None:
        message = f"{client}: {where} was deleted after activation; nothing to put back"
    else:
        text = decode_config(Path(where), data)
        restored = _undo_keys(client, text, record, where)
        if restored.empty and not record.existed:
            _remove_file(target, record.created_dirs)
            message = f"{client}: removed {where} (it did not exist before activation)"
        else:
            _write(
                _default_writer,
                target,
                _encode(restored.text, data),
                stat.S_IMODE(target.stat().st_mode),
            )
            message = (
                f"{client}: {where} changed since activation, so only the keys TOMC set were "
                "put back (your other edits are kept)"
            )
        if restored.kept:
            message += (
                f"; left {', '.join(restored.kept)} alone: it no longer points at the gateway"
            )
    drop_record(folder, client)
    return [message]


def _restore_unrecorded(client: str, environ: Mapping[str, str], port: int) -> list[str]:
    """No journal: take TOMC's keys out only when the file still points at the gateway."""
    path = client_config_path(client, environ)
    target = Path(os.path.realpath(path))
    try:
        data = read_config(target)
        text = decode_config(path, data) if data is not None else None
        if text is None or not points_at_gateway(client, text, port, str(path)):
            return []
    except GatewayError:  # unreadable, and TOMC never wrote it: not TOMC's to repair
        return []
    undo = claude_deactivate if client == "claude" else codex_deactivate
    changes = _gateway_keys(client, pointed_url(client, text, str(path)))
    restored = undo(text, changes, (), str(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    _write(_default_writer, target, _encode(restored.text, data), mode)
    return [
        f"{client}: {path} pointed at the gateway without an activation record; removed "
        "TOMC's keys (what they held before is unknown)"
    ]


def _leftover_places(folder: Path, client: str, environ: Mapping[str, str]) -> list[Path]:
    """The agent's configuration file, as configured now and as recorded at activation."""
    path = client_config_path(client, environ)
    places = [path, Path(os.path.realpath(path))]
    record = load_record(folder, client)
    if record is not None:
        places += [Path(record.config), Path(record.target)]
    return places


def _stop_unused_run_gateway(folder: Path) -> list[str]:
    """A gateway ``tomc run`` started stays up while an agent is activated to use it; once
    none is and no ``tomc run`` is left, it is stopped as ``tomc run`` would have."""
    if not (folder / RUN_GATEWAY_FILE).exists():
        return []
    with run_lock(folder):
        started = read_run_gateway(folder)
        if started is None or activated_clients(folder) or live_leases(folder, prune=True):
            return []
        stop_gateway(folder)
    return [f"stopped the gateway `tomc run` had started on {gateway_root(started.port)}"]


def restore_direct(
    client: str | None = None,
    *,
    home: str | os.PathLike[str] | None = None,
    environ: Mapping[str, str] | None = None,
    runner: CommandRunner | None = None,
) -> list[str]:
    """Put ``client``'s configuration (default: every client) back as it was before
    activation, and remove the login entry once no activated client needs it. Safe to run
    again, after a crash and after several activations; returns what was done, in words."""
    environ = os.environ if environ is None else environ
    clients = CLIENTS if client is None else (client,)
    for name in clients:
        _check_client(name)
    home_path = Path(home).expanduser() if home is not None else default_home()
    folder = gateway_dir(home_path)
    port = load_settings(home_path).port
    done: list[str] = []
    for name in clients:
        paths = _leftover_places(folder, name, environ)
        done += _restore_one(folder, name, environ, port)
        done += _remove_leftovers(folder, name, *paths)
    if runner is None:
        from ..local.login import run_command

        runner = run_command
    done += remove_login_entry(
        folder, runner, client=client, still_needed_by=activated_clients(folder)
    )
    done += _stop_unused_run_gateway(folder)
    if not done:
        names = client or "claude or codex"
        done.append(f"nothing to restore: {names} is not activated")
    return done
