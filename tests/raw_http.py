"""Raw HTTP/1.1 over loopback sockets, for checks a client or server library would hide.

:func:`exchange` sends request bytes as given and returns the answer as it came (header lines
in order, repeats kept). ``with RawUpstream() as upstream:`` listens on a free 127.0.0.1 port
(``upstream.url``) and records every request exactly as it arrived: its header lines in order,
with their spelling and repeats, and its body. It answers each with ``respond(request)`` (raw
response bytes, so the test decides every header, ``Date`` and ``Set-Cookie`` included). With
``hold=True`` it sends only what ``respond`` gives (nothing by default: not even a status
line), then waits and records when the client closed the connection (``closed_at``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["UPSTREAM_DATE", "RawAnswer", "RawRequest", "RawUpstream", "exchange", "json_answer"]

UPSTREAM_DATE = "Tue, 01 Jan 2030 00:00:00 GMT"


@dataclass
class RawRequest:
    """One request as its bytes arrived."""

    method: str
    target: str
    headers: list[tuple[str, str]]  # in order, as spelled, repeats kept
    body: bytes
    received_at: float
    closed_at: float | None = None  # when the client closed the connection (held requests)

    def header(self, name: str) -> list[str]:
        """Every value of ``name`` (any case), in order."""
        return [value for key, value in self.headers if key.lower() == name.lower()]


@dataclass
class RawAnswer:
    """An answer as its bytes arrived: status, header lines (in order, repeats kept), body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> list[str]:
        """Every value of ``name`` (any case), in order."""
        return [value for key, value in self.headers if key.lower() == name.lower()]


def _parse_head(head: bytes) -> tuple[str, list[tuple[str, str]]]:
    first, *lines = head.decode("latin-1").split("\r\n")
    return first, [(n, v.strip()) for n, _, v in (line.partition(":") for line in lines)]


def exchange(port: int, request: bytes, timeout_s: float = 10.0) -> RawAnswer:
    """Send ``request`` (it should say ``Connection: close``) to 127.0.0.1:``port`` and read the
    answer until the server closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, headers = _parse_head(head)
    return RawAnswer(int(status_line.split(" ")[1]), headers, body)


def json_answer(body: bytes = b'{"ok":true}', *extra: str) -> bytes:
    """A 200 JSON answer with the upstream's own ``Date`` and ``extra`` header lines."""
    head = [
        "HTTP/1.1 200 OK",
        f"Date: {UPSTREAM_DATE}",
        "Content-Type: application/json",
        f"Content-Length: {len(body)}",
        *extra,
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


class RawUpstream:
    """See the module docstring."""

    def __init__(
        self, respond: Callable[[RawRequest], bytes] | None = None, *, hold: bool = False
    ) -> None:
        self.respond = respond or (lambda request: b"" if hold else json_answer())
        self.hold = hold
        self.requests: list[RawRequest] = []
        self._socket: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._stopping = threading.Event()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> RawUpstream:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        sock.settimeout(0.1)
        self._socket, self.port = sock, sock.getsockname()[1]
        self._spawn(self._accept)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=5)
        if self._socket is not None:
            self._socket.close()

    def wait_for_request(self, timeout_s: float = 10.0) -> RawRequest:
        deadline = time.monotonic() + timeout_s
        while not self.requests:
            if time.monotonic() > deadline:
                raise AssertionError("no request reached the upstream")
            time.sleep(0.01)
        return self.requests[-1]

    def _spawn(self, target: Callable[..., None], *args: object) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept(self) -> None:
        assert self._socket is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._socket.accept()
            except TimeoutError:
                continue
            conn.settimeout(0.1)
            self._spawn(self._serve, conn)

    def _recv(self, conn: socket.socket) -> bytes | None:
        """Some bytes, ``b""`` when the peer closed, ``None`` when stopping."""
        while not self._stopping.is_set():
            try:
                return conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return b""
        return None

    def _serve(self, conn: socket.socket) -> None:
        buffer = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buffer:
                    chunk = self._recv(conn)
                    if not chunk:
                        return
                    buffer += chunk
                head, _, buffer = buffer.partition(b"\r\n\r\n")
                request_line, headers = _parse_head(head)
                method, target, _ = request_line.split(" ", 2)
                length = sum(int(v) for n, v in headers if n.lower() == "content-length")
                while len(buffer) < length:
                    chunk = self._recv(conn)
                    if not chunk:
                        return
                    buffer += chunk
                body, buffer = buffer[:length], buffer[length:]
                request = RawRequest(method, target, headers, body, time.monotonic())
                self.requests.append(request)
                conn.sendall(self.respond(request))
                if self.hold:
                    while (chunk := self._recv(conn)) is not None and chunk:
                        pass
                    if chunk is not None:
                        request.closed_at = time.monotonic()
                    return
