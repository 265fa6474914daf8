"""OpenAI Responses (``client.responses.create``, ``POST /v1/responses``; what Codex speaks).

Items are typed: ``message`` items (user, assistant, system, developer), ``function_call`` /
``function_call_output`` (and the custom and local-shell variants) paired by ``call_id`` anywhere
later in the list, ``reasoning`` items (often only ``encrypted_content``) that belong with the
items after them, and opaque ``compaction`` items: only history after the last of them may be
compiled, and they are never flattened or moved. A request with ``previous_response_id`` or a
``conversation`` carries server-side history and passes through; so does the agent's own
compaction request (a final ``compaction_trigger`` item, or Codex's checkpoint prompt as the last
user message). User messages that only carry the agent's context (``<environment_context>``,
``AGENTS.md``) are instructions, kept raw in place.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from .._conversation import (
    ASSISTANT,
    COMPACTION,
    INSTRUCTION,
    REASONING,
    TOOL,
    USER,
    Entry,
    ToolCall,
    ToolOutput,
    pairing_problems,
)
from .._injected import split_parts
from ._base import BaseDialect, PassThrough, as_mapping, canonical_digest, part_text, text_parts
from ._openai_wire import OpenAIWire, openai_usage
from ._provider_context import responses_ceiling
from ._wire import WireUsage, first_user_content

__all__ = ["CHECKPOINT_PROMPT", "OpenAIResponses", "is_checkpoint_request"]

_ROLES = {"system": INSTRUCTION, "developer": INSTRUCTION, "user": USER, "assistant": ASSISTANT}
_CALLS = {"function_call": "arguments", "custom_tool_call": "input", "local_shell_call": "action"}
_OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output", "local_shell_call_output"})
_COMPACTIONS = frozenset({"compaction", "compaction_summary"})
#: How Codex's own compaction prompt begins (codex-rs/core/templates/compact/prompt.md).
CHECKPOINT_PROMPT = "You are performing a CONTEXT CHECKPOINT COMPACTION"
#: Stream events that end a response, each with its final ``usage``.
_DONE_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed"})
#: Headers Codex names its thread in when the body has no ``prompt_cache_key``.
_SESSION_HEADERS = ("session-id", "session_id", "conversation_id")


def _parts_text(content: Any) -> tuple[str, str | None]:
    """Text of a message's content or a tool output (a string or parts), and a blocker if any."""
    if content is None or isinstance(content, str):
        return content or "", None
    if not isinstance(content, list):
        return "", f"content of type {type(content).__name__}"
    texts = []
    for part in content:
        text = part_text(part)
        if text is None and isinstance(part, Mapping) and part.get("type") == "refusal":
            text = str(part.get("refusal", ""))
        if text is None:
            kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
            return "", f"a {kind} content part"
        texts.append(text)
    return "\n".join(texts), None


def is_checkpoint_request(items: Sequence[Any]) -> bool:
    """Whether this is Codex's own compaction request: a normal request whose last item is a
    user message carrying its checkpoint prompt."""
    last = as_mapping(items[-1]) if items else None
    if not last or last.get("role") != "user" or last.get("type", "message") != "message":
        return False
    return any(
        text.lstrip().startswith(CHECKPOINT_PROMPT) for text in text_parts(last.get("content"))
    )


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


class OpenAIResponses(OpenAIWire, BaseDialect):
    """The OpenAI Responses dialect."""

    name: ClassVar[str] = "responses"
    items_key: ClassVar[str] = "input"
    adjacent_results: ClassVar[bool] = False
    memory_roles: ClassVar[tuple[str, ...]] = ("user", "developer", "system")
    method_name: ClassVar[str] = "responses.create"
    paths: ClassVar[tuple[str, ...]] = ("/v1/responses",)
    compaction_paths: ClassVar[tuple[str, ...]] = ("/v1/responses/compact",)

    def claims(self, request: Mapping[str, Any]) -> bool:
        # A body with both keys reads as the formats whose history is ``messages``.
        return "input" in request and "messages" not in request

    def provider_ceiling(self, request: Mapping[str, Any]) -> int | None:
        return responses_ceiling(request)

    def items(self, request: Mapping[str, Any]) -> Sequence[Any]:
        for key in ("previous_response_id", "conversation"):
            if request.get(key):
                raise PassThrough(
                    "server_history", f"the request carries {key}: history is on the server"
                )
        if isinstance(request.get("input"), str):
            return [{"role": "user", "content": request["input"]}]
        items = self._list(request)
        if items and (as_mapping(items[-1]) or {}).get("type") == "compaction_trigger":
            raise PassThrough(
                "agent_compaction", "the agent's own compaction request passes through"
            )
        if is_checkpoint_request(items):
            raise PassThrough(
                "agent_compaction", "Codex's own checkpoint compaction request passes through"
            )
        return items

    def read(self, item: Any, index: int) -> tuple[Entry, str]:
        data = self._mapping(item, index, "input item")
        kind = data.get("type", "message")
        digest = canonical_digest(data)
        if kind == "message":
            role = data.get("role")
            entry_kind = _ROLES.get(role) if isinstance(role, str) else None
            if entry_kind is None:
                raise PassThrough("unsupported_content", f"input item {index} has role {role!r}")
            text, blocker = _parts_text(data.get("content"))
            if entry_kind != USER:
                return Entry(entry_kind, role, text, blocker=blocker, digest=digest), text
            own, injected = split_parts(text_parts(data.get("content")))
            if injected and not own.strip() and blocker is None:
                # Codex's <environment_context>, AGENTS.md: the agent's context, never a task.
                return Entry(INSTRUCTION, role, digest=digest), text
            entry = Entry(USER, role, own, blocker=blocker, pinned=injected, digest=digest)
            return entry, text
        if kind in _CALLS:
            arguments = _as_text(data.get(_CALLS[kind], ""))
            name = str(data.get("name") or kind)
            call = ToolCall(str(data.get("call_id")), name, arguments)
            entry = Entry(ASSISTANT, "assistant", calls=(call,), digest=digest)
            return entry, f"{call.id}\n{name}\n{arguments}"
        if kind in _OUTPUTS:
            call_id = data.get("call_id") if kind != "local_shell_call_output" else data.get("id")
            text, blocker = _parts_text(data.get("output"))
            output = ToolOutput(str(call_id), text)
            entry = Entry(TOOL, "tool", outputs=(output,), blocker=blocker, digest=digest)
            return entry, f"{call_id}\n{text}"
        if kind == "reasoning":
            # Opaque: dropped whole when compiled, and glued to the item it precedes.
            summary = " ".join(
                str(part.get("text", ""))
                for part in data.get("summary") or ()
                if isinstance(part, Mapping)
            )
            counted = summary + str(data.get("encrypted_content") or "")
            return Entry(REASONING, "assistant", glue_next=True, digest=digest), counted
        if kind in _COMPACTIONS:
            return Entry(COMPACTION, "opaque", digest=digest), str(
                data.get("encrypted_content") or ""
            )
        if data.get("role") in ("developer", "system"):
            # Codex's additional_tools item and the like: the agent's own instructions.
            return Entry(INSTRUCTION, str(data["role"]), digest=digest), _as_text(data)
        # item_reference, web_search_call, computer_call, mcp_*, ...: kept verbatim, never compiled.
        entry = Entry(ASSISTANT, "opaque", blocker=f"a {kind} item", digest=digest)
        return entry, json.dumps(data, ensure_ascii=False, default=str)

    def fixed_text(self, request: Mapping[str, Any]) -> str:
        keys = ("instructions", "tools", "text")
        present = [request.get(key) for key in keys if request.get(key)]
        return json.dumps(present, ensure_ascii=False, default=str) if present else ""

    def output_reserve(self, request: Mapping[str, Any]) -> int | None:
        reserve = request.get("max_output_tokens")
        return reserve if isinstance(reserve, int) and not isinstance(reserve, bool) else None

    def memory_item(self, text: str, role: str) -> dict[str, Any]:
        return {"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]}

    def validate(self, items: Sequence[Any]) -> list[str]:
        """Outputs answer an earlier call by ``call_id``; a reasoning item has an item after it;
        compaction items come before everything that was compiled."""
        try:
            entries = [self.read(item, index)[0] for index, item in enumerate(items)]
        except PassThrough as exc:
            return [exc.reason]
        problems = pairing_problems(entries, adjacent=False)
        if entries and entries[-1].kind == REASONING:
            problems.append(f"item {len(entries) - 1}: a reasoning item with nothing after it")
        return problems

    def endpoint(self, client: Any) -> Callable[..., Any] | None:
        create = getattr(getattr(client, "responses", None), "create", None)
        return create if callable(create) else None

    def conversation_hint(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
        key = body.get("prompt_cache_key")
        if isinstance(key, str) and key:
            return f"responses:{key}"
        for name in _SESSION_HEADERS:
            if headers.get(name):
                return f"responses:{headers[name]}"
        return None

    def conversation_seed(self, body: Mapping[str, Any]) -> tuple[Any, ...]:
        return body.get("instructions"), first_user_content(body.get("input"))

    def response_usage(self, body: Any) -> WireUsage | None:
        usage = body.get("usage") if isinstance(body, Mapping) else None
        return openai_usage(usage, "input_tokens", "input_tokens_details", "output_tokens")

    def event_usage(self, event: Mapping[str, Any]) -> tuple[WireUsage, bool] | None:
        if event.get("type") not in _DONE_EVENTS or not isinstance(event.get("response"), Mapping):
            return None
        found = self.response_usage(event["response"])
        return (found, True) if found is not None else None
