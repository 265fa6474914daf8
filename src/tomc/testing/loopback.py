"""What the fake provider is made of besides its answers: a uvicorn server on a bound loopback
socket in a daemon thread, the reading of a request, and the :class:`Recorded` form of each
request and of what went back (the test suite's other loopback fakes use the same pieces).
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.requests import Request

from .._http.server import claim_port

__all__ = [
    "LoopbackFake",
    "Recorded",
    "Served",
    "read_request",
    "serve_in_thread",
    "serve_loopback",
    "stop_served",
]


async def read_request(request: Request) -> tuple[bytes, Any, dict[str, str]]:
    """A request's raw body, its JSON (``None`` when it is not JSON) and its headers, repeated
    ones joined with ", "."""
    raw = await request.body()
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    headers: dict[str, str] = {}
    for name, value in request.headers.items():
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return raw, body, headers


def serve_in_thread(
    app: Any, sock: socket.socket, name: str
) -> tuple[uvicorn.Server, threading.Thread]:
    """Serve ``app`` on the bound socket from a daemon thread; return once it answers."""
    config = uvicorn.Config(
        app,
        http="h11",
        loop="asyncio",
        ws="none",
        lifespan="off",
        log_config=None,
        log_level="critical",  # a deliberate disconnect is an "error" to uvicorn
        access_log=False,
        timeout_graceful_shutdown=2,
        server_header=False,
        date_header=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the {name} did not start")
        time.sleep(0.005)
    return server, thread


def stop_served(
    server: uvicorn.Server | None, thread: threading.Thread | None, sock: socket.socket | None
) -> None:
    """Stop what :func:`serve_in_thread` started (any part may be missing) and close its socket."""
    if server is not None:
        server.should_exit = True
    if thread is not None:
        thread.join(timeout=10)
    if sock is not None:
        sock.close()


@dataclass(frozen=True)
class Served:
    """An app served on 127.0.0.1 from a daemon thread (:func:`serve_loopback`)."""

    port: int
    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket

    def stop(self) -> None:
        stop_served(self.server, self.thread, self.sock)


def serve_loopback(app: Any, name: str, *, port: int = 0, backlog: int = 128) -> Served:
    """Bind 127.0.0.1:``port`` (0: any free port) and serve ``app`` there; return once it
    answers. A port that cannot be bound raises :class:`OSError` and leaves nothing open."""
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on accepted sockets whose proto
    # says TCP. With proto 0, Nagle holds the body behind the headers until the client's
    # delayed ACK, about 40 ms per response on Linux.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        claim_port(sock)
        sock.bind(("127.0.0.1", port))
        sock.listen(backlog)
        server, thread = serve_in_thread(app, sock, name)
    except BaseException:
        sock.close()
        raise
    return Served(sock.getsockname()[1], server, thread, sock)


class LoopbackFake:
    """What a fake served on loopback shares: its port and URLs, how it starts (``_serve``, from
    its ``__enter__``) and how it stops (leaving the ``with`` block)."""

    port: int = 0
    _served: Served | None = None

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI SDK's ``base_url`` (``.../v1``)."""
        return f"{self.root_url}/v1"

    def _serve(self, app: Any, name: str, *, port: int = 0, backlog: int = 128) -> None:
        self._served = serve_loopback(app, name, port=port, backlog=backlog)
        self.port = self._served.port

    def __exit__(self, *exc: object) -> None:
        if self._served is not None:
            self._served.stop()


@dataclass
class Recorded:
    """One request as it arrived, and everything the fake sent back for it."""

    method: str
    path: str
    query: str
    headers: dict[str, str]  # names lower-cased; repeated headers joined with ", "
    raw_headers: list[tuple[str, str]]
    raw: bytes
    body: Any  # the parsed JSON body (None when empty or not JSON)
    received_at: float
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    sent: list[bytes] = field(default_factory=list)  # one entry per SSE event, or the whole body
    sent_at: list[float] = field(default_factory=list)
    complete: bool = False  # the whole answer went out
    client_disconnected: bool = False

    @property
    def target(self) -> str:
        return f"{self.path}?{self.query}" if self.query else self.path

    @property
    def streamed(self) -> bool:
        return self.response_headers.get("content-type", "").startswith("text/event-stream")

    def events(self) -> list[tuple[str | None, Any]]:
        """The SSE events sent, as ``(event name, parsed data)``; ``[DONE]`` stays a string."""
        out = []
        for chunk in self.sent:
            name, data = None, None
            for line in chunk.decode().splitlines():
                if line.startswith("event: "):
                    name = line[len("event: ") :]
                elif line.startswith("data: "):
                    data = line[len("data: ") :]
            out.append((name, data if data == "[DONE]" else json.loads(data or "null")))
        return out

    def json(self) -> Any:
        """The JSON body sent back (non-streaming answers)."""
        return json.loads(b"".join(self.sent))
