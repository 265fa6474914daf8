"""Who is using a gateway that ``tomc run`` started: one lease file per running agent.

Files in the gateway folder (``<TOMC home>/gateway``):

- ``leases/<pid>.json``: one per running ``tomc run``, named by that wrapper process's id
  (``{"pid", "client", "port", "agent_pid", "started_at"}``). A lease whose process is gone
  (a crash, ``kill -9``, a power cut) is stale and counts for nothing, so the count survives
  crashes without a daemon.
- ``run-gateway.json``: written by the ``tomc run`` that started the gateway
  (``{"pid", "port", "started_at", "stop_token"}``: the secret of its stop request); only a
  gateway named there is ever stopped by ``tomc run``. A gateway started any other way is left
  alone.
- ``run.lock``: an OS file lock held while a ``tomc run`` decides to start or stop the gateway,
  so two agents starting or ending at the same moment cannot both start one or stop it under
  the other.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.wintypes
import functools
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..health import send_stop
from ..settings import atomic_write

__all__ = [
    "Lease",
    "RunGateway",
    "clear_run_gateway",
    "live_leases",
    "pid_alive",
    "read_run_gateway",
    "remove_lease",
    "run_lock",
    "stop_gateway",
    "write_lease",
    "write_run_gateway",
]

LEASES_DIR = "leases"
RUN_GATEWAY_FILE = "run-gateway.json"
LOCK_FILE = "run.lock"
STOP_TIMEOUT_S = 10.0


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Lease:
    """One running ``tomc run``: its own process id, the agent it runs and the gateway port."""

    pid: int
    client: str
    port: int
    agent_pid: int | None = None
    started_at: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunGateway:
    """A gateway process that ``tomc run`` started (and so may stop)."""

    pid: int
    port: int
    started_at: str = ""
    #: The secret of its stop request (:mod:`tomc._gateway.proxy.stop`); "" before it had one.
    stop_token: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists (a zombie of ours counts as gone)."""
    if pid <= 0:
        return False
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        return _windows_pid_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, it is someone else's
        return True
    except OSError:
        return False
    try:  # our own child that exited but was not reaped yet
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return done == 0


def _windows_pid_alive(pid: int) -> bool:  # pragma: no cover - Windows only
    kernel32 = _kernel32()
    handle = kernel32.OpenProcess(_QUERY_LIMITED_INFORMATION, False, pid)
    if not handle:
        return False
    try:
        code = ctypes.wintypes.DWORD()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return False
        return code.value == _STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)


_QUERY_LIMITED_INFORMATION = 0x1000
_STILL_ACTIVE = 259


@functools.cache
def _kernel32() -> Any:  # pragma: no cover - Windows only
    """kernel32 with the signatures this module calls: a library object of our own, because
    ``ctypes.windll`` is shared by every module of the process and returns ``c_int`` by
    default, which would cut a 64-bit process handle to 32 bits."""
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)  # type: ignore[attr-defined]
    kernel32.OpenProcess.argtypes = (wintypes.DWORD, wintypes.BOOL, wintypes.DWORD)
    kernel32.OpenProcess.restype = wintypes.HANDLE
    kernel32.GetExitCodeProcess.argtypes = (wintypes.HANDLE, ctypes.POINTER(wintypes.DWORD))
    kernel32.GetExitCodeProcess.restype = wintypes.BOOL
    kernel32.CloseHandle.argtypes = (wintypes.HANDLE,)
    kernel32.CloseHandle.restype = wintypes.BOOL
    return kernel32


@contextlib.contextmanager
def run_lock(folder: Path) -> Iterator[None]:
    """Hold the gateway folder's lock (blocking) for the block's duration."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with open(folder / LOCK_FILE, "a+b") as handle:
        if sys.platform == "win32":  # pragma: no cover - Windows only
            import msvcrt

            while True:
                try:
                    msvcrt.locking(handle.fileno(), msvcrt.LK_LOCK, 1)
                    break
                except OSError:  # LK_LOCK gives up after 10 s of trying; keep waiting
                    time.sleep(0.1)
            try:
                yield
            finally:
                handle.seek(0)
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _int(data: dict[str, Any], key: str) -> int:
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{key} is not an integer")
    return value


def _write_json(path: Path, data: dict[str, Any]) -> None:
    atomic_write(path, (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"))


def write_lease(folder: Path, client: str, port: int, agent_pid: int | None = None) -> Lease:
    """Record that this process runs ``client`` against the gateway on ``port``."""
    lease = Lease(os.getpid(), client, port, agent_pid, _now())
    _write_json(folder / LEASES_DIR / f"{lease.pid}.json", lease.to_dict())
    return lease


def remove_lease(folder: Path, pid: int | None = None) -> None:
    with contextlib.suppress(FileNotFoundError):
        (folder / LEASES_DIR / f"{pid or os.getpid()}.json").unlink()


def live_leases(folder: Path, *, prune: bool = False) -> list[Lease]:
    """The leases whose process still runs, oldest first; ``prune`` deletes the stale ones
    (only under :func:`run_lock`)."""
    leases: list[Lease] = []
    directory = folder / LEASES_DIR
    if not directory.is_dir():
        return leases
    for path in sorted(directory.glob("*.json")):
        data = _read_json(path) or {}
        try:
            agent_pid = data.get("agent_pid")
            lease: Lease | None = Lease(
                pid=_int(data, "pid"),
                client=str(data["client"]),
                port=_int(data, "port"),
                agent_pid=None if agent_pid is None else _int(data, "agent_pid"),
                started_at=str(data.get("started_at", "")),
            )
        except (KeyError, ValueError):
            lease = None
        if lease is not None and path.stem == str(lease.pid) and pid_alive(lease.pid):
            leases.append(lease)
        elif prune:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    return sorted(leases, key=lambda lease: (lease.started_at, lease.pid))


def read_run_gateway(folder: Path) -> RunGateway | None:
    """The gateway ``tomc run`` started, if its process still runs."""
    data = _read_json(folder / RUN_GATEWAY_FILE) or {}
    try:
        found = RunGateway(
            _int(data, "pid"),
            _int(data, "port"),
            str(data.get("started_at", "")),
            str(data.get("stop_token", "")),
        )
    except (KeyError, ValueError):
        return None
    return found if pid_alive(found.pid) else None


def write_run_gateway(folder: Path, pid: int, port: int, stop_token: str = "") -> RunGateway:
    found = RunGateway(pid, port, _now(), stop_token)
    _write_json(folder / RUN_GATEWAY_FILE, found.to_dict())
    return found


def clear_run_gateway(folder: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (folder / RUN_GATEWAY_FILE).unlink()


def stop_gateway(folder: Path, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the gateway ``tomc run`` started, if it still runs; return whether one was."""
    started = read_run_gateway(folder)
    clear_run_gateway(folder)
    if started is None:
        return False
    # Its stop request first: a graceful shutdown on every platform. SIGTERM is one on POSIX
    # (uvicorn's), TerminateProcess on Windows: only for a gateway that does not answer.
    asked = bool(started.stop_token) and send_stop(started.port, started.stop_token)
    if not asked:
        with contextlib.suppress(ProcessLookupError):
            os.kill(started.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while pid_alive(started.pid):
        if time.monotonic() >= deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(started.pid, getattr(signal, "SIGKILL", signal.SIGTERM))
            break
        time.sleep(0.05)
    return True
