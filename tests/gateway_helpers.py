"""Shared by the activation and launcher tests: isolated home folders, free ports, a real
``tomc gateway serve`` subprocess, and the fake agent executable."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tomc._gateway.local.health import probe
from tomc._gateway.local.leases import read_run_gateway
from tomc._gateway.settings import gateway_dir

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
SERVE = (sys.executable, "-m", "tomc", "gateway", "serve")
#: Variables of the developer's own environment that would leak into a test's agents.
_SCRUBBED = (
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "CODEX_HOME",
    "CLAUDE_CONFIG_DIR",
    "XDG_CONFIG_HOME",
    "TOMC_CLAUDE_BIN",
    "TOMC_CODEX_BIN",
)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def isolated_env(tmp_path: Path) -> dict[str, str]:
    """An environment whose HOME and TOMC_HOME are fresh folders under ``tmp_path``."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUBBED}
    home = tmp_path / "home"
    home.mkdir()
    env["HOME"] = str(home)
    env["USERPROFILE"] = str(home)
    env["TOMC_HOME"] = str(tmp_path / "tomc")
    return env


def wait_for(condition: Callable[[], object], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {condition}")
        time.sleep(0.02)


@contextlib.contextmanager
def gateway(port: int, home: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``tomc gateway serve`` on ``port`` for the block, answering before it starts."""
    process = subprocess.Popen(
        [*SERVE, "--port", str(port), "--home", str(home)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(lambda: probe(port).answering or process.poll() is not None)
        assert process.poll() is None, "the gateway did not start"
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stop_leftover_gateway(tomc_home: Path) -> None:
    """Stop a gateway a failed ``tomc run`` test left behind (it runs detached)."""
    started = read_run_gateway(gateway_dir(tomc_home))
    if started is not None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(started.pid, signal.SIGKILL)


def make_fake_agent(folder: Path, name: str) -> Path:
    """An executable ``name`` in ``folder`` that runs :mod:`fake_agent` with this Python."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\n" + FAKE_AGENT.read_text("utf-8"), "utf-8")
    path.chmod(0o755)
    return path
