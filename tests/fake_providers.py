"""One fake LLM provider over loopback HTTP, speaking the real wire formats, recording everything.

``with FakeProvider() as fake:`` serves a Starlette app under uvicorn in a background thread on a
free 127.0.0.1 port. Point a client at it:

- ``openai.OpenAI(base_url=fake.base_url)`` (``.../v1``): Chat Completions and Responses;
- ``anthropic.Anthropic(base_url=fake.anthropic_url)`` (the root, as ``ANTHROPIC_BASE_URL``);
- ``fake.chatgpt_url`` (``.../backend-api/codex``): stands for the ChatGPT endpoint Codex uses
  when signed in with a ChatGPT account.

Routes, under both ``/v1`` and ``/backend-api/codex``: ``POST chat/completions``, ``POST messages``
(``?beta=true`` accepted), ``POST messages/count_tokens``, ``POST responses``,
``POST responses/compact`` and ``GET models``. Anything else gets a 404 in the OpenAI error shape.

What it answers is ``fake.reply`` (a :class:`~fake_wire.Reply`), or the next one queued with
:meth:`FakeProvider.script`: the text, the kind of reply, usage figures, an error with the
provider's own error JSON (as the status, or as an error event mid-stream), a delay between SSE
events, a disconnect after N events, a stall.
Like the real APIs it rejects requests that break the format's tool pairing rules, and Anthropic's
``thinking.block_binding`` without its beta header (``validate=False`` turns that off).

Every request is recorded in ``fake.requests`` as a :class:`Recorded`: method, path, query
string, headers, the raw body bytes and the parsed JSON, and what was sent back: status, headers
and every chunk byte for byte with the time it went out.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

import fake_wire as wire
from fake_wire import ProviderError, Reply, Usage

__all__ = ["BINDING_BETA", "FakeProvider", "ProviderError", "Recorded", "Reply", "Usage"]

BINDING_BETA = "thinking-binding-controls-2026-08-01"
PREFIXES = ("/v1", "/backend-api/codex")
DEFAULT_MODELS = ("gpt-5.3-codex", "gpt-4o", "claude-opus-4-8", "claude-sonnet-4-6")


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


class _Abort(Exception):
    """Raised inside a stream to drop the connection mid-body."""


class FakeProvider:
    """A loopback fake of the providers' HTTP APIs (see the module docstring)."""

    def __init__(
        self,
        reply: Reply | None = None,
        *,
        models: Sequence[str] = DEFAULT_MODELS,
        validate: bool = True,
        **reply_fields: Any,
    ) -> None:
        self.reply = replace(reply or Reply(), **reply_fields)
        self.models = tuple(models)
        self.validate = validate
        self.requests: list[Recorded] = []
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port = 0

    # ------------------------------------------------------------------ configuration

    def configure(self, **changes: Any) -> None:
        """Change fields of the default reply (``fake.configure(kind="tool_call")``)."""
        self.reply = replace(self.reply, **changes)

    def script(self, *replies: Reply) -> None:
        """Answer the next requests with these replies, in order; then ``reply`` again."""
        with self._lock:
            self._queue.extend(replies)

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The OpenAI SDK's ``base_url`` (``.../v1``)."""
        return f"{self.root_url}/v1"

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
        # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on accepted sockets whose
        # proto says TCP. With proto 0, Nagle holds the body behind the headers until the
        # client's delayed ACK, about 40 ms per response on Linux.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(512)
        self._socket, self.port = sock, sock.getsockname()[1]
        self._server, self._thread = serve_in_thread(self.app(), sock, "fake-provider")
        return self

    def __exit__(self, *exc: object) -> None:
        self._closing.set()  # releases stalled handlers
        stop_served(self._server, self._thread, self._socket)

    def app(self) -> Starlette:
        routes = [
            Route("/{path:path}", self._handle, methods=["GET", "POST", "PUT", "DELETE", "HEAD"])
        ]
        return Starlette(routes=routes)

    # ------------------------------------------------------------------ handling

    async def _handle(self, request: Request) -> Response:
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
            self.requests.append(record)
            number = len(self.requests)
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
        if self.validate and kind in _RULES and isinstance(body, Mapping):
            problem = _RULES[kind](body, headers)
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
            return self._stream(request, record, events, reply)
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
        self, request: Request, record: Recorded, events: list[bytes], reply: Reply
    ) -> Response:
        headers = {
            "content-type": "text/event-stream; charset=utf-8",
            "cache-control": "no-cache",
            **_request_id_header(record, len(self.requests), None),
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


def _binding(headers: Mapping[str, str]) -> bool:
    return BINDING_BETA in _betas(headers)


def _betas(headers: Mapping[str, str]) -> list[str]:
    return [b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()]


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
        lambda b, n, r, h: wire.anthropic_message(b, n, r, binding_beta=_binding(h)),
        lambda b, n, r, h: wire.anthropic_stream(b, n, r, binding_beta=_binding(h)),
    ),
    "count_tokens": _Builder(lambda b, n, r, h: {"input_tokens": r.usage.prompt_tokens}, None),
    "responses": _Builder(
        lambda b, n, r, h: wire.response_object(b, n, r),
        lambda b, n, r, h: wire.responses_stream(b, n, r),
    ),
    "compact": _Builder(lambda b, n, r, h: wire.compacted_response(b, n, r), None),
    "models": _Builder(lambda b, n, r, h: None, None),
}


# ---------------------------------------------------------------------- the providers' own rules
# An independent statement of the rules each API enforces (with its error wording), so that a
# rewritten request the real provider would reject is rejected here too.


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _messages_problem(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and "block_binding" in thinking and not _binding(headers):
        return (
            "thinking.block_binding: Extra inputs are not permitted. That setting requires the "
            f"`{BINDING_BETA}` value in the `anthropic-beta` header."
        )
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "messages: Field required"
    open_ids: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping):
            return f"messages.{index}: Input should be an object"
        blocks = [b for b in _blocks(message) if isinstance(b, Mapping)]
        results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
        if message.get("role") == "user" and results:
            leading = 0
            while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
                leading += 1
            if leading != len(results):
                return f"messages.{index}: `tool_result` blocks must come first in the content"
            unexpected = [r for r in results if r not in open_ids]
            if unexpected:
                return (
                    f"messages.{index}.content.0: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {unexpected[0]}. Each `tool_result` block must have a corresponding "
                    "`tool_use` block in the previous message."
                )
        missing = [i for i in open_ids if i not in results]
        if missing:
            return (
                f"messages.{index - 1}: `tool_use` ids were found without `tool_result` blocks "
                f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                "corresponding `tool_result` block in the next message."
            )
        open_ids = []
        if message.get("role") == "assistant":
            open_ids = [str(b.get("id")) for b in blocks if b.get("type") == "tool_use"]
    return None


def _chat_problem(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return "Invalid type for 'messages': expected an array."
    open_ids: set[str] = set()
    for message in messages:
        if not isinstance(message, Mapping):
            return "Invalid type for 'messages[]': expected an object."
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in open_ids:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'."
                )
            open_ids.discard(message["tool_call_id"])
            continue
        if open_ids:
            return _unanswered_chat(open_ids)
        open_ids = {str(c.get("id")) for c in message.get("tool_calls") or () if c}
    return _unanswered_chat(open_ids) if open_ids else None


def _unanswered_chat(open_ids: set[str]) -> str:
    return (
        "An assistant message with 'tool_calls' must be followed by tool messages responding to "
        "each 'tool_call_id'. The following tool_call_ids did not have response messages: "
        + ", ".join(sorted(open_ids))
    )


def _responses_problem(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    items = body.get("input")
    if not isinstance(items, list):
        return None
    calls: set[str] = set()
    answered: set[str] = set()
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind in ("function_call", "custom_tool_call"):
            calls.add(str(item.get("call_id")))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            call_id = str(item.get("call_id"))
            if call_id not in calls:
                return f"No tool call found for function call output with call_id {call_id}."
            answered.add(call_id)
    unanswered = sorted(calls - answered)
    if unanswered and not body.get("previous_response_id"):
        return f"No tool output found for function call {unanswered[0]}."
    return None


_RULES: dict[str, Callable[[Mapping[str, Any], Mapping[str, str]], str | None]] = {
    "messages": _messages_problem,
    "count_tokens": _messages_problem,
    "chat": _chat_problem,
    "responses": _responses_problem,
    "compact": _responses_problem,
}
