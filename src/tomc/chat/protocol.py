"""Reading Chat Completions messages: what is supported, tool groups, pairing rules, boundaries.

Everything here is pure: functions take the caller's messages and return facts about them.
The session decides what to do with those facts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..counters import LexicalCounter

__all__ = [
    "ToolGroup",
    "as_message",
    "canonical",
    "check_tool_pairing",
    "content_text",
    "estimate_tokens",
    "history_hash",
    "latest_user_index",
    "message_text",
    "protected_boundary",
    "tool_groups",
    "unsupported_reason",
]

ROLES = frozenset({"system", "developer", "user", "assistant", "tool"})
INSTRUCTION_ROLES = frozenset({"system", "developer"})
# Fields the wrapper understands. Anything else non-empty (audio, reasoning_content,
# encrypted reasoning, legacy function_call, ...) may be opaque to us, so it is never flattened.
_KNOWN_FIELDS = frozenset({"role", "content", "name", "tool_calls", "tool_call_id", "refusal"})
_TEXT_PARTS = frozenset({"text"})
OVERHEAD_PER_MESSAGE = 4  # role and separators, as providers bill them; a rough constant

_LEXICAL = LexicalCounter()


def as_message(message: Any) -> dict[str, Any] | None:
    """The message as a plain dict, or ``None`` when it is neither a mapping nor a pydantic model.

    SDK response objects (``response.choices[0].message``) are often appended to histories as
    they are; they are read through ``model_dump`` without changing the original object.
    """
    if isinstance(message, Mapping):
        return dict(message)
    dump = getattr(message, "model_dump", None)
    if callable(dump):
        try:
            data = dump(exclude_none=True)
        except Exception:
            return None
        return data if isinstance(data, dict) else None
    return None


def _is_empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def unsupported_reason(messages: Sequence[dict[str, Any]]) -> str | None:
    """Why this history must pass through unchanged, or ``None`` when it is plain text chat."""
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ROLES:
            return f"message {index} has unsupported role {role!r}"
        for key, value in message.items():
            if key not in _KNOWN_FIELDS and not _is_empty(value):
                return f"message {index} carries field {key!r} (opaque or non-text)"
        content = message.get("content")
        if content is None or isinstance(content, str):
            pass
        elif isinstance(content, list):
            for part in content:
                kind = part.get("type") if isinstance(part, Mapping) else None
                if kind not in _TEXT_PARTS or not isinstance(part.get("text"), str):
                    return f"message {index} has a non-text content part ({kind or 'unknown'})"
        else:
            return f"message {index} has content of type {type(content).__name__}"
        calls = message.get("tool_calls")
        if not _is_empty(calls):
            if role != "assistant" or not isinstance(calls, list):
                return f"message {index} has tool_calls outside an assistant message"
            for call in calls:
                if not isinstance(call, Mapping) or not isinstance(call.get("id"), str):
                    return f"message {index} has a tool call without an id"
                if call.get("type", "function") != "function":
                    return f"message {index} has a non-function tool call ({call.get('type')})"
    return None


def content_text(message: Mapping[str, Any]) -> str:
    """The text of a message's content (text parts joined by newlines)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"] for part in content if isinstance(part, Mapping) and "text" in part
        )
    return ""


def message_text(message: Mapping[str, Any]) -> str:
    """A faithful text rendering of one message for compilation and token estimates."""
    lines = [content_text(message)]
    if message.get("refusal"):
        lines.append(f"[refusal] {message['refusal']}")
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        arguments = function.get("arguments", "")
        lines.append(f"[tool call {call.get('id')}] {function.get('name', '')}({arguments})")
    if message.get("role") == "tool":
        lines[0] = f"[tool result {message.get('tool_call_id', '')}] {lines[0]}"
    return "\n".join(line for line in lines if line)


def estimate_tokens(message: Mapping[str, Any]) -> int:
    """Lexical estimate of one message, with a small per-message overhead."""
    return _LEXICAL.count(message_text(message)) + OVERHEAD_PER_MESSAGE


def canonical(message: Mapping[str, Any]) -> str:
    """A canonical serialisation of one message (sorted keys), for hashing and caching."""
    return json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)


def history_hash(canonical_messages: Sequence[str]) -> str:
    """A digest of canonical messages; used to notice edits before a frozen boundary."""
    digest = hashlib.sha256()
    for text in canonical_messages:
        digest.update(text.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


@dataclass(frozen=True, slots=True)
class ToolGroup:
    """An assistant ``tool_calls`` message at ``start`` and the tool results up to ``end``.

    ``end`` is exclusive and covers the contiguous run of ``role: "tool"`` messages after the
    call. ``missing`` lists call ids with no result in that run (a pending or broken group).
    """

    start: int
    end: int
    call_ids: tuple[str, ...]
    missing: tuple[str, ...]


def tool_groups(messages: Sequence[Mapping[str, Any]]) -> list[ToolGroup]:
    """Every assistant message with tool calls, with the tool results that follow it."""
    groups = []
    index = 0
    while index < len(messages):
        message = messages[index]
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if not calls:
            index += 1
            continue
        ids = tuple(str(call.get("id")) for call in calls)
        end = index + 1
        answered = set()
        while end < len(messages) and messages[end].get("role") == "tool":
            answered.add(messages[end].get("tool_call_id"))
            end += 1
        missing = tuple(call_id for call_id in ids if call_id not in answered)
        groups.append(ToolGroup(index, end, ids, missing))
        index = end
    return groups


def check_tool_pairing(
    messages: Sequence[Mapping[str, Any]], *, allow_pending_tail: bool = False
) -> list[str]:
    """Problems with the provider's tool pairing rules; an empty list means the history is valid.

    The rules (OpenAI Chat Completions; other compatible providers enforce the same): every tool
    call id of an assistant message is answered by a ``role: "tool"`` message in the run of tool
    messages directly after it; every tool message answers a call of that assistant message;
    no call id is answered twice. With ``allow_pending_tail`` the last group may still lack
    results (a request that is not ready to be sent, but whose shape is otherwise sound).
    """
    problems: list[str] = []
    open_ids: set[str] | None = None  # the call ids of the assistant message heading this run
    answered: set[str] = set()
    pending_start: int | None = None
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "tool":
            call_id = message.get("tool_call_id")
            if open_ids is None:
                problems.append(f"message {index}: tool result {call_id!r} without a tool call")
            elif call_id not in open_ids:
                problems.append(f"message {index}: tool result {call_id!r} answers no open call")
            elif call_id in answered:
                problems.append(f"message {index}: tool call {call_id!r} answered twice")
            else:
                answered.add(call_id)
            continue
        if open_ids is not None and open_ids - answered:
            missing = ", ".join(sorted(open_ids - answered))
            problems.append(f"message {pending_start}: tool calls without results: {missing}")
        open_ids, answered, pending_start = None, set(), None
        calls = message.get("tool_calls") if role == "assistant" else None
        if calls:
            ids = [str(call.get("id")) for call in calls]
            if len(set(ids)) != len(ids):
                problems.append(f"message {index}: duplicate tool call ids")
            open_ids, pending_start = set(ids), index
    if open_ids is not None and open_ids - answered and not allow_pending_tail:
        missing = ", ".join(sorted(open_ids - answered))
        problems.append(f"message {pending_start}: tool calls without results: {missing}")
    return problems


def latest_user_index(messages: Sequence[Mapping[str, Any]]) -> int | None:
    """Index of the last ``role: "user"`` message, if any."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            return index
    return None


def protected_boundary(messages: Sequence[Mapping[str, Any]], keep_recent: int) -> int:
    """The largest index ``b`` such that ``messages[b:]`` holds everything that must stay raw.

    That is the ``keep_recent`` most recent messages, the latest user message, the last
    assistant message when it made tool calls (its results are the pending protocol) and every
    group still missing results. The boundary never falls inside a tool group.
    """
    boundary = max(0, len(messages) - max(0, keep_recent))
    last_user = latest_user_index(messages)
    if last_user is not None:
        boundary = min(boundary, last_user)
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "assistant":
            if messages[index].get("tool_calls"):
                boundary = min(boundary, index)
            break
    for group in tool_groups(messages):
        if group.missing:
            boundary = min(boundary, group.start)
        if group.start < boundary < group.end:
            boundary = group.start
    # A stray tool message at the boundary would leave the tail starting mid-protocol.
    while 0 < boundary < len(messages) and messages[boundary].get("role") == "tool":
        boundary -= 1
    return boundary
