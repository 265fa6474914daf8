"""A real ``redis-server`` (or ``valkey-server``) on a free loopback port, for the shared-store
tests: no persistence, its folder a temporary one, stopped (and startable again on the same
port, for the outage tests) by the test that owns it.

Absent binary: the tests that need it skip with the reason, except under CI (``CI=true``),
where ``.ci/run`` installs Debian's ``redis-server`` and its absence is a failure.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["RedisServer", "redis_binary", "running_redis"]

_BINARIES = ("redis-server", "valkey-server")


def redis_binary() -> str:
    """The server binary; skips the test when there is none (fails under CI)."""
    for name in _BINARIES:
        found = shutil.which(name) or shutil.which(name, path="/usr/bin:/usr/sbin")
        if found:
            return found
    reason = "no redis-server or valkey-server on this machine (.ci/run installs redis-server)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; under CI it must be installed")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RedisServer:
    """One ``redis-server`` process on ``127.0.0.1:port``; :meth:`stop` and :meth:`start` again
    keep the port (the data goes: nothing is persisted)."""

    def __init__(self, folder: Path, binary: str | None = None) -> None:
        self.binary = binary or redis_binary()
        self.folder = folder
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        self.folder.mkdir(parents=True, exist_ok=True)
        args = [
            self.binary,
            "--port",
            str(self.port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.folder),
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
        ]
        log = (self.folder / "redis.log").open("ab")
        self.process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + 15
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = (self.folder / "redis.log").read_text("utf-8", "replace")[-2000:]
                self.stop()
                raise RuntimeError(f"redis-server did not start on port {self.port}:\n{tail}")
            time.sleep(0.02)
        return self

    def _answers(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(16).startswith(b"+PONG")
        except OSError:
            return False

    def stop(self) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None


def running_redis(folder: Path) -> Iterator[RedisServer]:
    """Generator for fixtures: a started server, stopped afterwards."""
    server = RedisServer(folder).start()
    try:
        yield server
    finally:
        server.stop()
