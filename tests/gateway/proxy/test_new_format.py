"""A fourth wire format through the real gateway, with nothing in ``src`` knowing it.

:mod:`chat.dialects.gemini_like` defines a Gemini ``generateContent``-like format and this test
registers it (one line). The gateway then routes its requests to its upstream (a loopback fake
of Gemini's API), finds the model in the URL, rewrites the old history of a long conversation
and reuses the memory, relays usage from JSON answers and streams into its status figures, and
answers its own errors in that format's shape.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from chat.dialects.gemini_like import GeminiLike, from_chat, gemini_path, registered
from dialect_fixtures import chat_agent_request, request_tokens
from fake_providers import read_request, serve_in_thread, stop_served
from tomc._gateway.proxy.app import Gateway, create_gateway_app
from tomc._gateway.settings import GatewaySettings
from tomc._http.server import AppServer

MODEL = "gemini-test-pro"
KEY = "AIza-test-key-4242"
TEXT = "The retry cap is now read from RETRY_CAP."


@dataclass
class Seen:
    """One request the fake Gemini received, and the bytes it sent back."""

    path: str
    query: str
    headers: dict[str, str]
    raw: bytes
    body: Any
    sent: list[bytes] = field(default_factory=list)


class FakeGemini:
    """A loopback stand-in for Gemini's API: ``generateContent`` answers JSON,
    ``streamGenerateContent?alt=sse`` server-sent events (every chunk with the usage so far, the
    last with a ``finishReason``); ``error`` answers Google's error JSON instead."""

    def __init__(self) -> None:
        self.requests: list[Seen] = []
        self.usage = {"promptTokenCount": 1234, "cachedContentTokenCount": 0}
        self.output_tokens = 56
        self.error: tuple[int, str, str] | None = None
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    def __enter__(self) -> FakeGemini:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self._socket = sock
        app = Starlette(routes=[Route("/{path:path}", self._handle, methods=["GET", "POST"])])
        self._server, self._thread = serve_in_thread(app, sock, "fake-gemini")
        return self

    def __exit__(self, *exc: object) -> None:
        stop_served(self._server, self._thread, self._socket)

    @property
    def url(self) -> str:
        assert self._socket is not None
        return f"http://127.0.0.1:{self._socket.getsockname()[1]}"

    @property
    def last(self) -> Seen:
        return self.requests[-1]

    def _chunk(self, text: str, *, last: bool) -> dict[str, Any]:
        usage = dict(self.usage)
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
        if last:
            candidate["finishReason"] = "STOP"
            usage["candidatesTokenCount"] = self.output_tokens
        usage["totalTokenCount"] = usage["promptTokenCount"] + usage.get("candidatesTokenCount", 0)
        return {"candidates": [{**candidate, "index": 0}], "usageMetadata": usage}

    async def _handle(self, request: Request) -> Response:
        raw, body, headers = await read_request(request)
        seen = Seen(request.url.path, request.url.query, headers, raw, body)
        with self._lock:
            self.requests.append(seen)
        if self.error is not None:
            status, message, name = self.error
            error = {"error": {"code": status, "message": message, "status": name}}
            seen.sent.append(json.dumps(error).encode())
            return Response(seen.sent[0], status, media_type="application/json")
        if request.url.path.endswith(":streamGenerateContent"):
            pieces = [TEXT[i : i + 9] for i in range(0, len(TEXT), 9)]
            for number, piece in enumerate(pieces):
                chunk = self._chunk(piece, last=number == len(pieces) - 1)
                seen.sent.append(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
            return StreamingResponse(iter(seen.sent), media_type="text/event-stream")
        seen.sent.append(json.dumps(self._chunk(TEXT, last=True)).encode())
        return Response(seen.sent[0], media_type="application/json")


@pytest.fixture
def gemini() -> Iterator[GeminiLike]:
    """The format, registered for one test (the one line a new format needs)."""
    with registered() as dialect:
        yield dialect


@pytest.fixture
def upstream(gemini: GeminiLike) -> Iterator[FakeGemini]:
    with FakeGemini() as fake:
        yield fake


@contextmanager
def gateway_on(url: str, **fields: Any) -> Iterator[tuple[str, Gateway]]:
    settings = GatewaySettings(upstreams={"gemini": url}, **fields)
    gateway = Gateway(settings, timeout=httpx2.Timeout(10.0, read=5.0))
    app = create_gateway_app(settings, gateway=gateway)
    with AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server:
        yield server.url.rstrip("/"), gateway


def post(base: str, body: Any, *, stream: bool = False) -> httpx2.Response:
    """What a Gemini client sends: the model in the URL, the key in ``x-goog-api-key``."""
    with httpx2.Client(trust_env=False, timeout=30.0) as http:
        return http.post(
            base + gemini_path(MODEL, stream=stream),
            params={"alt": "sse"} if stream else None,
            headers={"x-goog-api-key": KEY},
            json=body,
        )


def conversation(gateway: Gateway) -> dict[str, Any]:
    (only,) = gateway.status()["conversations"]
    return only


def traffic(gateway: Gateway, requests: int) -> dict[str, Any]:
    """The ledger's figures once it holds ``requests`` requests (each is recorded just after
    its last byte went out, so the client may ask first)."""
    deadline = time.monotonic() + 10
    while True:
        figures = gateway.status()["traffic"]
        if figures["totals"]["requests"] >= requests or time.monotonic() > deadline:
            return figures
        time.sleep(0.02)


def test_a_long_conversation_is_routed_rewritten_and_its_memory_reused(upstream, gemini):
    body = from_chat(chat_agent_request(14))
    target = int(request_tokens("gemini", body) * 0.6)
    with gateway_on(upstream.url, context_target=target) as (base, gateway):
        first = post(base, body)
        sent = upstream.last
        second = post(base, body)
    assert first.status_code == 200 and first.content == sent.sent[0]
    assert sent.path == gemini_path(MODEL) and sent.headers["x-goog-api-key"] == KEY
    assert "model" not in sent.body  # found in the URL for the session, never added to the body
    contents = sent.body["contents"]
    assert len(contents) < len(body["contents"]) and gemini.validate(contents) == []
    assert contents[0]["parts"][0]["text"].startswith("[TOMC memory of")
    assert contents[-4:] == body["contents"][-4:]  # the current task stays raw
    assert {k: v for k, v in sent.body.items() if k != "contents"} == {
        k: v for k, v in body.items() if k != "contents"
    }
    assert second.status_code == 200 and upstream.last.body == sent.body  # the prefix is reused
    shown = conversation(gateway)
    assert (shown["api"], shown["model"]) == ("gemini", MODEL)
    assert shown["conversation"].startswith("gemini:") and shown["conversation"].endswith(MODEL)
    assert shown["decisions"] == {"compiled": 1, "reused": 1}
    assert shown["tomc_tokens_before"] > shown["tomc_tokens_after"] > 0
    assert shown["context_target"] == target


def test_usage_of_json_answers_and_streams_reaches_the_status_figures(upstream):
    upstream.usage = {"promptTokenCount": 10_000, "cachedContentTokenCount": 9000}
    upstream.output_tokens = 77
    body = from_chat(chat_agent_request(2))
    # No bundled profile knows the model: a target gives the session its window.
    with gateway_on(upstream.url, context_target=200_000) as (base, gateway):
        streamed = post(base, body, stream=True)
        assert streamed.content == b"".join(upstream.last.sent)  # relayed byte for byte
        assert upstream.last.query == "alt=sse"
        post(base, body)
        figures = traffic(gateway, 2)
        session = gateway.store.conversations()[0].session
    assert figures["totals"]["requests"] == figures["totals"]["requests_with_usage"] == 2
    assert figures["totals"]["prompt_tokens"] == 2 * 10_000
    (shown,) = figures["conversations"]
    assert (shown["api"], shown["model"]) == ("gemini", MODEL)
    assert shown["output_tokens"] == 2 * 77 and shown["cache_read_tokens"] == 2 * 9000
    assert shown["billed_input"] == pytest.approx(2 * (1000 + 0.1 * 9000))  # reads at 0.1
    # The stream's prompt size reached the session: the next request's context hint.
    assert (session.decisions[-1].context_hint, session.decisions[-1].hint_source) == (
        10_000,
        "usage",
    )


def test_errors_come_back_in_the_formats_own_shape(upstream, monkeypatch):
    body = from_chat(chat_agent_request(2))
    with gateway_on("http://127.0.0.1:9") as (base, _):
        unreachable = post(base, body)
    assert unreachable.status_code == 502
    error = unreachable.json()["error"]
    assert (error["code"], error["status"]) == (502, "UNAVAILABLE")
    assert "could not reach the upstream" in error["message"]

    upstream.error = (429, "Resource has been exhausted (e.g. check quota).", "RESOURCE_EXHAUSTED")
    with gateway_on(upstream.url) as (base, gateway):
        refused = post(base, body)
        assert (refused.status_code, refused.content) == (429, upstream.last.sent[0])

        def explode(request: Any) -> Any:
            raise RuntimeError("kernel bug")

        monkeypatch.setattr(gateway, "proxy", explode)
        broken = post(base, body)
    assert broken.status_code == 502
    assert broken.json() == {
        "error": {
            "code": 502,
            "message": "TOMC gateway error (RuntimeError)",
            "status": "UNAVAILABLE",
        }
    }


def test_other_paths_of_the_format_go_to_its_upstream_untouched(upstream):
    count = json.dumps({"contents": [{"role": "user", "parts": [{"text": "How many?"}]}]}).encode()
    with gateway_on(upstream.url) as (base, gateway), httpx2.Client(trust_env=False) as http:
        listed = http.get(f"{base}/v1beta/models", params={"pageSize": "5"})
        assert listed.status_code == 200 and upstream.last.query == "pageSize=5"
        counted = http.post(f"{base}/v1beta/models/{MODEL}:countTokens", content=count)
        assert counted.status_code == 200 and upstream.last.raw == count
    assert [seen.path for seen in upstream.requests] == [
        "/v1beta/models",
        f"/v1beta/models/{MODEL}:countTokens",
    ]
    assert gateway.status()["passthrough_paths"] == 2
    assert gateway.status()["conversations"] == []
