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

import os
import stat
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from ..._core.errors import GatewayError, InvalidOptionError
from ..._home import default_home
from ..agents.agent_config import CLIENTS, ConfigEdit, decode_config, read_config
from ..agents.claude_config import claude_deactivate
from ..agents.codex_config import codex_deactivate
from ..agents.config_files import (
    ConfigWriter,
    check_client,
    check_codex_home,
    client_config_path,
    client_gateway_url,
    config_edit,
    default_writer,
    encode_config,
    gateway_keys,
    missing_dirs,
    pointed_url,
    points_at_gateway,
    remove_file,
    undo_keys,
    write_file,
)
from ..agents.journal import (
    ActivationRecord,
    activated_clients,
    backup_path,
    drop_record,
    load_record,
    save_record,
    sha256,
)
from ..agents.leftovers import leftover_places, remove_leftovers
from ..health import gateway_root, probe, wait_until_answering
from ..settings import atomic_write, gateway_dir, load_settings, record_upstream, save_settings
from .leases import RUN_GATEWAY_FILE, live_leases, read_run_gateway, run_lock, stop_gateway
from .login import CommandRunner, install_login_entry, login_entry, remove_login_entry

__all__ = ["ConfigWriter", "activate", "restore_direct"]

START_TIMEOUT_S = 30.0

# ---- activate -----------------------------------------------------------------------------


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


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
    write_config: ConfigWriter = default_writer,
    start_timeout_s: float = START_TIMEOUT_S,
) -> list[str]:
    """Point ``client``'s own configuration at the gateway on ``port`` (default: the saved
    port); return what was done, in words. Refuses while no gateway answers there (with
    ``login``, installs the login entry first and waits for it to answer)."""
    check_client(client)
    environ = os.environ if environ is None else environ
    home_path = Path(home).expanduser() if home is not None else default_home()
    folder = gateway_dir(home_path)
    settings = load_settings(home_path)
    port = settings.port if port is None else port
    check_codex_home(client, environ)
    path = client_config_path(client, environ)
    target = Path(os.path.realpath(path))

    record = load_record(folder, client)
    if record is not None and Path(record.target) != target:
        raise GatewayError(
            f"{client} is activated for {record.config}, not {path}; run "
            f"`tomc restore-direct --client {client}` first"
        )
    data = read_config(target)
    text = decode_config(path, data) if data is not None else ""
    edit = config_edit(client, text, port, environ, str(path))
    new_bytes = encode_config(edit.text, data) if edit.changed else data or b""

    # Everything above only read; from here on things change.
    if login and runner is None:
        from .login import run_command

        runner = run_command
    start = _LoginStart(runner, platform, environ, start_timeout_s) if login else None
    done = _ensure_gateway(port, home_path, folder, client, path, start)
    recovering = record is None or record.state == "pending"
    before = record  # the journal as it was, to go back to if the write is refused
    done += remove_leftovers(folder, client, path, target)
    written = sha256(new_bytes) or ""
    record = _journal(folder, record, client, path, target, data, text, port, edit, written)
    if recovering:
        done += _record_upstreams(record, home_path)

    if edit.changed:
        mode = stat.S_IMODE(target.stat().st_mode) if data is not None else 0o600
        try:
            write_file(write_config, target, new_bytes, mode)
        except GatewayError:
            # Refused (not a crash): the agent's file is as it was, so is the journal.
            if before is None:
                drop_record(folder, client)
                if not record.existed:
                    remove_file(target, record.created_dirs)
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


@dataclass(frozen=True)
class _LoginStart:
    """How ``activate --login`` installs the login entry and waits for it to answer."""

    runner: CommandRunner
    platform: str
    environ: Mapping[str, str]
    timeout_s: float


def _ensure_gateway(
    port: int, home: Path, folder: Path, client: str, path: Path, login: _LoginStart | None
) -> list[str]:
    """Refuse unless a TOMC gateway answers on ``port``; with ``login``, install the login
    entry first (starting the gateway if none answers) and wait for it."""
    found = probe(port)
    if found.other:
        raise _not_answering(port, other=True)
    if login is None:
        if not found.answering:
            raise _not_answering(port, found.other)
        return []
    entry = login_entry(port, home, folder, platform=login.platform, environ=login.environ)
    done = install_login_entry(entry, folder, client, login.runner, start_now=not found.answering)
    if not found.answering:
        try:
            wait_until_answering(port, login.timeout_s)
        except GatewayError as exc:
            raise GatewayError(
                f"{exc}, so {path} was not changed; the login entry is installed "
                "(`tomc restore-direct` removes it)"
            ) from None
    return done


def _journal(
    folder: Path,
    record: ActivationRecord | None,
    client: str,
    path: Path,
    target: Path,
    data: bytes | None,
    text: str,
    port: int,
    edit: ConfigEdit,
    written: str,
) -> ActivationRecord:
    """The journal for this activation, saved before the agent's file is touched: a new
    ``pending`` record (after the backup), or ``record`` brought up to date."""
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
            created_dirs=missing_dirs(target),
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
        save_record(folder, record)
        return record
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
        save_record(folder, updated)
    return updated


def _record_upstreams(record: ActivationRecord, home: Path) -> list[str]:
    """The upstreams the agent's file named, into the gateway settings."""
    done = []
    for kind, url in sorted(record.upstreams.items()):
        try:
            replaced = record_upstream(kind, url, home)
        except InvalidOptionError as exc:
            done.append(f"note: upstream not recorded: {exc}")
            continue
        if replaced is not None:
            done.append(
                f"gateway settings: {kind} upstream {url} (was {replaced}); restart the "
                "gateway to use it"
            )
    return done


# ---- restore ------------------------------------------------------------------------------


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
            remove_file(target, record.created_dirs)
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
            write_file(default_writer, target, original, mode)
            message = f"{client}: {where} restored byte for byte"
        else:
            remove_file(target, record.created_dirs)
            message = f"{client}: removed {where} (it did not exist before activation)"
    elif data is None:
        message = f"{client}: {where} was deleted after activation; nothing to put back"
    else:
        text = decode_config(Path(where), data)
        restored = undo_keys(client, text, record, where)
        if restored.empty and not record.existed:
            remove_file(target, record.created_dirs)
            message = f"{client}: removed {where} (it did not exist before activation)"
        else:
            write_file(
                default_writer,
                target,
                encode_config(restored.text, data),
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
    changes = gateway_keys(client, pointed_url(client, text, str(path)))
    restored = undo(text, changes, (), str(path))
    mode = stat.S_IMODE(target.stat().st_mode)
    write_file(default_writer, target, encode_config(restored.text, data), mode)
    return [
        f"{client}: {path} pointed at the gateway without an activation record; removed "
        "TOMC's keys (what they held before is unknown)"
    ]


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
        check_client(name)
    home_path = Path(home).expanduser() if home is not None else default_home()
    folder = gateway_dir(home_path)
    port = load_settings(home_path).port
    done: list[str] = []
    for name in clients:
        places = leftover_places(folder, name, environ)
        done += _restore_one(folder, name, environ, port)
        done += remove_leftovers(folder, name, *places)
    if runner is None:
        from .login import run_command

        runner = run_command
    done += remove_login_entry(
        folder, runner, client=client, still_needed_by=activated_clients(folder)
    )
    done += _stop_unused_run_gateway(folder)
    if not done:
        names = client or "claude or codex"
        done.append(f"nothing to restore: {names} is not activated")
    return done
