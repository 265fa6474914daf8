"""Serving an app (the inspector, the gateway): uvicorn on asyncio, on a socket bound up front.

:func:`make_server` binds the socket at once (so a taken port is an ``OSError`` right there and
``port=0`` has a known port), then :meth:`AppServer.run` serves in the foreground (what
``tomc serve`` does) or :meth:`AppServer.start` in a background thread (tests, embedding).
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Collection, Iterable
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp

from .._core.compiler import compile_memory
from .._service import CompileFunction
from ._app import BODY_TIMEOUT_S, LOOPBACK_HOSTS, create_app

__all__ = [
    "BACKLOG",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "AppServer",
    "allowed_hosts_for",
    "make_server",
    "serve",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
#: Pending connections the kernel queues before refusing more; the stdlib default of 5 reset
#: connections when a page or script sent a few dozen compiles at once.
BACKLOG = 1024
_WILDCARD = ("", "0.0.0.0", "::")


def _is_loopback(host: str) -> bool:
    if host.strip("[]").lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    host = host.strip("[]")
    return f"[{host}]" if ":" in host else host


def allowed_hosts_for(host: str, extra: Iterable[str] = ()) -> tuple[str, ...] | None:
    """The Host names a server bound to ``host`` answers to; ``None`` means any.

    Loopback names always; the bound address itself when it is a specific non-loopback one;
    ``extra`` names (``*`` allows any). Bound to every interface (``0.0.0.0``) with no
    ``extra`` names, any Host is accepted: the server cannot know its names.
    """
    names = [name.strip() for name in extra if name.strip()]
    if "*" in names:
        return None
    if host in _WILDCARD and not names:
        return None
    allowed = list(LOOPBACK_HOSTS)
    if host not in _WILDCARD and not _is_loopback(host):
        allowed.append(_url_host(host))
    return tuple(dict.fromkeys([*allowed, *names]))


def _bind(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that name it, and
    # without it every small response waits out Nagle's algorithm (about 40 ms on Linux).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host.strip("[]"), port))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


class AppServer:
    """uvicorn serving ``app`` on an already bound socket; ``url`` is where it answers."""

    def __init__(
        self,
        app: ASGIApp,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        *,
        backlog: int = BACKLOG,
        quiet: bool = False,
        verbose: bool = False,
        lifespan: str = "off",
    ) -> None:
        self.socket = _bind(host, port, backlog)
        self.host = host
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(
            app,
            http="auto",
            loop="asyncio",
            ws="none",
            lifespan=lifespan,
            backlog=backlog,
            log_config=None,
            log_level="critical" if quiet else "info" if verbose else "warning",
            access_log=verbose and not quiet,
            timeout_graceful_shutdown=2,
            server_header=False,
        )
        self._server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        return self.host.strip("[]"), self.port

    @property
    def url(self) -> str:
        return f"http://{_url_host(self.host)}:{self.port}/"

    def run(self) -> None:
        """Serve in this thread until Ctrl-C (or :meth:`stop` from another thread)."""
        try:
            self._server.run(sockets=[self.socket])
        finally:
            self.socket.close()

    def start(self, timeout_s: float = 30.0) -> AppServer:
        """Serve in a background thread; return once it accepts connections."""
        self._thread = threading.Thread(target=self.run, name="tomc-inspector", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the inspector did not start on {self.url}")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        """Stop serving and wait for the background thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.socket.close()

    def __enter__(self) -> AppServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


def make_server(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    quiet: bool = False,
    verbose: bool = False,
    allowed_hosts: Collection[str] | None = None,
    compile_fn: CompileFunction = compile_memory,
    body_timeout_s: float = BODY_TIMEOUT_S,
) -> AppServer:
    """Bind the inspector (``port=0`` picks a free port; see ``url``) without serving yet.

    ``allowed_hosts`` adds Host names to those :func:`allowed_hosts_for` grants (``["*"]``:
    any); ``compile_fn`` replaces the compiler.
    """
    app = create_app(
        compile_fn=compile_fn,
        allowed_hosts=allowed_hosts_for(host, allowed_hosts or ()),
        body_timeout_s=body_timeout_s,
    )
    return AppServer(app, host, port, quiet=quiet, verbose=verbose)


def serve(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    verbose: bool = False,
    allowed_hosts: Collection[str] | None = None,
) -> None:
    """Run the inspector until interrupted (what ``tomc serve`` calls)."""
    logging.basicConfig(format="%(levelname)s %(name)s: %(message)s")
    server = make_server(host, port, verbose=verbose, allowed_hosts=allowed_hosts)
    print(f"TOMC inspector on {server.url} (Ctrl-C to stop)", flush=True)
    server.run()
