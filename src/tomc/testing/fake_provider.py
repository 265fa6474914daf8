"""One fake LLM provider over loopback HTTP, speaking the real wire formats, recording everything.

From a shell, to try the gateway or a LiteLLM proxy offline::

    python -m tomc.testing.fake_provider [--port 8790]

prints the URLs it serves (OpenAI's base URL ``.../v1``, Anthropic's root) and answers every
request with a fixed reply in the format asked for, until Ctrl-C. Any API key is accepted; nothing
leaves the machine.

In Python (the test suite), ``with FakeProvider() as fake:`` serves a Starlette app under uvicorn
in a background thread on a free 127.0.0.1 port. Point a client at it:

- ``openai.OpenAI(base_url=fake.base_url)`` (``.../v1``): Chat Completions and Responses;
- ``anthropic.Anthropic(base_url=fake.anthropic_url)`` (the root, as ``ANTHROPIC_BASE_URL``);
- ``fake.chatgpt_url`` (``.../backend-api/codex``): stands for the ChatGPT endpoint Codex uses
  when signed in with a ChatGPT account.

Routes, under both ``/v1`` and ``/backend-api/codex``: ``POST chat/completions``, ``POST messages``
(``?beta=true`` accepted), ``POST messages/count_tokens``, ``POST responses``,
``POST responses/compact`` and ``GET models``. Anything else gets a 404 in the OpenAI error shape.

What it answers is ``fake.reply`` (a :class:`~tomc.testing.replies.Reply`), or the next one
queued with :meth:`FakeProvider.script`: the text, the kind of reply, usage figures, an error
with the provider's own error JSON (as the status, or as an error event mid-stream), a delay
between SSE events, a disconnect after N events, a stall. Like the real APIs it rejects requests
that break the format's tool pairing rules, and Anthropic's ``thinking.block_binding`` without
its beta header (:mod:`tomc.testing.provider_rules`; ``validate=False`` turns that off).

Every request is recorded in ``fake.requests`` as a :class:`Recorded` (``keep=False``: none,
for a long-running process): method, path, query string, headers, the raw body bytes and the
parsed JSON, and what was sent back: status, headers and every chunk byte for byte with the time
it went out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from . import wire
from .loopback import LoopbackFake, Recorded, read_request, serve_in_thread, stop_served
from .provider_rules import BINDING_BETA, RULES, binding_beta
from .replies import ProviderError, Reply, Usage

__all__ = [
    "BINDING_BETA",
    "DEFAULT_PORT",
    "FakeProvider",
    "ProviderError",
    "Recorded",
    "Reply",
    "Usage",
    "main",
    "read_request",
    "serve_in_thread",
    "stop_served",
]

#: Where ``python -m tomc.testing.fake_provider`` listens unless told otherwise.
DEFAULT_PORT = 8790
PREFIXES = ("/v1", "/backend-api/codex")
DEFAULT_MODELS = ("gpt-5.3-codex", "gpt-4o", "claude-opus-4-8", "claude-sonnet-4-6")


class _Abort(Exception):
    """Raised inside a stream to drop the connection mid-body."""


class FakeProvider(LoopbackFake):
    """A loopback fake of the providers' HTTP APIs (see the module docstring)."""

    def __init__(
        self,
        reply: Reply | None = None,
        *,
        models: Sequence[str] = DEFAULT_MODELS,
        validate: bool = True,
        port: int = 0,
        keep: bool = True,
        on_request: Callable[[Recorded], None] | None = None,
        **reply_fields: Any,
    ) -> None:
        self.reply = replace(reply or Reply(), **reply_fields)
        self.models = tuple(models)
        self.validate = validate
        self.requests: list[Recorded] = []
        self._keep = keep
        self._on_request = on_request
        self._count = 0
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._listen_port = port  # 0: any free port
        self.port = port

    # ------------------------------------------------------------------ configuration

    def configure(self, **changes: Any) -> None:
        """Change fields of the default reply (``fake.configure(kind="tool_call")``)."""
        self.reply = replace(self.reply, **changes)

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order; then ``reply`` again."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def anthropic_url(self) -> str:
        """The Anthropic SDK's ``base_url``: the root, without ``/v1``."""
        return self.root_url

    @property
    def chatgpt_url(self) -> str:
        """Where Codex sends ChatGPT-account traffic (``.../backend-api/codex``)."""
        return f"{self.root_url}/backend-api/codex"

    @property
    def last(self) -> Recorded:
        return self.requests[-1]

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> FakeProvider:
        self._serve(self.app(), "fake-provider", port=self._listen_port, backlog=512)
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()  # releases stalled handlers
        super().__exit__(*exc)

    def app(self) -> Starlette:
        routes = [
            Route("/{path:path}", self._handle, methods=["GET", "POST", "PUT", "DELETE", "HEAD"])
        ]
        return Starlette(routes=routes)

    # ------------------------------------------------------------------ handling

    async def _handle(self, request: Request) -> Response:
        record, response = await self._answer(request)
        if self._on_request is not None:
            self._on_request(record)
        return response

    async def _answer(self, request: Request) -> tuple[Recorded, Response]:
        raw, body, headers = await read_request(request)
        with self._lock:
            reply = self._queue.popleft() if self._queue else self.reply
            record = Recorded(
                method=request.method,
                path=request.url.path,
                query=request.url.query,
                headers=headers,
                raw_headers=list(request.headers.items()),
                raw=raw,
                body=body,
                received_at=time.monotonic(),
            )
            if self._keep:
                self.requests.append(record)
            self._count += 1
            number = self._count
        return record, await self._respond(request, record, reply, number, body, headers)

    async def _respond(
        self,
        request: Request,
        record: Recorded,
        reply: Reply,
        number: int,
        body: Any,
        headers: dict[str, str],
    ) -> Response:
        route = self._route(request.method, request.url.path)
        if reply.stall:
            await self._wait(request, record)
            if record.client_disconnected:  # nobody is listening: nothing is sent or recorded
                return Response(status_code=499)
            return self._json(record, 504, wire.openai_error(ProviderError(504, "stalled"), 0))
        if route is None:
            error = ProviderError(404, f"Unknown request URL: {request.method} {request.url.path}")
            return self._json(record, 404, wire.openai_error(error, number))
        kind, builder = route
        anthropic = kind == "messages" or (kind == "models" and "anthropic-version" in headers)
        if reply.error is not None:
            return self._error(record, reply.error, number, anthropic=anthropic)
        if self.validate and kind in RULES and isinstance(body, Mapping):
            problem = RULES[kind](body, headers)
            if problem:
                error = ProviderError(400, problem)
                return self._error(record, error, number, anthropic=anthropic)
        if kind == "models":
            return self._json(record, 200, wire.models_list(self.models, anthropic=anthropic))
        if not isinstance(body, Mapping):
            error = ProviderError(400, "We could not parse the JSON body of your request.")
            return self._error(record, error, number, anthropic=anthropic)
        if body.get("stream") and builder.stream is not None:
            events = builder.stream(body, number, reply, headers)
            if reply.mid_stream_error is not None:
                at = reply.mid_stream_error_after
                failure = wire.stream_error(kind, reply.mid_stream_error, number, at)
                events = [*events[:at], failure]
            return self._stream(request, record, events, reply, number)
        return self._json(record, 200, builder.json(body, number, reply, headers))

    def _route(self, method: str, path: str) -> tuple[str, _Builder] | None:
        for prefix in PREFIXES:
            if path.startswith(prefix + "/"):
                key = (method, path[len(prefix) + 1 :].rstrip("/"))
                kind = _ROUTES.get(key)
                return (kind, _BUILDERS[kind]) if kind else None
        return None

    def _error(
        self, record: Recorded, error: ProviderError, number: int, *, anthropic: bool
    ) -> Response:
        payload = (wire.anthropic_error if anthropic else wire.openai_error)(error, number)
        return self._json(record, error.status, payload, anthropic=anthropic, number=number)

    def _json(
        self,
        record: Recorded,
        status: int,
        payload: Any,
        *,
        anthropic: bool | None = None,
        number: int = 0,
    ) -> Response:
        data = json.dumps(payload).encode()
        headers = {"content-type": "application/json", "content-length": str(len(data))}
        headers.update(_request_id_header(record, number, anthropic))
        record.status, record.response_headers = status, headers
        record.sent.append(data)
        record.sent_at.append(time.monotonic())
        record.complete = True
        return Response(data, status_code=status, headers=headers)

    def _stream(
        self, request: Request, record: Recorded, events: list[bytes], reply: Reply, number: int
    ) -> Response:
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            **_request_id_header(record, number, None),
        }
        record.status, record.response_headers = 200, headers

        async def body() -> AsyncIterator[bytes]:
            for index, event in enumerate(events):
                if reply.disconnect_after is not None and index >= reply.disconnect_after:
                    raise _Abort("the fake provider drops the connection")
                if reply.stall_after is not None and index >= reply.stall_after:
                    await self._wait(request, record)
                    return
                if index and reply.event_delay_s:
                    await asyncio.sleep(reply.event_delay_s)
                record.sent.append(event)
                record.sent_at.append(time.monotonic())
                # The last event is the whole answer: a client that stops reading at it (an
                # error event) may close before this generator would run again.
                record.complete = index == len(events) - 1
                yield event

        return StreamingResponse(body(), status_code=200, headers=headers)

    async def _wait(self, request: Request, record: Recorded) -> None:
        """Stay silent until the client goes away or the fake stops."""
        while not self._closing.is_set():
            if await request.is_disconnected():
                record.client_disconnected = True
                return
            await asyncio.sleep(0.02)


def _request_id_header(record: Recorded, number: int, anthropic: bool | None) -> dict[str, str]:
    if anthropic is None:
        anthropic = "anthropic-version" in record.headers
    if anthropic:
        return {"request-id": f"req_011Fake{number:012d}"}
    return {"x-request-id": f"req_fake{number:012d}"}


# ---------------------------------------------------------------------- routes and builders


@dataclass(frozen=True)
class _Builder:
    json: Callable[[Mapping[str, Any], int, Reply, Mapping[str, str]], Any]
    stream: Callable[[Mapping[str, Any], int, Reply, Mapping[str, str]], list[bytes]] | None


_ROUTES = {
    ("POST", "chat/completions"): "chat",
    ("POST", "messages"): "messages",
    ("POST", "messages/count_tokens"): "count_tokens",
    ("POST", "responses"): "responses",
    ("POST", "responses/compact"): "compact",
    ("GET", "models"): "models",
}
_BUILDERS = {
    "chat": _Builder(
        lambda b, n, r, h: wire.chat_completion(b, n, r),
        lambda b, n, r, h: wire.chat_stream(b, n, r),
    ),
    "messages": _Builder(
        lambda b, n, r, h: wire.anthropic_message(b, n, r, binding_beta=binding_beta(h)),
        lambda b, n, r, h: wire.anthropic_stream(b, n, r, binding_beta=binding_beta(h)),
    ),
    "count_tokens": _Builder(lambda b, n, r, h: {"input_tokens": r.usage.prompt_tokens}, None),
    "responses": _Builder(
        lambda b, n, r, h: wire.response_object(b, n, r),
        lambda b, n, r, h: wire.responses_stream(b, n, r),
    ),
    "compact": _Builder(lambda b, n, r, h: wire.compacted_response(b, n, r), None),
    "models": _Builder(lambda b, n, r, h: None, None),
}


# ---------------------------------------------------------------------- the command


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tomc.testing.fake_provider",
        description="A fake LLM provider on 127.0.0.1 that speaks Chat Completions, Anthropic "
        "Messages and OpenAI Responses (streamed or not) and answers every request with a "
        "fixed reply: to try `tomc gateway serve` or a LiteLLM proxy offline. Any API key is "
        "accepted; nothing leaves the machine.",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port on 127.0.0.1 (default: {DEFAULT_PORT}; 0: any free port)",
    )
    parser.add_argument("--text", default=Reply.text, help="the reply's text")
    parser.add_argument("--quiet", action="store_true", help="do not log each request")
    return parser


def _log_line(record: Recorded) -> str:
    """One request as the command logs it: what came in and what went back (sizes only)."""
    messages = ""
    if isinstance(record.body, Mapping):
        items = record.body.get("messages", record.body.get("input"))
        if isinstance(items, list):
            messages = f", {len(items)} message{'' if len(items) == 1 else 's'}"
    return (
        f"fake provider: {record.method} {record.target} -> {record.status} "
        f"({len(record.raw):,} bytes in{messages})"
    )


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tomc.testing.fake_provider``: serve until Ctrl-C (or SIGTERM)."""
    args = _parser().parse_args(argv)
    if not 0 <= args.port < 65536:
        _parser().error(f"--port must be 0-65535, not {args.port}")

    def log(record: Recorded) -> None:
        print(_log_line(record), file=sys.stderr, flush=True)

    fake = FakeProvider(
        text=args.text, port=args.port, keep=False, on_request=None if args.quiet else log
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        fake.__enter__()
    except OSError as exc:
        print(
            f"fake provider: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}",
            file=sys.stderr,
        )
        return 1
    try:
        print(
            f"fake provider on {fake.root_url} (Ctrl-C to stop)\n"
            f"  OpenAI base URL (Chat Completions, Responses): {fake.base_url}\n"
            f"  Anthropic base URL (Messages): {fake.anthropic_url}",
            flush=True,
        )
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        fake.__exit__(None, None, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
