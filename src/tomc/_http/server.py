"""Serving an app (the inspector, the gateway): uvicorn on asyncio, on a socket bound up front.

:class:`AppServer` binds the socket at once (so a taken port is an ``OSError`` right there and
``port=0`` has a known port), then :meth:`AppServer.run` serves in the foreground (what
``tomc serve`` and ``tomc gateway serve`` do) or :meth:`AppServer.start` in a background thread
(tests, embedding). Slow clients are cut (:mod:`tomc._http.deadlines`): request headers must
arrive within ``header_timeout_s``, and a body must not stop for ``body_timeout_s``.
:class:`WorkerServer` serves one socket from several processes (``tomc gateway serve --workers
N``): uvicorn's supervisor starts them, restarts one that dies, and stops them all on Ctrl-C or
SIGTERM.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import threading
import time
from collections.abc import Iterable
from email.utils import formatdate
from types import TracebackType

import uvicorn
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.importer import import_from_string
from uvicorn.protocols.http.auto import AutoHTTPProtocol
from uvicorn.supervisors import Multiprocess

from .deadlines import BODY_IDLE_TIMEOUT_S, HEADER_TIMEOUT_S, guarded_protocol

__all__ = [
    "BACKLOG",
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "LOOPBACK_HOSTS",
    "AppServer",
    "GuardedHTTPProtocol",
    "WorkerServer",
    "allowed_hosts_for",
    "claim_port",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
#: Host names (any port) a loopback server answers to.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
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


def claim_port(sock: socket.socket) -> None:
    """Make ``sock``'s coming bind fail when another socket listens on its port. POSIX:
    SO_REUSEADDR, so a restarted server binds at once while its old connections linger in
    TIME_WAIT (a second listener is still refused). Windows: SO_REUSEADDR would let a second
    program bind the same port and share its connections; SO_EXCLUSIVEADDRUSE refuses it."""
    if sys.platform == "win32":  # pragma: no cover - Windows only
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_EXCLUSIVEADDRUSE, 1)  # type: ignore[attr-defined]
    else:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)


def _bind(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets that name it, and
    # without it every small response waits out Nagle's algorithm (about 40 ms on Linux).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        claim_port(sock)
        sock.bind((host.strip("[]"), port))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


class _DateIfMissing:
    """ASGI wrapper: a ``Date`` header on every answer that has none (a relayed answer keeps
    the one its own server sent, instead of getting a second one from uvicorn)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def dated(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"date" for name, _ in headers):
                    headers.append((b"date", formatdate(usegmt=True).encode("ascii")))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, dated)


#: uvicorn's HTTP protocol with the default deadlines, named so that a worker process can import
#: it (a class made at run time cannot be handed to another process).
GuardedHTTPProtocol = guarded_protocol(AutoHTTPProtocol)
_WORKER_FACTORY = "TOMC_WORKER_APP_FACTORY"


def _worker_app() -> ASGIApp:
    """In each worker process: the app of :class:`WorkerServer`'s factory, keeping its own
    ``Date`` headers as ``AppServer(app_date=True)`` does."""
    return _DateIfMissing(import_from_string(os.environ[_WORKER_FACTORY])())


class WorkerServer:
    """``workers`` processes serving one socket bound here, with the deadlines and the ``Date``
    handling of ``AppServer(app_date=True)`` (the gateway's); each process builds its app by
    calling ``factory``, an import string (``"package.module:function"``)."""

    def __init__(
        self,
        factory: str,
        host: str,
        port: int,
        workers: int,
        *,
        backlog: int = BACKLOG,
        verbose: bool = False,
        lifespan: str = "on",
    ) -> None:
        self.socket = _bind(host, port, backlog)
        self.host = host
        self.port = self.socket.getsockname()[1]
        self._factory = factory
        self._config = uvicorn.Config(
            f"{__name__}:_worker_app",
            factory=True,
            workers=workers,
            http=f"{__name__}:GuardedHTTPProtocol",
            date_header=False,
            loop="asyncio",
            ws="none",
            lifespan=lifespan,
            backlog=backlog,
            log_config=None,
            log_level="info" if verbose else "warning",
            access_log=verbose,
            timeout_graceful_shutdown=2,
            server_header=False,
        )

    @property
    def url(self) -> str:
        return f"http://{_url_host(self.host)}:{self.port}/"

    def run(self) -> None:
        """Start the workers and supervise them until Ctrl-C or SIGTERM."""
        os.environ[_WORKER_FACTORY] = self._factory  # the workers inherit it
        try:
            Multiprocess(self._config, sockets=[self.socket]).run()
        finally:
            self.socket.close()


class AppServer:
    """uvicorn serving ``app`` on an already bound socket; ``url`` is where it answers.

    ``header_timeout_s`` and ``body_timeout_s`` cut slow clients (:mod:`tomc._http.deadlines`);
    ``keep_alive_s`` is how long an idle connection stays open between requests.
    With ``app_date`` the app's own ``Date`` header is kept and one is added only to answers
    without it (a proxy relaying its upstream's); otherwise uvicorn adds its own to each.
    """

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
        header_timeout_s: float = HEADER_TIMEOUT_S,
        body_timeout_s: float = BODY_IDLE_TIMEOUT_S,
        app_date: bool = False,
        keep_alive_s: float = 5.0,
    ) -> None:
        self.socket = _bind(host, port, backlog)
        self.host = host
        self.port = self.socket.getsockname()[1]
        config = uvicorn.Config(
            _DateIfMissing(app) if app_date else app,
            http=guarded_protocol(AutoHTTPProtocol, header_timeout_s, body_timeout_s),
            date_header=not app_date,
            loop="asyncio",
            ws="none",
            lifespan=lifespan,
            backlog=backlog,
            log_config=None,
            log_level="critical" if quiet else "info" if verbose else "warning",
            access_log=verbose and not quiet,
            timeout_graceful_shutdown=2,
            timeout_keep_alive=keep_alive_s,
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

    def request_stop(self) -> None:
        """Ask :meth:`run` to return: requests being answered finish, the lifespan's shutdown
        runs (safe from any thread)."""
        self._server.should_exit = True

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
