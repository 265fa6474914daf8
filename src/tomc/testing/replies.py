"""The fake provider's reply settings and the shapes every format shares: errors, SSE framing,
the models list.

:class:`Reply` says what :class:`~tomc.testing.fake_provider.FakeProvider` answers to one request
(text, a tool call, thinking, usage figures, an error, how the stream is delivered);
:mod:`tomc.testing.wire` turns it into each format's answer. Everything is a function of the
request, its number and these settings, so the fake's output is deterministic.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CREATED",
    "KINDS",
    "ProviderError",
    "Reply",
    "Usage",
    "anthropic_error",
    "models_list",
    "openai_error",
    "sse",
    "stream_error",
]


#: Reply kinds: plain text, a tool call (with a sentence before it where the format has one), or
#: reasoning/thinking followed by a tool call (Chat Completions has no thinking: a tool call).
KINDS = ("text", "tool_call", "thinking_tool_call")
CREATED = 1_760_000_000


@dataclass(frozen=True)
class Usage:
    """Token figures of a reply. A prompt is ``input_tokens + cache_write_tokens +
    cache_read_tokens`` in every format; each provider reports it its own way:

    - Anthropic: ``input_tokens`` (the uncached remainder), ``cache_creation_input_tokens``,
      ``cache_read_input_tokens``;
    - OpenAI: ``prompt_tokens`` / ``input_tokens`` is the whole prompt, with
      ``cached_tokens`` (reads) and ``cache_write_tokens`` among its details.
    """

    input_tokens: int = 1234
    output_tokens: int = 56
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    reasoning_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens


@dataclass(frozen=True)
class ProviderError:
    """An error answer: the HTTP status and the provider's own error JSON for it."""

    status: int
    message: str = "The fake provider was told to fail this request."
    type: str | None = None  # default: the provider's type for the status
    code: str | None = None  # OpenAI's ``error.code``


@dataclass(frozen=True)
class Reply:
    """What the fake answers to one request, and how it delivers it."""

    text: str = "Sure: the answer is 42."
    kind: str = "text"
    tool_name: str = "Read"
    tool_input: Mapping[str, Any] = field(default_factory=lambda: {"file_path": "src/app.py"})
    thinking: str = "The user wants the retry count; I should read the file first."
    usage: Usage = field(default_factory=Usage)
    #: Characters per text delta in a stream.
    chunk_size: int = 5
    #: Answer with this error (status and the provider's error JSON) instead.
    error: ProviderError | None = None
    #: Seconds to wait before each SSE event after the first.
    event_delay_s: float = 0.0
    #: Drop the connection after this many SSE events (the body stays incomplete).
    disconnect_after: int | None = None
    #: Never answer: no status, no headers (until the client goes away or the fake stops).
    stall: bool = False
    #: Send this many SSE events, then go silent.
    stall_after: int | None = None
    #: After ``mid_stream_error_after`` events, send the provider's error event and end (the
    #: status is already 200): Anthropic ``event: error``, Responses ``error``, Chat an
    #: ``{"error": ...}`` chunk.
    mid_stream_error: ProviderError | None = None
    mid_stream_error_after: int = 1
    #: Anthropic's ``input_transformations`` entries (sent only with the thinking-binding beta,
    #: as ``[]`` when empty), e.g. ``{"type": "thinking_dropped", "path": "messages.1.content.0",
    #: "reason": "prefix_binding_mismatch"}``.
    input_transformations: tuple[Mapping[str, Any], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, not {self.kind!r}")


def sse(event: str | None, data: Mapping[str, Any] | str) -> bytes:
    """One server-sent event as the providers frame it."""
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _pieces(text: str, size: int) -> list[str]:
    size = max(1, size)
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _digest(*parts: object) -> bytes:
    return hashlib.sha256("\x1f".join(map(str, parts)).encode()).digest()


def _signature(number: int, thinking: str) -> str:
    return "Eq" + base64.b64encode(_digest("sig", number, thinking) * 3).decode()


def _encrypted(number: int, label: str) -> str:
    return "gAAAAAB" + base64.urlsafe_b64encode(_digest("enc", number, label) * 4).decode()


def _arguments(reply: Reply) -> str:
    return json.dumps(dict(reply.tool_input))


# ---------------------------------------------------------------------- errors

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_OPENAI_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    403: "permission_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}


def anthropic_error(error: ProviderError, number: int) -> dict[str, Any]:
    kind = error.type or _ANTHROPIC_TYPES.get(error.status, "api_error")
    return {
        "type": "error",
        "error": {"type": kind, "message": error.message},
        "request_id": f"req_011Fake{number:012d}",
    }


def openai_error(error: ProviderError, number: int) -> dict[str, Any]:
    kind = error.type or _OPENAI_TYPES.get(error.status, "server_error")
    return {"error": {"message": error.message, "type": kind, "param": None, "code": error.code}}


def stream_error(api: str, error: ProviderError, number: int, sequence: int) -> bytes:
    """The event a provider sends when a stream fails after it started."""
    if api == "messages":
        payload = anthropic_error(error, number)
        return sse("error", {"type": "error", "error": payload["error"]})
    inner = openai_error(error, number)["error"]
    if api == "responses":
        event = {
            "type": "error",
            "sequence_number": sequence,
            "code": inner["code"] or inner["type"],
            "message": inner["message"],
            "param": None,
        }
        return sse("error", event)
    return sse(None, {"error": inner})


# ---------------------------------------------------------------------- models


def models_list(models: Sequence[str], *, anthropic: bool) -> dict[str, Any]:
    if anthropic:
        data = [
            {
                "type": "model",
                "id": model,
                "display_name": model.replace("-", " ").title(),
                "created_at": "2026-05-01T00:00:00Z",
                "lifecycle": "active",
            }
            for model in models
            if model.startswith("claude")
        ]
        first = data[0]["id"] if data else None
        last = data[-1]["id"] if data else None
        return {"data": data, "has_more": False, "first_id": first, "last_id": last}
    data = [
        {"id": model, "object": "model", "created": CREATED, "owned_by": "openai"}
        for model in models
        if not model.startswith("claude")
    ]
    return {"object": "list", "data": data}
