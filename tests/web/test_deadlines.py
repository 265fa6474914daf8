"""Slow clients are cut: request headers must arrive within a deadline, and a body must keep
arriving; a connection that sends nothing is closed. Raw sockets, so every byte is the test's.

The servers here use 1 s deadlines (the defaults are longer) to keep the tests quick, and run
each test over both of uvicorn's HTTP/1.1 implementations.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest
from uvicorn.protocols.http.h11_impl import H11Protocol

from tomc._http.server import AppServer
from tomc.web._app import create_app

DEADLINE_S = 1.0


@pytest.fixture(params=["httptools", "h11"])
def port(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """An inspector with 1 s deadlines, over each of uvicorn's HTTP/1.1 parsers."""
    if request.param == "h11":  # uvicorn's pure-Python parser, where httptools has no wheel
        monkeypatch.setattr("tomc._http.server.AutoHTTPProtocol", H11Protocol)
    server = AppServer(
        create_app(),
        "127.0.0.1",
        0,
        quiet=True,
        header_timeout_s=DEADLINE_S,
        body_timeout_s=DEADLINE_S,
    )
    with server:
        yield server.port


def read_until_closed(sock: socket.socket, limit_s: float = 10.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and when it closed."""
    sock.settimeout(limit_s)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data, time.monotonic()


def test_headers_sent_a_byte_at_a_time_are_cut_with_a_408(port: int) -> None:
    head = f"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: {'a' * 200}"
    with socket.create_connection(("127.0.0.1", port)) as sock:
        started = time.monotonic()
        sock.settimeout(0.2)
        answer = b""
        for byte in head.encode():  # never finished: a byte every 0.05 s
            try:
                sock.sendall(bytes([byte]))
                answer += sock.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                break
            if answer:
                break
        rest, closed_at = read_until_closed(sock)
    answer += rest
    assert DEADLINE_S * 0.9 <= closed_at - started < DEADLINE_S + 1.5
    assert answer.startswith(b"HTTP/1.1 408 ")
    body = json.loads(answer.partition(b"\r\n\r\n")[2])
    assert body["error"]["type"] == "RequestTimeout"


def test_a_client_still_sending_after_the_408_reads_it_and_a_clean_close(port: int) -> None:
    # A socket closed outright answers later bytes with a reset, which can discard the 408.
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a")
        time.sleep(DEADLINE_S + 0.4)  # the 408 is out
        for _ in range(3):
            sock.sendall(b"aaaa")
            time.sleep(0.05)
        answer, _ = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 ")


def test_a_connection_that_sends_nothing_is_closed(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        started = time.monotonic()
        answer, closed_at = read_until_closed(sock)
    assert answer == b""
    assert closed_at - started < DEADLINE_S + 1.5


def test_many_slow_connections_are_all_cut_and_others_are_served(port: int) -> None:
    slow = []
    for _ in range(300):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow.append(sock)
    started = time.monotonic()
    try:
        request = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(request)
            answer, _ = read_until_closed(sock)
        assert answer.startswith(b"HTTP/1.1 200 ")
        for sock in slow:
            answer, _ = read_until_closed(sock)
            assert answer.startswith(b"HTTP/1.1 408 ")
        assert time.monotonic() - started < DEADLINE_S + 3.0
    finally:
        for sock in slow:
            sock.close()


def test_a_stalled_body_gets_a_408(port: int) -> None:
    head = (
        f"POST /api/compile HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head.encode() + b'{"history": "')
        stalled_at = time.monotonic()
        answer, closed_at = read_until_closed(sock)
    assert answer.startswith(b"HTTP/1.1 408 ")
    assert closed_at - stalled_at < DEADLINE_S + 1.5


def test_keep_alive_connections_still_work(port: int) -> None:
    request = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        for number in range(2):
            if number:
                time.sleep(DEADLINE_S * 1.5)  # idle between requests: uvicorn's keep-alive rules
            sock.sendall(request)
            answer = b""
            while not answer.endswith(b"}"):
                answer += sock.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200 ")
