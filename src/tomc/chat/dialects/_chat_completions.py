"""OpenAI Chat Completions (and the many providers that speak it).

Items are messages: ``system``/``developer`` instructions, ``user`` turns, ``assistant`` messages
with optional ``tool_calls``, and ``role: "tool"`` results that must follow their call directly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from .._conversation import ASSISTANT, INSTRUCTION, TOOL, USER, Entry, ToolCall, ToolOutput
from .._conversation import pairing_problems as _pairing
from .._injected import split_parts
from ._base import BaseDialect, PassThrough, canonical_digest, part_text, text_parts
from ._openai_wire import OpenAIWire, openai_usage
from ._wire import WireUsage, first_user_content

__all__ = ["ChatCompletions", "check_tool_pairing"]

_ROLES = {"system": INSTRUCTION, "developer": INSTRUCTION, "user": USER, "assistant": ASSISTANT}
# Fields read into the entry. Others that are set (audio, legacy function_call, ...) may be
# opaque to us, so the message can stay raw but is never compiled.
_KNOWN_FIELDS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "refusal"})
# Model reasoning some providers return beside the content (DeepSeek, others): dropped whole when
# its message is compiled, never turned into text.
_DROPPABLE_FIELDS = frozenset({"reasoning_content", "reasoning", "annotations"})


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def _content(message: Mapping[str, Any]) -> tuple[str, str | None]:
    """``(text, blocker)`` of a message's content."""
    content = message.get("content")
    if content is None or isinstance(content, str):
        return content or "", None
    if isinstance(content, list):
        texts = []
        for part in content:
            text = part_text(part)
            if text is None:
                kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
                return "", f"a non-text content part ({kind or 'unknown'})"
            texts.append(text)
        return "\n".join(texts), None
    return "", f"content of type {type(content).__name__}"


class ChatCompletions(OpenAIWire, BaseDialect):
    """The Chat Completions dialect (``client.chat.completions.create``,
    ``POST /v1/chat/completions``)."""

    name: ClassVar[str] = "chat"
    items_key: ClassVar[str] = "messages"
    adjacent_results: ClassVar[bool] = True
    memory_roles: ClassVar[tuple[str, ...]] = ("user", "system", "developer", "assistant")
    method_name: ClassVar[str] = "chat.completions.create"
    paths: ClassVar[tuple[str, ...]] = ("/v1/chat/completions",)

    def items(self, request: Mapping[str, Any]) -> Sequence[Any]:
        return self._list(request)

    def read(self, item: Any, index: int) -> tuple[Entry, str]:
        message = self._mapping(item, index, "message")
        role = message.get("role")
        text, blocker = _content(message)
        counted = [text]
        for key, value in message.items():
            if key in _KNOWN_FIELDS or _empty(value):
                continue
            counted.append(json.dumps(value, ensure_ascii=False, default=str))
            if key not in _DROPPABLE_FIELDS:
                blocker = blocker or f"field {key!r} (opaque or non-text)"
        if message.get("refusal"):
            text = f"{text}\n[refusal] {message['refusal']}".strip()
            counted.append(str(message["refusal"]))
        calls: list[ToolCall] = []
        for call in message.get("tool_calls") or ():
            if not isinstance(call, Mapping) or not isinstance(call.get("id"), str):
                raise PassThrough(
                    "invalid_request", f"message {index} has a tool call without an id"
                )
            if call.get("type", "function") != "function":
                blocker = blocker or f"a {call.get('type')} tool call"
            function = call.get("function") or {}
            arguments = function.get("arguments", "")
            if not isinstance(arguments, str):
                arguments = json.dumps(arguments, ensure_ascii=False, default=str)
            calls.append(ToolCall(call["id"], str(function.get("name", "")), arguments))
            counted.extend((call["id"], str(function.get("name", "")), arguments))
        kind = _ROLES.get(role) if isinstance(role, str) else None
        outputs: tuple[ToolOutput, ...] = ()
        if role == "tool":
            kind = TOOL
            call_id = message.get("tool_call_id")
            outputs = (ToolOutput(str(call_id), text),)
            counted.append(str(call_id))
            text = ""
        if kind is None:
            raise PassThrough(
                "unsupported_content", f"message {index} has unsupported role {role!r}"
            )
        pinned = False
        if kind == USER and text:
            own, pinned = split_parts(text_parts(message.get("content")))
            if pinned and not own.strip() and blocker is None:
                kind, pinned = INSTRUCTION, False
            text = own if pinned else text
        if calls and kind != ASSISTANT:
            raise PassThrough(
                "invalid_request", f"message {index} has tool_calls outside an assistant message"
            )
        entry = Entry(
            kind=kind,
            role=role,
            text=text,
            calls=tuple(calls),
            outputs=outputs,
            blocker=blocker,
            pinned=pinned,
            digest=canonical_digest(message),
        )
        return entry, "\n".join(counted)

    def fixed_text(self, request: Mapping[str, Any]) -> str:
        parts = [request.get(key) for key in ("tools", "functions", "response_format")]
        present = [part for part in parts if part]
        return json.dumps(present, ensure_ascii=False, default=str) if present else ""

    def output_reserve(self, request: Mapping[str, Any]) -> int | None:
        reserve = request.get("max_completion_tokens") or request.get("max_tokens")
        return reserve if isinstance(reserve, int) and not isinstance(reserve, bool) else None

    def memory_item(self, text: str, role: str) -> dict[str, Any]:
        return {"role": role, "content": text}

    def validate(self, items: Sequence[Any]) -> list[str]:
        return check_tool_pairing(items)

    def endpoint(self, client: Any) -> Callable[..., Any] | None:
        completions = getattr(getattr(client, "chat", None), "completions", None)
        create = getattr(completions, "create", None)
        return create if callable(create) else None

    def conversation_hint(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
        key = body.get("prompt_cache_key") or body.get("user")
        return f"chat:{key}" if isinstance(key, str) and key else None

    def conversation_seed(self, body: Mapping[str, Any]) -> tuple[Any, ...]:
        messages = body.get("messages") or []
        system = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "system"][:1]
        return system, first_user_content(messages)

    def response_usage(self, body: Any) -> WireUsage | None:
        usage = body.get("usage") if isinstance(body, Mapping) else None
        return openai_usage(usage, "prompt_tokens", "prompt_tokens_details", "completion_tokens")

    def event_usage(self, event: Mapping[str, Any]) -> tuple[WireUsage, bool] | None:
        # Only the last chunk carries usage, and only when the client asked (include_usage).
        found = self.response_usage(event) if event.get("usage") else None
        return (found, True) if found is not None else None


def check_tool_pairing(messages: Sequence[Any], *, allow_pending_tail: bool = False) -> list[str]:
    """Problems with Chat Completions' tool pairing rules; an empty list means the list is valid.

    Every tool call id of an assistant message is answered by a ``role: "tool"`` message in the
    run of tool messages directly after it; every tool message answers a call of that assistant
    message; no call id is answered twice. With ``allow_pending_tail`` the last group may still
    lack results (a history whose results are not in yet).
    """
    dialect = ChatCompletions()
    try:
        entries = [dialect.read(message, index)[0] for index, message in enumerate(messages)]
    except PassThrough as exc:
        return [exc.reason]
    return _pairing(entries, adjacent=True, allow_pending_tail=allow_pending_tail)
