"""Forwarding one request upstream and relaying the answer as it arrives, byte for byte.

Every end-to-end header goes on unchanged (authorization, x-api-key, anthropic-version,
anthropic-beta, user agents, session and SDK headers, ...); only hop-by-hop headers are dropped
and ``content-length`` is set for the body actually sent. Nothing of the HTTP client's own is
added: no ``Accept``, ``Accept-Encoding`` or ``User-Agent`` the client did not send, and no
cookie (the shared client keeps none, so one user's cookies never reach another's requests).
The upstream's status, headers and body come back as they are: raw bytes, unbuffered (a stream
is relayed event by event), with its errors untouched. When there is no answer to relay the
gateway answers itself (a :class:`FailedRelay`), in the error shape of the API the client
speaks, naming the upstream URL it tried and what went wrong: it could not be reached (502), it
closed the connection before answering (502), or it did not answer in time (504). A client that
goes away cancels the upstream request, before its answer began or mid-stream.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from http.cookiejar import CookieJar, DefaultCookiePolicy
from urllib.parse import urlsplit, urlunsplit

import anyio
import httpx2
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from ...chat._client import join_headers
from ...chat.dialects import DEFAULT_DIALECT, DIALECTS
from .metering.meter import UsageSniffer
from .metering.usage import MAX_SNIFF_BYTES

__all__ = [
    "HOP_BY_HOP",
    "UPSTREAM_LIMITS",
    "FailedRelay",
    "RelayFailure",
    "client_gone",
    "error_response",
    "forward_headers",
    "no_cookies",
    "relay",
    "relay_failure",
    "response_headers",
    "shown_url",
    "upstream_client",
]

logger = logging.getLogger("tomc.gateway")

#: The pool of connections to the upstream. An idle connection is dropped after 4 s: servers
#: on uvicorn (a local model server, LiteLLM, our own fake provider) close theirs after 5 s,
#: and httpx's default of 5 s raced that close, so a burst of requests after a short lull got
#: "could not reach the upstream (ReadError)" on connections the server had just closed.
UPSTREAM_LIMITS = httpx2.Limits(
    max_connections=None, max_keepalive_connections=64, keepalive_expiry=4.0
)


def upstream_client(
    transport: httpx2.AsyncBaseTransport | None, timeout: httpx2.Timeout | float
) -> httpx2.AsyncClient:
    """The gateway's one client to the upstream.

    trust_env=False: it forwards where it is told, never through an ambient proxy; no
    redirects and no cookie jar, so nothing of one user's traffic reaches another's.
    """
    return httpx2.AsyncClient(
        transport=transport,
        timeout=timeout,
        trust_env=False,
        follow_redirects=False,
        cookies=no_cookies(),
        limits=UPSTREAM_LIMITS,
    )


#: Headers that describe one connection, not the message (RFC 9110 section 7.6.1), plus the
#: ones the gateway sets itself for the body it sends.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)


def _connection_listed(headers: Iterable[tuple[str, str]]) -> set[str]:
    listed: set[str] = set()
    for name, value in headers:
        if name.lower() == "connection":
            listed.update(token.strip().lower() for token in value.split(","))
    return listed


def forward_headers(
    headers: Iterable[tuple[str, str]], add: Mapping[str, str] | None = None
) -> list[tuple[str, str]]:
    """The client's headers minus hop-by-hop ones; ``add`` values join an existing
    comma-separated header (``anthropic-beta``) or are added."""
    items = list(headers)
    drop = HOP_BY_HOP | _connection_listed(items)
    kept = [(name, value) for name, value in items if name.lower() not in drop]
    return join_headers(kept, add or {})


def response_headers(headers: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """The upstream's response headers minus hop-by-hop ones (its content-length is kept: the
    body is relayed byte for byte)."""
    items = list(headers)
    drop = (HOP_BY_HOP - {"content-length"}) | _connection_listed(items)
    return [(name, value) for name, value in items if name.lower() not in drop]


def error_body(api: str | None, status: int, message: str, kind: str) -> dict[str, object]:
    """An error the gateway itself raises, as the client's SDK parses it: its format's error
    body (the default format's for a name no format has)."""
    dialect = DIALECTS.get(api or DEFAULT_DIALECT) or DIALECTS[DEFAULT_DIALECT]
    return dialect.error_body(status, message, kind)


def error_response(api: str | None, status: int, message: str, kind: str) -> Response:
    """:func:`error_body` as a response."""
    return JSONResponse(error_body(api, status, message, kind), status_code=status)


@dataclass(frozen=True)
class RelayFailure:
    """Why the gateway answered a request itself: ``kind`` is ``unreachable`` (no connection
    to the upstream), ``closed`` (the upstream took the request and dropped the connection
    before its answer was complete) or ``timeout``; ``url`` the upstream URL tried, without its
    query string or credentials."""

    kind: str
    status: int
    message: str
    url: str


class FailedRelay(JSONResponse):
    """The gateway's own error answer when there was no upstream answer to relay; ``failure``
    says why (the gateway counts it as one of its own errors)."""

    def __init__(self, api: str | None, failure: RelayFailure) -> None:
        error_type = "timeout_error" if failure.kind == "timeout" else "api_error"
        body = error_body(api, failure.status, failure.message, error_type)
        super().__init__(body, status_code=failure.status)
        self.failure = failure


async def relay(
    client: httpx2.AsyncClient,
    *,
    method: str,
    url: str,
    headers: list[tuple[str, str]],
    body: bytes,
    api: str | None,
    sniffer: UsageSniffer | None = None,
    on_done: Callable[[int | None, int], None] | None = None,
    disconnected: Callable[[], Awaitable[None]] | None = None,
) -> Response:
    """Send the request and answer with the upstream's response as it arrives.

    ``on_done(prompt_tokens, status)`` runs once the body has been relayed (or the client left);
    not when the gateway answers itself (a :class:`FailedRelay`). ``disconnected()`` returns
    when the client has gone (:func:`client_gone`); if that happens before the upstream's answer
    begins, the upstream request is cancelled. ``api`` is the format whose error shape the
    gateway's own answers take.
    """
    # Built by hand, not with client.build_request: that would add the client's default
    # headers (Accept, Accept-Encoding, User-Agent) and its cookies.
    request = httpx2.Request(method, url, headers=headers, content=body)
    try:
        upstream = await _send(client, request, disconnected)
    except (httpx2.TimeoutException, httpx2.TransportError) as exc:
        return _broken_answer(api, method, url, exc)
    if upstream is None:
        logger.info(
            "client left before the upstream answered: %s %s cancelled", method, shown_url(url)
        )
        return Response(status_code=499)  # nobody reads it
    if sniffer is not None:
        content_type = upstream.headers.get("content-type", "")
        sniffer.streaming = content_type.startswith("text/event-stream")
        if upstream.headers.get("content-encoding", "identity") != "identity":
            sniffer = None
    chunks = upstream.aiter_raw()
    head: list[bytes] = []
    if sniffer is not None and not sniffer.streaming:
        # A whole answer was generated, and billed, before its headers came: read it (up to
        # the sniffing limit) before relaying, so its usage is known even when the client
        # hangs up at once, as `claude -p` does once it has its answer.
        try:
            await _read_head(chunks, sniffer, head)
        except (httpx2.TimeoutException, httpx2.TransportError) as exc:
            await upstream.aclose()
            return _broken_answer(api, method, url, exc, answering=True)

    closed = False

    async def close() -> None:
        nonlocal closed
        if closed:
            return
        closed = True
        await upstream.aclose()
        if on_done is not None:
            on_done(sniffer.finish() if sniffer else None, upstream.status_code)

    async def body() -> AsyncIterator[bytes]:
        for chunk in head:
            yield chunk
        async for chunk in chunks:
            # Read before it goes out: a client that closes as soon as it has the last chunk
            # cancels the relay before this generator resumes, and the provider bills the
            # answer all the same (feeding is a few microseconds; usage lines only are parsed).
            if sniffer is not None:
                sniffer.feed(chunk)
            yield chunk

    response = _RelayResponse(body(), status_code=upstream.status_code, on_close=close)
    # Raw pairs keep repeated headers (set-cookie) and the upstream's own spelling of values.
    response.raw_headers = [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in response_headers(upstream.headers.multi_items())
    ]
    return response


class _RelayResponse(StreamingResponse):
    """A streamed relay that closes its upstream as soon as it ends, however it ends.

    A client that goes away mid-stream makes the send fail; the body iterator is then left
    suspended, and would close only when garbage-collected, holding the upstream connection.
    """

    def __init__(
        self,
        content: AsyncIterator[bytes],
        *,
        status_code: int,
        on_close: Callable[[], Awaitable[None]],
    ) -> None:
        super().__init__(content, status_code=status_code)
        self._on_close = on_close

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Shielded: on a client disconnect this runs inside a cancelled scope.
            with anyio.CancelScope(shield=True):
                await self.body_iterator.aclose()  # type: ignore[attr-defined]
                await self._on_close()


#: Failures before the request reached the upstream (no connection, or a request the HTTP
#: client refused to send); any other transport error happened on a connection the upstream
#: had accepted.
_NOT_CONNECTED = (
    httpx2.ConnectError,
    httpx2.UnsupportedProtocol,
    httpx2.ProxyError,
    httpx2.LocalProtocolError,
)


def relay_failure(exc: Exception, url: str, *, answering: bool = False) -> RelayFailure:
    """What a transport error means to the client, worded to tell a wrong or down upstream
    (nothing listens there) from one that took the request and dropped it; ``answering``: the
    upstream's headers had come, its body had not all come."""
    shown = shown_url(url)
    name = type(exc).__name__
    if isinstance(exc, httpx2.ConnectTimeout):
        return RelayFailure(
            "timeout", 504, f"the gateway could not connect to the upstream {shown} in time", shown
        )
    if isinstance(exc, httpx2.TimeoutException):
        return RelayFailure("timeout", 504, f"the upstream {shown} did not answer in time", shown)
    if isinstance(exc, _NOT_CONNECTED):
        return RelayFailure(
            "unreachable", 502, f"the gateway could not reach the upstream {shown} ({name})", shown
        )
    when = "in the middle of its answer" if answering else "before answering"
    return RelayFailure(
        "closed", 502, f"the upstream {shown} closed the connection {when} ({name})", shown
    )


def _broken_answer(
    api: str | None, method: str, url: str, exc: Exception, *, answering: bool = False
) -> FailedRelay:
    """The gateway's own answer when the upstream could not be reached, dropped the
    connection, or timed out."""
    failure = relay_failure(exc, url, answering=answering)
    logger.warning("%s (%s)", failure.message, method)
    return FailedRelay(api, failure)


async def _read_head(
    chunks: AsyncIterator[bytes], sniffer: UsageSniffer, head: list[bytes]
) -> None:
    """Read a whole answer into ``head`` (feeding ``sniffer``), or its first
    ``MAX_SNIFF_BYTES``; the rest, if any, is relayed as it comes."""
    size = 0
    async for chunk in chunks:
        sniffer.feed(chunk)
        head.append(chunk)
        size += len(chunk)
        if size > MAX_SNIFF_BYTES:
            return


def shown_url(url: str) -> str:
    """The URL as the gateway shows it to a client or a log: without its query string (it can
    carry keys) and without credentials in it."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("?", 1)[0].rpartition("@")[2]
    netloc = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def no_cookies() -> CookieJar:
    """A cookie jar that never stores a cookie, for the shared upstream client: a cookie one
    upstream answer sets (``__cf_bm``, a session) must not go out with another user's request."""
    return CookieJar(policy=DefaultCookiePolicy(allowed_domains=[]))


async def client_gone(receive: Receive) -> None:
    """Return once the client has disconnected (call after the request body was read)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _send(
    client: httpx2.AsyncClient,
    request: httpx2.Request,
    disconnected: Callable[[], Awaitable[None]] | None,
) -> httpx2.Response | None:
    """The upstream's answer (headers read, body not yet), or ``None`` when the client left
    first: the request is then cancelled, which closes its upstream connection (the provider
    stops generating, and billing, for nobody)."""
    if disconnected is None:
        return await client.send(request, stream=True)
    answer: httpx2.Response | None = None
    failure: Exception | None = None

    async def send() -> None:
        nonlocal answer, failure
        try:
            answer = await client.send(request, stream=True)
        except Exception as exc:  # raised below, outside the task group
            failure = exc
        group.cancel_scope.cancel()

    async def watch() -> None:
        await disconnected()
        group.cancel_scope.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(send)
        group.start_soon(watch)
    if failure is not None:
        raise failure
    return answer
