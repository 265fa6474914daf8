"""Which Host names a local server answers to (a DNS-rebinding page sends its own name).

A web page on ``http://attacker.example`` whose name is made to resolve to 127.0.0.1 reaches a
loopback server with ``Host: attacker.example``; :class:`HostCheck` refuses such a request
before any route sees it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from .server import LOOPBACK_HOSTS

__all__ = ["HostCheck", "host_name"]


def host_name(host: str) -> str:
    """The name part of a Host header: ``[::1]:8765`` -> ``[::1]``, ``LocalHost.:80`` ->
    ``localhost``."""
    host = host.strip().lower()
    name = host[: host.index("]") + 1] if host.startswith("[") and "]" in host else host
    if not name.startswith("["):
        name = name.rsplit(":", 1)[0] if ":" in name else name
    return name.rstrip(".")


class HostCheck:
    """ASGI middleware: refuse a request whose Host is not an allowed name, with
    ``refuse(name)`` (a 421).

    ``allowed`` holds host names without ports (``[::1]`` bracketed); ``None`` allows any.
    A request without a Host header (HTTP/1.0) cannot come from a browser and is let through.
    """

    def __init__(
        self,
        app: ASGIApp,
        allowed: Collection[str] | None = LOOPBACK_HOSTS,
        *,
        refuse: Callable[[str], Response],
    ) -> None:
        self.app = app
        self.allowed = None if allowed is None else frozenset(host_name(h) for h in allowed)
        self.refuse = refuse

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.allowed is not None:
            host = next((v for k, v in scope["headers"] if k == b"host"), None)
            if host is not None:
                name = host_name(host.decode("latin-1"))
                if name not in self.allowed:
                    await self.refuse(name)(scope, receive, send)
                    return
        await self.app(scope, receive, send)
