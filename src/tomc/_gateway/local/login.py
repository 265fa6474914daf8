"""Keep the gateway running at login: a systemd user unit (Linux), a LaunchAgent (macOS) or a
Task Scheduler task (Windows), each running ``tomc gateway serve``.

The files are made by pure functions (:func:`systemd_unit`, :func:`launchd_plist`,
:func:`task_xml`, :func:`login_entry`), so they can be checked on any system; the service
manager is driven only through a :data:`CommandRunner` that callers inject. What was installed
is recorded in ``<gateway folder>/login.json`` with the clients that asked for it, so
``tomc restore-direct`` removes the entry once no activated client needs it.
"""

from __future__ import annotations

import contextlib
import json
import os
import plistlib
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from ..._core.errors import GatewayError
from ..agents.agent_config import user_home
from ..settings import atomic_write

__all__ = [
    "CommandRunner",
    "LoginEntry",
    "install_login_entry",
    "launchd_plist",
    "login_entry",
    "read_login_record",
    "remove_login_entry",
    "run_command",
    "serve_argv",
    "systemd_unit",
    "task_xml",
]

UNIT_NAME = "tomc-gateway.service"
LAUNCHD_LABEL = "dev.tomc.gateway"
TASK_NAME = "TOMC gateway"
LOGIN_FILE = "login.json"
#: Where the gateway folder keeps an entry no platform folder holds (the Task Scheduler's XML).
LOGIN_DIR = "login"
DESCRIPTION = "TOMC gateway: the local request gateway for Claude Code and Codex"

#: Runs one command of the service manager: argv in, (exit code, output) out.
CommandRunner = Callable[[Sequence[str]], tuple[int, str]]


def run_command(argv: Sequence[str]) -> tuple[int, str]:
    """The real runner: the command's exit code and its output (stdout and stderr)."""
    try:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        return 127, f"{argv[0]} not found"
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return done.returncode, (done.stdout + done.stderr).strip()


def serve_argv(port: int, home: Path, python: str | None = None) -> list[str]:
    """The command every login entry runs."""
    return [
        python or sys.executable,
        "-m",
        "tomc",
        "gateway",
        "serve",
        "--port",
        str(port),
        "--home",
        str(home),
    ]


def _systemd_quote(arg: str) -> str:
    # systemd splits ExecStart on blanks, honours C-style escapes inside double quotes, and
    # expands % specifiers everywhere.
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'


def systemd_unit(argv: Sequence[str]) -> str:
    """A systemd user unit that starts the gateway at login and restarts it if it fails."""
    return (
        "[Unit]\n"
        f"Description={DESCRIPTION}\n"
        "\n"
        "[Service]\n"
        f"ExecStart={' '.join(_systemd_quote(arg) for arg in argv)}\n"
        "Restart=on-failure\n"
        "RestartSec=5\n"
        "\n"
        "[Install]\n"
        "WantedBy=default.target\n"
    )


def launchd_plist(argv: Sequence[str], log_path: Path) -> bytes:
    """A LaunchAgent that starts the gateway at login and again if it exits with an error."""
    return plistlib.dumps(
        {
            "Label": LAUNCHD_LABEL,
            "ProgramArguments": list(argv),
            "RunAtLoad": True,
            "KeepAlive": {"SuccessfulExit": False},
            "ThrottleInterval": 30,
            "ProcessType": "Background",
            "StandardOutPath": str(log_path),
            "StandardErrorPath": str(log_path),
        },
        sort_keys=True,
    )


def task_xml(argv: Sequence[str], user: str) -> str:
    """A Task Scheduler task (for ``schtasks /Create /XML``) that starts the gateway when
    ``user`` logs on, without elevation and without a time limit."""
    command = subprocess.list2cmdline([argv[0]])
    arguments = subprocess.list2cmdline(list(argv[1:]))
    return (
        '<?xml version="1.0" encoding="UTF-16"?>\n'
        '<Task version="1.2" xmlns="http://schemas.microsoft.com/windows/2004/02/mit/task">\n'
        f"  <RegistrationInfo><Description>{escape(DESCRIPTION)}</Description>"
        "</RegistrationInfo>\n"
        "  <Triggers>\n"
        f"    <LogonTrigger><Enabled>true</Enabled><UserId>{escape(user)}</UserId>"
        "</LogonTrigger>\n"
        "  </Triggers>\n"
        "  <Principals>\n"
        '    <Principal id="Author">\n'
        f"      <UserId>{escape(user)}</UserId>\n"
        "      <LogonType>InteractiveToken</LogonType>\n"
        "      <RunLevel>LeastPrivilege</RunLevel>\n"
        "    </Principal>\n"
        "  </Principals>\n"
        "  <Settings>\n"
        "    <MultipleInstancesPolicy>IgnoreNew</MultipleInstancesPolicy>\n"
        "    <DisallowStartIfOnBatteries>false</DisallowStartIfOnBatteries>\n"
        "    <StopIfGoingOnBatteries>false</StopIfGoingOnBatteries>\n"
        "    <ExecutionTimeLimit>PT0S</ExecutionTimeLimit>\n"
        "    <RestartOnFailure><Interval>PT1M</Interval><Count>3</Count></RestartOnFailure>\n"
        "  </Settings>\n"
        '  <Actions Context="Author">\n'
        f"    <Exec><Command>{escape(command)}</Command>"
        f"<Arguments>{escape(arguments)}</Arguments></Exec>\n"
        "  </Actions>\n"
        "</Task>\n"
    )


@dataclass(frozen=True)
class LoginEntry:
    """One platform's login entry: the file and the commands that install, start and remove
    it (``start`` runs only when no gateway answers yet, so it cannot fight a running one)."""

    kind: str  # "systemd", "launchd" or "schtasks"
    path: Path
    content: bytes
    install: tuple[tuple[str, ...], ...]
    start: tuple[tuple[str, ...], ...]
    remove: tuple[tuple[str, ...], ...]

    @property
    def name(self) -> str:
        return {"systemd": UNIT_NAME, "launchd": LAUNCHD_LABEL}.get(self.kind, TASK_NAME)


def _windows_user(environ: Mapping[str, str]) -> str:
    user = environ.get("USERNAME", "").strip() or "%USERNAME%"
    domain = environ.get("USERDOMAIN", "").strip()
    return f"{domain}\\{user}" if domain else user


def login_entry(
    port: int,
    home: Path,
    gateway_folder: Path,
    *,
    platform: str = sys.platform,
    environ: Mapping[str, str] = os.environ,
    python: str | None = None,
    uid: int | None = None,
) -> LoginEntry:
    """The login entry for this platform (``linux``, ``darwin``, ``win32``)."""
    argv = serve_argv(port, home, python)
    if platform.startswith("linux"):
        config = environ.get("XDG_CONFIG_HOME", "").strip()
        base = Path(config) if config else user_home(environ) / ".config"
        systemctl = ("systemctl", "--user")
        return LoginEntry(
            "systemd",
            base / "systemd" / "user" / UNIT_NAME,
            systemd_unit(argv).encode("utf-8"),
            install=((*systemctl, "daemon-reload"), (*systemctl, "enable", UNIT_NAME)),
            start=((*systemctl, "start", UNIT_NAME),),
            remove=((*systemctl, "disable", "--now", UNIT_NAME), (*systemctl, "daemon-reload")),
        )
    if platform == "darwin":
        path = user_home(environ) / "Library" / "LaunchAgents" / f"{LAUNCHD_LABEL}.plist"
        domain = f"gui/{os.getuid() if uid is None else uid}"
        return LoginEntry(
            "launchd",
            path,
            launchd_plist(argv, gateway_folder / "gateway.log"),
            install=(),  # launchd loads ~/Library/LaunchAgents at every login
            start=(("launchctl", "bootstrap", domain, str(path)),),
            remove=(("launchctl", "bootout", f"{domain}/{LAUNCHD_LABEL}"),),
        )
    if platform == "win32":
        path = gateway_folder / LOGIN_DIR / "tomc-gateway.xml"
        python_w = Path(argv[0]).with_name("pythonw.exe")
        if python is None and python_w.exists():  # no console window at every login
            argv[0] = str(python_w)
        return LoginEntry(
            "schtasks",
            path,
            task_xml(argv, _windows_user(environ)).encode("utf-16"),
            install=(("schtasks", "/Create", "/TN", TASK_NAME, "/XML", str(path), "/F"),),
            start=(("schtasks", "/Run", "/TN", TASK_NAME),),
            remove=(
                ("schtasks", "/End", "/TN", TASK_NAME),
                ("schtasks", "/Delete", "/TN", TASK_NAME, "/F"),
            ),
        )
    raise GatewayError(f"no login entry is known for the platform {platform!r}")


def read_login_record(gateway_folder: Path) -> dict[str, Any] | None:
    """What :func:`install_login_entry` recorded, if anything."""
    try:
        data = json.loads((gateway_folder / LOGIN_FILE).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and "path" in data else None


def _write_record(gateway_folder: Path, entry: LoginEntry, clients: Sequence[str]) -> None:
    data = {"kind": entry.kind, "name": entry.name, "path": str(entry.path)}
    data["clients"] = sorted(set(clients))
    data["remove"] = [list(command) for command in entry.remove]
    atomic_write(gateway_folder / LOGIN_FILE, (json.dumps(data, indent=2) + "\n").encode("utf-8"))


def install_login_entry(
    entry: LoginEntry,
    gateway_folder: Path,
    client: str,
    runner: CommandRunner,
    *,
    start_now: bool,
) -> list[str]:
    """Write the entry's file, register it (and start it when ``start_now``), record it for
    ``client``; return what was done, in words. A failing command undoes the file."""
    record = read_login_record(gateway_folder)
    clients = [*(record or {}).get("clients", []), client]
    # The record first: a crash after it leaves something restore-direct knows to remove.
    _write_record(gateway_folder, entry, clients)
    atomic_write(entry.path, entry.content, mode=0o644)
    for command in (*entry.install, *(entry.start if start_now else ())):
        code, output = runner(command)
        if code != 0:
            _undo(entry, gateway_folder, runner, record)
            detail = output.splitlines()[-1] if output else f"exit code {code}"
            raise GatewayError(f"`{' '.join(command)}` failed ({detail}); no login entry added")
    done = [f"login entry: {entry.kind} {entry.name} ({entry.path})"]
    if not start_now:
        done.append("login entry: a gateway already answers, so it starts at the next login")
    return done


def _undo(
    entry: LoginEntry,
    gateway_folder: Path,
    runner: CommandRunner,
    record: dict[str, Any] | None,
) -> None:
    for command in entry.remove:
        runner(command)
    if record is None:  # nothing was installed before this attempt
        _remove_entry_file(entry.path, gateway_folder)
        with contextlib.suppress(FileNotFoundError):
            (gateway_folder / LOGIN_FILE).unlink()


def _remove_entry_file(path: Path, gateway_folder: Path) -> None:
    """Delete the entry's file, and TOMC's own folder of it once empty (a platform's folder,
    such as ~/.config/systemd/user, stays)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    if path.parent == gateway_folder / LOGIN_DIR:
        with contextlib.suppress(OSError):  # not empty, or already gone: leave it
            path.parent.rmdir()


def remove_login_entry(
    gateway_folder: Path,
    runner: CommandRunner,
    *,
    client: str | None = None,
    still_needed_by: Sequence[str] = (),
) -> list[str]:
    """Remove the login entry (``client`` given: only that client's claim on it; the entry
    goes when no client in ``still_needed_by`` claims it). Returns what was done, in words;
    commands that fail (the service was not loaded) do not stop the removal."""
    record = read_login_record(gateway_folder)
    if record is None:
        return []
    claimed = record.get("clients", [])
    claims = [c for c in claimed if c != client and c in still_needed_by]
    if client is not None and client not in claimed and claims:
        return []
    if client is not None and claims:
        if claims != record.get("clients"):
            data = {**record, "clients": claims}
            atomic_write(
                gateway_folder / LOGIN_FILE,
                (json.dumps(data, indent=2) + "\n").encode("utf-8"),
            )
        return [f"login entry kept: {' and '.join(claims)} still use the gateway"]
    notes = []
    for command in record.get("remove", []):
        code, output = runner(command)
        if code != 0:
            notes.append(f"note: `{' '.join(command)}` said: {output or f'exit code {code}'}")
    path = Path(record["path"])
    _remove_entry_file(path, gateway_folder)
    with contextlib.suppress(FileNotFoundError):
        (gateway_folder / LOGIN_FILE).unlink()
    return [f"login entry removed: {record.get('kind')} {record.get('name')} ({path})", *notes]
