"""What the relay puts on the wire: the client's headers and no others, the upstream's answer
and no other, no cookie jar shared between clients, no upstream request left running for a
client that went away, and, when there is no answer to relay, the gateway's own error naming
the upstream it tried and what went wrong (not reached, or the connection dropped).

The wire checks use raw sockets on both sides (:mod:`raw_http`): a client library would add its
own headers and hide repeated ones.
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import httpx2
import openai
import pytest

from dialect_fixtures import chat_agent_request, claude_code_request
from gateway_helpers import free_port, serve_gateway, wait_for
from raw_http import UPSTREAM_DATE, RawUpstream, exchange, json_answer
from tomc._gateway.proxy.metering.meter import UsageSniffer
from tomc._gateway.proxy.relay import forward_headers, relay

KEY = "sk-ant-relay-test-key"


# ---- forward_headers ------------------------------------------------------------------------


def test_forward_headers_keeps_end_to_end_headers_as_sent() -> None:
    sent = [
        ("Host", "127.0.0.1:8787"),
        ("X-Api-Key", KEY),
        ("x-repeat", "a"),
        ("Connection", "keep-alive, X-Hop"),
        ("X-Hop", "only for this connection"),
        ("Keep-Alive", "timeout=5"),
        ("Content-Length", "12"),
        ("Transfer-Encoding", "chunked"),
        ("TE", "trailers"),
        ("Proxy-Authorization", "Basic cHJveHk6cGFzcw=="),
        ("Upgrade", "h2c"),
        ("x-repeat", "b"),
        ("Accept-Encoding", "gzip"),
    ]
    assert forward_headers(sent) == [
        ("X-Api-Key", KEY),
        ("x-repeat", "a"),
        ("x-repeat", "b"),
        ("Accept-Encoding", "gzip"),
    ]


def test_forward_headers_joins_an_added_value_to_the_clients_list_once() -> None:
    beta = "thinking-binding-controls-2026-08-01"
    sent = [("Anthropic-Beta", "claude-code-20250219, interleaved-thinking-2025-05-14")]
    joined = forward_headers(sent, {"anthropic-beta": beta})
    assert joined == [
        ("Anthropic-Beta", f"claude-code-20250219,interleaved-thinking-2025-05-14,{beta}")
    ]
    assert forward_headers(joined, {"anthropic-beta": beta}) == joined
    assert forward_headers([("x-api-key", KEY)], {"anthropic-beta": beta}) == [
        ("x-api-key", KEY),
        ("anthropic-beta", beta),
    ]
    assert forward_headers([("x-api-key", KEY)]) == [("x-api-key", KEY)]


# ---- requests on the wire -------------------------------------------------------------------


def raw_post(port: int, path: str, body: bytes, *headers: str) -> bytes:
    lines = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        *headers,
        f"Content-Length: {len(body)}",
        "Connection: close",
    ]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def test_the_upstream_gets_the_clients_headers_and_nothing_more() -> None:
    body = json.dumps(claude_code_request(2, thinking=False)).encode()
    client_headers = [
        ("X-Api-Key", KEY),
        ("anthropic-version", "2023-06-01"),
        ("Content-Type", "application/json"),
        ("x-repeat", "one"),
        ("x-repeat", "two"),
    ]
    sent = [f"{name}: {value}" for name, value in client_headers]
    with RawUpstream() as upstream, serve_gateway(upstream.url) as (server, _):
        extra = ("x-tomc-thinking-prefix: passthrough", "Keep-Alive: timeout=5")
        answer = exchange(server.port, raw_post(server.port, "/v1/messages", body, *sent, *extra))
        assert answer.status == 200
        arrived = upstream.wait_for_request()
    assert arrived.body == body
    assert arrived.header("host") == [f"127.0.0.1:{upstream.port}"]
    assert arrived.header("content-length") == [str(len(body))]
    others = [(n, v) for n, v in arrived.headers if n.lower() not in ("host", "content-length")]
    # In order, repeats kept (names in lower case, as HTTP/1.1 servers hand them to an app);
    # no Accept-Encoding, Accept, User-Agent or Connection of the gateway's own HTTP client.
    assert others == [(name.lower(), value) for name, value in client_headers]


def test_the_answer_is_the_upstreams_with_one_date() -> None:
    upstream_headers = [
        "X-Request-Id: req_42",
        "Set-Cookie: __cf_bm=abc123; Path=/; HttpOnly",
        "Set-Cookie: other=1; Path=/",
        "Vary: Accept-Encoding",
    ]
    payload = b'{"answer":42}'
    with (
        RawUpstream(lambda request: json_answer(payload, *upstream_headers)) as upstream,
        serve_gateway(upstream.url) as (server, _),
    ):
        answer = exchange(
            server.port, raw_post(server.port, "/v1/models", b"", f"X-Api-Key: {KEY}")
        )
    assert answer.status == 200 and answer.body == payload
    assert answer.header("date") == [UPSTREAM_DATE]
    # Framing aside (the client asked to close), exactly what the upstream sent, in its order.
    relayed = [(n.lower(), v) for n, v in answer.headers if n.lower() != "connection"]
    assert relayed == [
        ("date", UPSTREAM_DATE),
        ("content-type", "application/json"),
        ("content-length", str(len(payload))),
        ("x-request-id", "req_42"),
        ("set-cookie", "__cf_bm=abc123; Path=/; HttpOnly"),
        ("set-cookie", "other=1; Path=/"),
        ("vary", "Accept-Encoding"),
    ]


def test_the_gateways_own_answers_carry_one_date() -> None:
    with RawUpstream() as upstream, serve_gateway(upstream.url) as (server, _):
        request = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        answer = exchange(server.port, request.encode())
    assert answer.status == 200
    assert len(answer.header("date")) == 1


def test_cookies_are_never_kept_between_clients() -> None:
    def respond(request) -> bytes:
        return json_answer(b'{"object":"list","data":[]}', "Set-Cookie: __cf_bm=first; Path=/")

    with RawUpstream(respond) as upstream, serve_gateway(upstream.url) as (server, _):
        base = server.url.rstrip("/")
        for key in ("sk-user-a", "sk-user-b"):
            http = httpx2.Client(trust_env=False)  # each user its own client and cookie jar
            openai.OpenAI(api_key=key, base_url=f"{base}/v1", http_client=http).models.list()
        exchange(
            server.port,
            raw_post(server.port, "/v1/models", b"", "Authorization: Bearer c", "Cookie: mine=1"),
        )
    first, second, third = upstream.requests
    assert first.header("authorization") == ["Bearer sk-user-a"]
    assert second.header("authorization") == ["Bearer sk-user-b"]
    assert second.header("cookie") == []  # user a's cookie never reaches the upstream for b
    assert third.header("cookie") == ["mine=1"]  # a client's own cookie goes as sent


# ---- clients that go away -------------------------------------------------------------------


def test_a_client_that_leaves_before_the_answer_cancels_the_upstream_request() -> None:
    body = json.dumps(claude_code_request(2, thinking=False)).encode()
    with (
        RawUpstream(hold=True) as upstream,
        serve_gateway(upstream.url, read_timeout_s=60.0) as (server, _),
    ):
        client = socket.create_connection(("127.0.0.1", server.port))
        client.sendall(raw_post(server.port, "/v1/messages", body, f"X-Api-Key: {KEY}"))
        held = upstream.wait_for_request()
        client.close()
        left_at = time.monotonic()
        wait_for(lambda: held.closed_at is not None, timeout_s=5.0)
    assert held.closed_at is not None and held.closed_at - left_at < 1.0


def test_a_client_that_leaves_mid_stream_cancels_the_upstream_request() -> None:
    head = (
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    event = b'event: ping\ndata: {"type":"ping"}\n\n'
    first = head.encode() + b"%x\r\n%s\r\n" % (len(event), event)
    body = json.dumps({**claude_code_request(2, thinking=False), "stream": True}).encode()
    with (
        RawUpstream(lambda request: first, hold=True) as upstream,
        serve_gateway(upstream.url, read_timeout_s=60.0) as (server, _),
    ):
        client = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        client.sendall(raw_post(server.port, "/v1/messages", body, f"X-Api-Key: {KEY}"))
        received = b""
        while b"ping" not in received:
            received += client.recv(65536)
        held = upstream.requests[-1]
        client.close()
        left_at = time.monotonic()
        wait_for(lambda: held.closed_at is not None, timeout_s=5.0)
    assert held.closed_at is not None and held.closed_at - left_at < 1.0


def test_a_stalled_body_gets_a_408_and_never_goes_upstream() -> None:
    head = raw_post(9, "/v1/messages", b"", f"X-Api-Key: {KEY}").replace(
        b"Content-Length: 0", b"Content-Length: 5000"
    )
    with (
        RawUpstream() as upstream,
        serve_gateway(upstream.url, header_timeout_s=1.0, body_timeout_s=1.0) as (server, _),
    ):
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            client.sendall(head + b'{"model": "claude-opus-4-8", "messages": [')
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
        assert upstream.requests == []
    assert answer.startswith(b"HTTP/1.1 408 ")


ANSWER = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "content": [{"type": "text", "text": "done"}],
    "usage": {"input_tokens": 1234, "output_tokens": 56},
}


def relay_to_a_client_that_leaves(
    upstream_url: str, leaves_on: str, read_timeout_s: float = 10.0
) -> tuple[list[tuple[int | None, int]], UsageSniffer, list[dict]]:
    """Relay one Messages request to a client that hangs up as soon as it gets a message of
    type ``leaves_on`` (``http.response.start``, or ``http.response.body`` with bytes); what
    ``on_done`` got, the sniffer, and what the client was sent."""
    done: list[tuple[int | None, int]] = []
    sent: list[dict] = []
    sniffer = UsageSniffer("messages")

    async def scenario() -> None:
        gone = anyio.Event()

        async def receive() -> dict:
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict) -> None:
            sent.append(message)
            if message["type"] == leaves_on and (
                leaves_on != "http.response.body" or message.get("body")
            ):
                gone.set()
                await anyio.sleep(0.2)  # the disconnect cancels the relay right here

        timeout = httpx2.Timeout(10.0, read=read_timeout_s)
        async with httpx2.AsyncClient(trust_env=False, timeout=timeout) as client:
            response = await relay(
                client,
                method="POST",
                url=f"{upstream_url}/v1/messages",
                headers=[("content-type", "application/json")],
                body=b"{}",
                api="messages",
                sniffer=sniffer,
                on_done=lambda tokens, status: done.append((tokens, status)),
            )
            scope = {"type": "http", "asgi": {"spec_version": "2.3"}, "headers": []}
            await response(scope, receive, send)

    anyio.run(scenario)
    return done, sniffer, sent


# `claude -p` exits as soon as it has its answer, and urllib-like clients hang up after the
# headers: the provider bills the whole answer all the same, so its usage must still be read.


def test_a_client_that_closes_on_the_last_chunk_still_has_its_usage_read() -> None:
    with RawUpstream(lambda request: json_answer(json.dumps(ANSWER).encode())) as upstream:
        done, sniffer, _ = relay_to_a_client_that_leaves(upstream.url, "http.response.body")
    assert done == [(1234, 200)]
    assert sniffer.usage is not None and sniffer.usage.output_tokens == 56


def test_a_client_that_leaves_after_the_headers_still_has_its_usage_read() -> None:
    with RawUpstream(lambda request: json_answer(json.dumps(ANSWER).encode())) as upstream:
        done, sniffer, sent = relay_to_a_client_that_leaves(upstream.url, "http.response.start")
    assert [m["type"] for m in sent] == ["http.response.start"]  # no body went out
    assert done == [(1234, 200)]
    assert sniffer.usage is not None and sniffer.usage.output_tokens == 56


def test_a_whole_answer_whose_body_stops_is_the_gateways_504_not_a_truncated_relay() -> None:
    body = json.dumps(ANSWER).encode()
    cut = json_answer(body)[: -len(body) // 2]  # Content-Length says more than comes
    with RawUpstream(lambda request: cut) as upstream:
        done, _, sent = relay_to_a_client_that_leaves(upstream.url, "never", read_timeout_s=0.5)
    assert sent[0]["type"] == "http.response.start" and sent[0]["status"] == 504
    assert json.loads(sent[1]["body"])["error"]["type"] == "timeout_error"
    assert done == []  # the gateway answered itself; nothing relayed


# ---- no answer to relay: the gateway's own error --------------------------------------------


@contextmanager
def dropping_upstream(reply: bytes = b"", *, reset: bool = False) -> Iterator[tuple[str, list]]:
    """An upstream that accepts each connection, reads one whole request, sends ``reply``
    (nothing by default) and closes the connection: with ``reset``, abortively (an RST, as a
    crashed server or a load balancer that gave up sends). Yields its URL and the requests it
    took."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    taken: list[bytes] = []
    stopping = threading.Event()

    def serve() -> None:
        while not stopping.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(10)
                data = b""
                while b"\r\n\r\n" not in data and (chunk := conn.recv(65536)):
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                while length and len(body) < int(length[1]) and (chunk := conn.recv(65536)):
                    body += chunk
                taken.append(head + b"\r\n\r\n" + body)
                conn.sendall(reply)
                if reset:
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", taken
    finally:
        stopping.set()
        thread.join(5)
        listener.close()


CLAUDE = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}


def test_an_upstream_nobody_listens_on_gets_a_502_naming_the_url_in_the_clients_shape() -> None:
    port = free_port()  # bound, then closed: nothing listens there
    tried = f"http://127.0.0.1:{port}"
    # Credentials in the configured URL and keys in the query never reach the client's eyes.
    with (
        serve_gateway(f"http://tomc:hunter2@127.0.0.1:{port}") as (server, _),
        httpx2.Client(trust_env=False, timeout=30) as http,
    ):
        base = server.url.rstrip("/")
        body = claude_code_request(2, thinking=False)
        messages = http.post(f"{base}/v1/messages?beta=true&key=k1", json=body, headers=CLAUDE)
        chat = http.post(
            f"{base}/v1/chat/completions",
            json=chat_agent_request(2),
            headers={"authorization": "Bearer sk-test"},
        )
        counted = http.post(
            f"{base}/v1/messages/count_tokens",
            json={"model": body["model"], "messages": body["messages"]},
            headers=CLAUDE,
        )
    assert (messages.status_code, chat.status_code, counted.status_code) == (502, 502, 502)
    assert messages.json() == {
        "type": "error",
        "error": {
            "type": "api_error",
            "message": f"the gateway could not reach the upstream {tried}/v1/messages "
            "(ConnectError)",
        },
    }
    assert chat.json() == {
        "error": {
            "message": f"the gateway could not reach the upstream {tried}/v1/chat/completions "
            "(ConnectError)",
            "type": "api_error",
            "param": None,
            "code": None,
        }
    }
    # A path only forwarded answers in the shape of the provider it goes to (Anthropic's).
    assert counted.json()["type"] == "error"
    assert f"{tried}/v1/messages/count_tokens" in counted.json()["error"]["message"]
    for answer in (messages, chat, counted):
        assert "hunter2" not in answer.text and "k1" not in answer.text


@pytest.mark.parametrize("reset", [False, True], ids=["closed", "reset"])
def test_an_upstream_that_drops_the_connection_is_told_apart_from_one_not_reached(reset) -> None:
    with (
        dropping_upstream(reset=reset) as (url, taken),
        serve_gateway(url) as (server, gateway),
        httpx2.Client(trust_env=False, timeout=30) as http,
    ):
        body = claude_code_request(2, thinking=False)
        answer = http.post(f"{server.url.rstrip('/')}/v1/messages", json=body, headers=CLAUDE)
        traffic = gateway.ledger.settled_traffic(20)
    assert len(taken) == 1  # the upstream had the request
    assert answer.status_code == 502
    error = answer.json()["error"]
    assert error["type"] == "api_error"
    assert error["message"].startswith(
        f"the upstream {url}/v1/messages closed the connection before answering ("
    )
    assert "could not reach" not in error["message"]
    assert traffic["totals"]["gateway_error_kinds"] == {"closed": 1}
    (conversation,) = traffic["conversations"]
    assert conversation["gateway_errors"] == 1 and conversation["upstream_error_count"] == 0


def test_an_upstream_that_drops_the_connection_mid_answer_is_said_so() -> None:
    whole = json.dumps(ANSWER).encode()
    cut = json_answer(whole)[: -len(whole) // 2]  # Content-Length says more than comes
    with (
        dropping_upstream(cut) as (url, _),
        serve_gateway(url) as (server, _),
        httpx2.Client(trust_env=False, timeout=30) as http,
    ):
        body = claude_code_request(2, thinking=False)
        answer = http.post(f"{server.url.rstrip('/')}/v1/messages", json=body, headers=CLAUDE)
    assert answer.status_code == 502
    assert answer.json()["error"]["message"].startswith(
        f"the upstream {url}/v1/messages closed the connection in the middle of its answer ("
    )
