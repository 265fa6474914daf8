"""Deadlines uvicorn lacks: for a request's headers, and for a body that stops arriving.

uvicorn closes a keep-alive connection that stays idle between requests, but nothing bounds a
client that sends its request headers a byte at a time, or that opens a connection and sends
nothing: each such connection stays open for ever (a few hundred of them and a local server is
out of sockets). :func:`guarded_protocol` subclasses uvicorn's HTTP protocol (httptools or h11,
whichever uvicorn would use) so that:

- a request's headers must be complete within ``header_timeout_s`` of the connection opening
  (or of the first byte of the next request on a kept-alive connection); otherwise the
  connection is answered 408 (if any byte of a request came) and closed;
- once the headers are in, the body must keep arriving: ``body_timeout_s`` without a byte while
  the application waits for it gets a 408 (when no answer has started) and a closed connection.

Both answers are JSON ``{"error": {"status", "type", "message"}}``, the inspector's error
shape; the application sees the client as disconnected. After a 408 the connection closes the
way nginx's ``lingering_close`` does: the answer and a FIN go out, and what the client still
sends is read and dropped for up to ``LINGER_S``. Closing at once would make the kernel answer the
client's next byte with a reset, which can discard the 408 before the client reads it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from email.utils import formatdate
from typing import Any

__all__ = ["BODY_IDLE_TIMEOUT_S", "HEADER_TIMEOUT_S", "guarded_protocol"]

#: Seconds a request's headers may take to arrive in full.
HEADER_TIMEOUT_S = 10.0
#: Seconds a request body may stop arriving before the request is refused.
BODY_IDLE_TIMEOUT_S = 30.0
#: Seconds a refused connection keeps reading (and dropping) what the client still sends.
LINGER_S = 2.0

_log = logging.getLogger("tomc.web")


def guarded_protocol(
    base: type[asyncio.Protocol],
    header_timeout_s: float = HEADER_TIMEOUT_S,
    body_timeout_s: float = BODY_IDLE_TIMEOUT_S,
) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol class ``base`` (its ``H11Protocol`` or ``HttpToolsProtocol``)
    with the deadlines of the module docstring; pass it as ``uvicorn.Config(http=...)``."""
    if header_timeout_s <= 0 or body_timeout_s <= 0:
        raise ValueError("the header and body timeouts must be positive")
    attributes = {"header_timeout_s": header_timeout_s, "body_timeout_s": body_timeout_s}
    return type(f"Guarded{base.__name__}", (_Deadlines, base), attributes)


class _Deadlines:
    """The deadline logic, over the attributes both uvicorn protocols share (``transport``,
    ``cycle``, ``flow``, ``loop``, ``server_state``, ``client``)."""

    header_timeout_s: float
    body_timeout_s: float
    _timer: asyncio.TimerHandle | None = None
    _waiting_for = ""  # "headers" or "body" while a timer runs
    _request_started = False  # a byte of a request whose headers are not complete yet
    _lingering = False  # a 408 went out; what arrives now is dropped until the close

    # uvicorn's protocol, through the base class.
    transport: asyncio.Transport
    cycle: Any
    flow: Any
    loop: asyncio.AbstractEventLoop
    server_state: Any
    client: tuple[str, int] | None

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)  # type: ignore[misc]
        self._arm("headers")

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel()
        super().connection_lost(exc)  # type: ignore[misc]

    def eof_received(self) -> bool | None:
        if self._lingering:  # the client read the 408 and closed: done
            self.transport.close()
            return None
        return super().eof_received()  # type: ignore[misc]

    def data_received(self, data: bytes) -> None:
        if self._lingering:
            return
        if self.cycle is None or self.cycle.response_complete:  # a new request's head
            self._request_started = True
            if self._timer is None:
                self._arm("headers")
        before = self.cycle
        super().data_received(data)  # type: ignore[misc]
        self._after(before)

    def on_response_complete(self) -> None:
        before = self.cycle
        super().on_response_complete()  # type: ignore[misc]
        self._after(before)  # a pipelined request may have started

    def _after(self, before: Any) -> None:
        cycle = self.cycle
        if cycle is None or self.transport.is_closing():
            return
        if cycle is not before:  # the headers of a new request are complete
            self._request_started = False
            self._cancel()
        if cycle.more_body and not cycle.response_complete:
            self._arm("body")  # again at every byte: the body must keep coming
        elif self._waiting_for == "body":
            self._cancel()

    def _arm(self, what: str) -> None:
        self._cancel()
        delay = self.header_timeout_s if what == "headers" else self.body_timeout_s
        handler = self._headers_late if what == "headers" else self._body_late
        self._timer = self.loop.call_later(delay, handler)
        self._waiting_for = what

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._waiting_for = None, ""

    def _headers_late(self) -> None:
        self._timer, self._waiting_for = None, ""
        if self.transport.is_closing():
            return
        if self.cycle is not None and not self.cycle.response_complete:
            return  # a request is being served; its answer decides what follows
        if self._request_started:
            self._refuse(f"the request headers did not arrive within {self.header_timeout_s:g} s")
        else:
            self.transport.close()

    def _body_late(self) -> None:
        self._timer, self._waiting_for = None, ""
        cycle = self.cycle
        if self.transport.is_closing() or cycle is None or not cycle.more_body:
            return
        if cycle.response_complete or cycle.response_started:
            return  # answered without the rest of the body; uvicorn drains or closes
        if self.flow.read_paused:  # the application is not reading: not the client's delay
            self._arm("body")
            return
        self._refuse(f"the request body stopped arriving for {self.body_timeout_s:g} s")
        # The application now sees a disconnect, and anything it sends is dropped.
        cycle.disconnected = True
        cycle.message_event.set()

    def _refuse(self, message: str) -> None:
        """Write a 408 straight to the socket (no answer has started on it)."""
        client = f"{self.client[0]}:{self.client[1]}" if self.client else "a client"
        _log.info("closing the connection of %s: %s", client, message)
        error = {"error": {"status": 408, "type": "RequestTimeout", "message": message}}
        body = json.dumps(error).encode("utf-8")
        headers = [
            (name, value)
            for name, value in self.server_state.default_headers
            if name.lower() != b"date"
        ]
        headers += [
            (b"date", formatdate(usegmt=True).encode("ascii")),
            (b"content-type", b"application/json; charset=utf-8"),
            (b"content-length", str(len(body)).encode("ascii")),
            (b"connection", b"close"),
        ]
        head = b"".join(name + b": " + value + b"\r\n" for name, value in headers)
        self.transport.write(b"HTTP/1.1 408 Request Timeout\r\n" + head + b"\r\n" + body)
        self._linger()

    def _linger(self) -> None:
        """Half-close after the answer, drop what still arrives, close within ``LINGER_S``."""
        self._lingering = True
        self._cancel()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self._timer = self.loop.call_later(LINGER_S, self.transport.close)
