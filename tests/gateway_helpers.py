"""Shared by the gateway tests: isolated home folders, free ports, a real ``tomc gateway serve``
subprocess, the fake agent executable, and an in-process gateway in front of any upstream."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx2
import openai

from dialect_fixtures import request_tokens
from fake_providers import FakeProvider, Reply, Usage
from tomc._gateway.health import probe
from tomc._gateway.local.leases import read_run_gateway
from tomc._gateway.proxy.app import Gateway, create_gateway_app
from tomc._gateway.proxy.metering.ledger import LedgerEntry
from tomc._gateway.proxy.metering.usage import ANTHROPIC, ProviderUsage
from tomc._gateway.proxy.server import gateway_server
from tomc._gateway.settings import GatewaySettings, gateway_dir
from tomc._http.deadlines import BODY_IDLE_TIMEOUT_S, HEADER_TIMEOUT_S
from tomc._http.server import AppServer

FAKE_AGENT = Path(__file__).with_name("fake_agent.py")
#: Ends a process at once, no handler run: SIGKILL, or on Windows TerminateProcess (which
#: ``os.kill`` calls for any signal but the console's CTRL_C_EVENT and CTRL_BREAK_EVENT).
KILL = getattr(signal, "SIGKILL", signal.SIGTERM)
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
def gateway(
    port: int,
    home: Path | None = None,
    *,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    stderr: int = subprocess.DEVNULL,
) -> Iterator[subprocess.Popen[bytes]]:
    """``tomc gateway serve`` on ``port`` (with ``args``) for the block, answering before it
    starts; ``home`` is its ``--home`` (else ``env``'s TOMC_HOME)."""
    where = ["--home", str(home)] if home is not None else []
    process = subprocess.Popen(
        [*SERVE, "--port", str(port), *where, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
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
            os.kill(started.pid, KILL)


def make_fake_agent(folder: Path, name: str) -> Path:
    """An executable ``name`` in ``folder`` that runs :mod:`fake_agent` with this Python: a
    ``#!`` script, or on Windows ``name.cmd`` (as npm installs agents there), which tells the
    fake agent that the process ``tomc run`` started is the ``cmd.exe`` running it."""
    folder.mkdir(parents=True, exist_ok=True)
    if sys.platform == "win32":
        path = folder / f"{name}.cmd"
        path.write_text(
            f'@echo off\r\nset FAKE_AGENT_VIA_CMD=1\r\n"{sys.executable}" "{FAKE_AGENT}" %*\r\n',
            "utf-8",
        )
        return path
    path = folder / name
    path.write_text(f"#!{sys.executable}\n" + FAKE_AGENT.read_text("utf-8"), "utf-8")
    path.chmod(0o755)
    return path


@contextlib.contextmanager
def serve_gateway(
    upstream: str,
    *,
    read_timeout_s: float = 30.0,
    verbose: bool = False,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    body_timeout_s: float = BODY_IDLE_TIMEOUT_S,
    **settings_fields: object,
) -> Iterator[tuple[AppServer, Gateway]]:
    """The gateway as ``tomc gateway serve`` runs it, on a free loopback port, with every
    upstream kind pointing at ``upstream`` (a root URL: ``/v1`` is added for OpenAI's) and
    ``read_timeout_s`` for the upstream's answers."""
    upstreams = {"anthropic": upstream, "openai": f"{upstream}/v1", "chatgpt": upstream}
    settings = GatewaySettings(upstreams=upstreams, **settings_fields)  # type: ignore[arg-type]
    gateway = Gateway(settings, timeout=httpx2.Timeout(10.0, read=read_timeout_s))
    app = create_gateway_app(settings, gateway=gateway)
    server = gateway_server(
        app,
        "127.0.0.1",
        0,
        quiet=not verbose,
        verbose=verbose,
        header_timeout_s=header_timeout_s,
        body_timeout_s=body_timeout_s,
    )
    with server:
        yield server, gateway


#: When the ledger tests' requests happen (a fixed time, so figures are the same every run).
LEDGER_T0 = 1_800_000_000.0


def ledger_entry(**fields: Any) -> LedgerEntry:
    """One finished Claude Code request as the usage ledger records it; ``fields`` override."""
    values: dict[str, Any] = {
        "at": LEDGER_T0,
        "api": "messages",
        "conversation": "claude:one|claude-opus-4-8",
        "status": 200,
        "model": "claude-opus-4-8",
        "action": "passthrough",
        "code": "fits",
        "tokens_before": 1000,
        "tokens_after": 1000,
        "usage": ProviderUsage(ANTHROPIC, 1000, cache_write_tokens=1000),
    }
    values.update(fields)
    return LedgerEntry(**values)


@contextlib.contextmanager
def status_page_gateway(home: Path, body: dict[str, Any], api_key: str) -> Iterator[Any]:
    """A gateway (with a ``home``, so a ledger) in front of a fake provider whose first two
    answers report 1,234 prompt tokens, then 34 of them uncached and 1,200 read from the cache;
    ``body`` (a Chat Completions request) has gone through it twice, with a target of 0.6 of its
    size. Yields ``(base URL, gateway)`` while it serves."""
    with FakeProvider() as fake:
        fake.script(
            Reply(usage=Usage(input_tokens=1234)),
            Reply(usage=Usage(input_tokens=34, cache_read_tokens=1200)),
        )
        settings = GatewaySettings(
            upstreams={"openai": fake.base_url, "anthropic": fake.anthropic_url},
            context_target=int(request_tokens("chat", body) * 0.6),
        )
        gateway = Gateway(settings, home=home)
        app = create_gateway_app(settings, gateway=gateway)
        with AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server:
            base = server.url.rstrip("/")
            client = openai.OpenAI(
                api_key=api_key,
                base_url=f"{base}/v1",
                max_retries=0,
                http_client=httpx2.Client(trust_env=False),
            )
            client.chat.completions.create(**body)
            client.chat.completions.create(**body)
            yield base, gateway
