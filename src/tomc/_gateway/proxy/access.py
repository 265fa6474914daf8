"""Who may read the status page and use the inspector of a gateway served beyond loopback.

On loopback both stay open, as before. Bound to another interface, the gateway answers
``/status``, ``/status.json`` and the inspector (``/``, ``/index.html``, ``/static/...``,
``/api/...``) only to a request that shows the status token: an ``x-tomc-status-token`` header,
an ``Authorization: Bearer`` header, or the cookie that opening ``/status?token=...`` once
sets. API traffic is not affected: it authenticates upstream with each user's own key, and
``/healthz`` stays open for load balancers.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Iterable
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["STATUS_COOKIE", "STATUS_HEADER", "StatusAccess", "new_status_token"]

STATUS_HEADER = "x-tomc-status-token"
STATUS_COOKIE = "tomc_status"
_EXACT = frozenset({"/", "/index.html", "/status", "/status.json"})
_PREFIXES = ("/static/", "/api/")


def new_status_token() -> str:
    """A fresh random token (printed by ``tomc gateway serve`` when none is given)."""
    return secrets.token_urlsafe(24)


def needs_token(path: str) -> bool:
    return path in _EXACT or path.startswith(_PREFIXES)


def _header(headers: Iterable[tuple[bytes, bytes]], name: bytes) -> str | None:
    return next((v.decode("latin-1") for k, v in headers if k == name), None)


class StatusAccess:
    """ASGI middleware: the status page and inspector behind ``token`` (``None``: open)."""

    def __init__(self, app: ASGIApp, token: str | None = None) -> None:
        self.app = app
        self.token = token

    def _valid(self, supplied: str | None) -> bool:
        if not supplied or self.token is None:
            return False
        return hmac.compare_digest(supplied.encode("utf-8"), self.token.encode("utf-8"))

    def _supplied(self, scope: Scope) -> str | None:
        headers = scope["headers"]
        token = _header(headers, STATUS_HEADER.encode())
        if token:
            return token.strip()
        authorization = _header(headers, b"authorization") or ""
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        cookie = SimpleCookie()
        try:
            cookie.load(_header(headers, b"cookie") or "")
        except Exception:  # a malformed cookie header shows no token
            return None
        morsel = cookie.get(STATUS_COOKIE)
        return morsel.value if morsel is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.token is None or not needs_token(scope["path"]):
            await self.app(scope, receive, send)
            return
        query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
        given = next((value for name, value in query if name == "token"), None)
        if given is not None and self._valid(given):
            await self._remember(scope, query, send)
            return
        if self._valid(self._supplied(scope)):
            await self.app(scope, receive, send)
            return
        await _send(
            send,
            401,
            {"error": {"type": "unauthorized", "message": _REFUSAL}},
            [(b"www-authenticate", b'Bearer realm="tomc-gateway"')],
        )

    async def _remember(self, scope: Scope, query: list[tuple[str, str]], send: Send) -> None:
        """Set the cookie and send the browser to the same page without the token in its URL."""
        rest = urlencode([(n, v) for n, v in query if n != "token"])
        location = scope["path"] + (f"?{rest}" if rest else "")
        forwarded = _header(scope["headers"], b"x-forwarded-proto") or ""
        secure = "; Secure" if scope.get("scheme") == "https" or forwarded == "https" else ""
        cookie = f"{STATUS_COOKIE}={self.token}; Path=/; HttpOnly; SameSite=Strict{secure}"
        headers = [(b"location", location.encode("latin-1")), (b"set-cookie", cookie.encode())]
        await _send(send, 303, {"location": location}, headers)


_REFUSAL = (
    "the status page and the inspector of a gateway served beyond loopback need its status "
    f"token: open /status?token=TOKEN once, or send {STATUS_HEADER}: TOKEN (the token "
    "`tomc gateway serve` printed, or its --status-token / $TOMC_STATUS_TOKEN)"
)


async def _send(
    send: Send, status: int, body: dict, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    data = json.dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"cache-control", b"no-store"),
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
