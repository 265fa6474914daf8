"""Which web pages may use a local server (the gateway, the inspector): cross-site requests and
CORS preflights.

Any web page can make a browser send a "simple" request (a POST with ``Content-Type:
text/plain``, no custom headers) to ``http://127.0.0.1:8787``, and ask for more with a CORS
preflight (``OPTIONS`` with ``Access-Control-Request-Method``). Browsers mark both with an
``Origin`` header; SDKs and agent CLIs send none. So :class:`OriginCheck`:

- lets a request without ``Origin`` through (what every non-browser client sends);
- lets a same-origin request through (the server's own pages: the ``Origin`` names the host
  and port the request was sent to);
- for an allowed origin (the gateway's ``allow_origins``, ``--allow-origin``) answers the
  preflight itself (204, never forwarded) and marks the answers it relays for that origin with
  ``Access-Control-Allow-Origin`` (an upstream's own ``Access-Control-*`` headers are
  replaced, so an upstream cannot grant more);
- refuses everything else with 403, in the error shape the server's clients parse (``refuse``;
  the gateway's: the API the path speaks), and answers a preflight without an allowed origin
  403 too.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from urllib.parse import urlsplit

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .._core.errors import InvalidOptionError

__all__ = ["ALLOWED_METHODS", "OriginCheck", "Refusal", "normalize_origin"]

#: Builds the 403 answer for a refused request: ``(scope, message) -> response``.
Refusal = Callable[[Scope, str], Response]
_DEFAULT_PORTS = {"http": 80, "https": 443}

#: What a preflight answer allows (the methods the gateway forwards).
ALLOWED_METHODS = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"
# How long a browser may reuse a preflight answer.
_MAX_AGE_S = "600"


def normalize_origin(text: str) -> str:
    """A web origin as browsers send it in ``Origin``: ``scheme://host[:port]``, lower case,
    without a default port (``https://App.example:443/`` -> ``https://app.example``)."""
    raw = text.strip() if isinstance(text, str) else ""
    try:
        parts = urlsplit(raw)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if (
        parts is None
        or parts.scheme not in _DEFAULT_PORTS
        or not parts.hostname
        or parts.username is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise InvalidOptionError(
            f"{text!r} is not a web origin; write it as scheme://host[:port], e.g. "
            "https://app.example or http://localhost:3000"
        )
    host = parts.hostname
    host = f"[{host}]" if ":" in host else host
    if port is not None and port != _DEFAULT_PORTS[parts.scheme]:
        host = f"{host}:{port}"
    return f"{parts.scheme}://{host}"


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope["headers"]:
        if key == name:
            return value.decode("latin-1")
    return None


def _same_origin(origin: str, scope: Scope) -> bool:
    host = _header(scope, b"host")
    if host is None:
        return False
    try:
        return normalize_origin(origin) == normalize_origin(f"{scope['scheme']}://{host}")
    except InvalidOptionError:
        return False


class OriginCheck:
    """ASGI middleware for the rules of the module docstring; ``allowed()`` returns the allowed
    origins in force (normalised with :func:`normalize_origin`), read at each request so that
    a settings change applies at once (none: same-origin pages only). A refused cross-site
    request gets ``refuse(scope, message)``, the message ending with ``why``."""

    def __init__(
        self,
        app: ASGIApp,
        allowed: Callable[[], Collection[str]] = tuple,
        *,
        refuse: Refusal,
        why: str,
    ) -> None:
        self.app = app
        self.allowed = allowed
        self.refuse = refuse
        self.why = why

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        origin = _header(scope, b"origin")
        preflight = scope["method"] == "OPTIONS" and (
            _header(scope, b"access-control-request-method") is not None
        )
        if origin is None and not preflight:
            await self.app(scope, receive, send)
            return
        if origin is not None and _same_origin(origin, scope):
            if preflight:
                await self._preflight(scope, origin, send)
            else:
                await self.app(scope, receive, send)
            return
        if origin is not None and self._allowed(origin):
            if preflight:
                await self._preflight(scope, origin, send)
            else:
                await self.app(scope, receive, _cors_send(send, origin))
            return
        await self._refuse(scope, origin, receive, send)

    def _allowed(self, origin: str) -> bool:
        try:
            return normalize_origin(origin) in self.allowed()
        except InvalidOptionError:  # "null" (a sandboxed page, a file://) is never allowed
            return False

    async def _preflight(self, scope: Scope, origin: str, send: Send) -> None:
        headers = [
            (b"access-control-allow-origin", origin.encode("latin-1")),
            (b"access-control-allow-methods", ALLOWED_METHODS.encode("latin-1")),
            (b"access-control-max-age", _MAX_AGE_S.encode("latin-1")),
            (b"vary", b"Origin, Access-Control-Request-Method, Access-Control-Request-Headers"),
        ]
        requested = _header(scope, b"access-control-request-headers")
        if requested:
            headers.append((b"access-control-allow-headers", requested.encode("latin-1")))
        if _header(scope, b"access-control-request-private-network") == "true":
            # Chrome asks before a public page may reach a loopback address.
            headers.append((b"access-control-allow-private-network", b"true"))
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})

    async def _refuse(self, scope: Scope, origin: str | None, receive: Receive, send: Send) -> None:
        if origin is None:
            message = "a CORS preflight without an Origin header is not answered"
        else:
            message = f"cross-site request from {origin} refused: {self.why}"
        await self.refuse(scope, message)(scope, receive, send)


def _cors_send(send: Send, origin: str) -> Send:
    """``send`` with the allowed origin's CORS headers in place of any the answer carried."""

    async def marked(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = []
            vary = False
            for name, value in message.get("headers", []):
                if name.lower().startswith(b"access-control-"):
                    continue
                if name.lower() == b"vary" and not vary:
                    value, vary = value + b", Origin", True
                headers.append((name, value))
            if not vary:
                headers.append((b"vary", b"Origin"))
            headers.append((b"access-control-allow-origin", origin.encode("latin-1")))
            message = {**message, "headers": headers}
        await send(message)

    return marked
