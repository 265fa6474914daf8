"""A fourth wire format, defined only in the tests: Gemini's ``generateContent``, near enough.

It proves that a new format is one module plus one registry line (here
``register_dialect(GeminiLike())``): nothing in ``src`` knows it. What makes it unlike the three
built-in formats:

- the model is in the URL (``POST /v1beta/models/{model}:generateContent``, and
  ``:streamGenerateContent?alt=sse`` for a stream), never in the body;
- the history is ``contents``: ``role`` ``user`` or ``model``, each with a list of ``parts``
  (``text``, ``functionCall`` with ``id``/``name``/``args``, ``functionResponse`` with
  ``id``/``name``/``response``); instructions are ``systemInstruction``, the output limit is
  ``generationConfig.maxOutputTokens``;
- usage is ``usageMetadata``: ``promptTokenCount`` (the whole prompt),
  ``cachedContentTokenCount`` (its cached part), ``candidatesTokenCount`` (the answer); in a
  stream every chunk carries the figures so far, and the one with a ``finishReason`` the last;
- errors are ``{"error": {"code", "message", "status"}}`` with gRPC status names.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, ClassVar

from tomc.chat.dialects import (
    ASSISTANT,
    TOOL,
    USER,
    BaseDialect,
    Entry,
    PassThrough,
    ToolCall,
    ToolOutput,
    Upstream,
    WireUsage,
    canonical_digest,
    register_dialect,
    unregister_dialect,
    whole_prompt_usage,
)
from tomc.chat.dialects import pairing_problems as _pairing
from tomc.chat.dialects import token_count as count

__all__ = ["GEMINI", "GeminiLike", "from_chat", "gemini_path", "registered"]

GEMINI = Upstream("gemini", "https://generativelanguage.googleapis.com")
_PATH = re.compile(r"/v1beta/models/(?P<model>[^/:]+):(?:generateContent|streamGenerateContent)")
#: gRPC status names Google's APIs give the HTTP statuses the gateway answers with itself.
_STATUS = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 502: "UNAVAILABLE"}
_STATUS.update({503: "UNAVAILABLE", 504: "DEADLINE_EXCEEDED"})


def gemini_path(model: str, *, stream: bool = False) -> str:
    """The path a client posts to for ``model``."""
    return f"/v1beta/models/{model}:{'streamGenerateContent' if stream else 'generateContent'}"


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)


def _parts(content: Mapping[str, Any], index: int) -> list[Mapping[str, Any]]:
    parts = content.get("parts")
    if not isinstance(parts, list) or not all(isinstance(part, Mapping) for part in parts):
        raise PassThrough("invalid_request", f"content {index} has no list of part objects")
    return parts


class GeminiLike(BaseDialect):
    """The ``generateContent`` dialect (see the module docstring)."""

    name: ClassVar[str] = "gemini"
    items_key: ClassVar[str] = "contents"
    adjacent_results: ClassVar[bool] = True
    memory_roles: ClassVar[tuple[str, ...]] = ("user",)
    method_name: ClassVar[str] = "models.generate_content"
    upstreams: ClassVar[tuple[Upstream, ...]] = (GEMINI,)
    billing: ClassVar[str] = "openai"  # cached reads are cheaper; writes cost nothing extra
    usage_marks: ClassVar[tuple[bytes, ...]] = (b"usageMetadata",)

    # ------------------------------------------------------------------ the history

    def items(self, request: Mapping[str, Any]) -> Sequence[Any]:
        return self._list(request)

    def read(self, item: Any, index: int) -> tuple[Entry, str]:
        content = self._mapping(item, index, "content")
        role = content.get("role", "user")
        if role not in ("user", "model"):
            raise PassThrough("unsupported_content", f"content {index} has role {role!r}")
        texts: list[str] = []
        counted: list[str] = []
        calls: list[ToolCall] = []
        outputs: list[ToolOutput] = []
        blocker = None
        for part in _parts(content, index):
            if isinstance(part.get("text"), str) and not part.get("thought"):
                texts.append(part["text"])
                counted.append(part["text"])
            elif isinstance(part.get("functionCall"), Mapping) and role == "model":
                call = part["functionCall"]
                arguments = _dump(call.get("args", {}))
                calls.append(ToolCall(str(call.get("id")), str(call.get("name")), arguments))
                counted.extend((str(call.get("id")), str(call.get("name")), arguments))
            elif isinstance(part.get("functionResponse"), Mapping) and role == "user":
                answer = part["functionResponse"]
                outputs.append(ToolOutput(str(answer.get("id")), _dump(answer.get("response"))))
                counted.append(_dump(answer))
            else:  # inlineData, fileData, thoughts, executableCode, ...: kept, never compiled
                blocker = blocker or f"a {', '.join(sorted(part)) or 'empty'} part"
                counted.append(_dump(part))
        kind = ASSISTANT if role == "model" else (TOOL if outputs else USER)
        entry = Entry(
            kind=kind,
            role=role,
            text="\n".join(texts),
            calls=tuple(calls),
            outputs=tuple(outputs),
            blocker=blocker,
            digest=canonical_digest(content),
        )
        return entry, "\n".join(counted)

    def fixed_text(self, request: Mapping[str, Any]) -> str:
        keys = ("systemInstruction", "tools", "toolConfig")
        present = [request.get(key) for key in keys if request.get(key)]
        return _dump(present) if present else ""

    def output_reserve(self, request: Mapping[str, Any]) -> int | None:
        config = request.get("generationConfig")
        return count(config.get("maxOutputTokens")) if isinstance(config, Mapping) else None

    def memory_item(self, text: str, role: str) -> dict[str, Any]:
        return {"role": "user", "parts": [{"text": text}]}

    def validate(self, items: Sequence[Any]) -> list[str]:
        try:
            entries = [self.read(item, index)[0] for index, item in enumerate(items)]
        except PassThrough as exc:
            return [exc.reason]
        return _pairing(entries, adjacent=True)

    def prompt_tokens(self, response: Any) -> int | None:
        figures = self.response_usage(response)
        return figures.prompt_tokens if figures is not None else None

    def endpoint(self, client: Any) -> Callable[..., Any] | None:
        return None  # no SDK client in the tests: the format is exercised through the gateway

    # ------------------------------------------------------------------ the wire

    def claims(self, request: Mapping[str, Any]) -> bool:
        return "contents" in request

    def serves(self, path: str) -> bool:
        return _PATH.fullmatch(path) is not None

    def owns(self, path: str, headers: Mapping[str, str]) -> bool:
        return path.startswith("/v1beta/") or "x-goog-api-key" in headers

    def model_of(self, path: str, body: Mapping[str, Any]) -> str | None:
        match = _PATH.fullmatch(path)
        return match["model"] if match else None

    def conversation_seed(self, body: Mapping[str, Any]) -> tuple[Any, ...]:
        contents = body.get("contents") or ()
        users = (c for c in contents if isinstance(c, Mapping) and c.get("role", "user") == "user")
        first = next(users, {})
        return body.get("systemInstruction"), first.get("parts")

    def response_usage(self, body: Any) -> WireUsage | None:
        usage = body.get("usageMetadata") if isinstance(body, Mapping) else None
        if not isinstance(usage, Mapping):
            return None
        answer = [count(usage.get(key)) for key in ("candidatesTokenCount", "thoughtsTokenCount")]
        known = [figure for figure in answer if figure is not None]
        output = sum(known) if known else None
        return whole_prompt_usage(
            usage.get("promptTokenCount"), usage.get("cachedContentTokenCount"), None, output
        )

    def event_usage(self, event: Mapping[str, Any]) -> tuple[WireUsage, bool] | None:
        found = self.response_usage(event)
        if found is None:
            return None
        candidates = event.get("candidates") or ()
        done = any(isinstance(c, Mapping) and c.get("finishReason") for c in candidates)
        return found, done

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {
            "error": {"code": status, "message": message, "status": _STATUS.get(status, "INTERNAL")}
        }


def from_chat(request: Mapping[str, Any]) -> dict[str, Any]:
    """A Chat Completions request's conversation in this format (the model goes in the URL):
    system messages become ``systemInstruction``, tool results of one step one user turn."""
    names: dict[str, str] = {}
    system: list[dict[str, Any]] = []
    contents: list[dict[str, Any]] = []
    for message in request["messages"]:
        role, text = message["role"], message.get("content")
        if role == "system":
            system.append({"text": text})
        elif role == "user":
            contents.append({"role": "user", "parts": [{"text": text}]})
        elif role == "assistant":
            parts: list[dict[str, Any]] = [{"text": text}] if text else []
            for call in message.get("tool_calls") or ():
                function = call["function"]
                names[call["id"]] = function["name"]
                arguments = json.loads(function["arguments"])
                made = {"id": call["id"], "name": function["name"], "args": arguments}
                parts.append({"functionCall": made})
            contents.append({"role": "model", "parts": parts})
        else:  # a tool result
            call_id = message["tool_call_id"]
            answer = {"id": call_id, "name": names[call_id], "response": {"output": text}}
            previous = contents[-1]["parts"] if contents[-1]["role"] == "user" else []
            if previous and all("functionResponse" in part for part in previous):
                previous.append({"functionResponse": answer})
            else:
                contents.append({"role": "user", "parts": [{"functionResponse": answer}]})
    return {
        "contents": contents,
        "systemInstruction": {"parts": system},
        "tools": [
            {"functionDeclarations": [{"name": name} for name in sorted(set(names.values()))]}
        ],
        "generationConfig": {"maxOutputTokens": 4096, "temperature": 0.2},
    }


@contextmanager
def registered() -> Iterator[GeminiLike]:
    """The format in the registry for the block (the one line a new format needs); removed
    after, so other tests see the three built-in formats only."""
    dialect = register_dialect(GeminiLike())
    try:
        yield dialect
    finally:
        unregister_dialect(dialect.name)
