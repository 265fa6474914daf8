"""The rules each real API enforces on a request, with its error wording, stated independently of
TOMC: the fake provider rejects what the real provider would (tool pairing in all three formats,
Anthropic's ``thinking.block_binding`` without its beta header), so a rewritten request the real
provider would refuse is refused here too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["BINDING_BETA", "RULES", "binding_beta"]

BINDING_BETA = "thinking-binding-controls-2026-08-01"


def binding_beta(headers: Mapping[str, str]) -> bool:
    """Whether the request's ``anthropic-beta`` header lists the thinking-binding beta."""
    return BINDING_BETA in _betas(headers)


def _betas(headers: Mapping[str, str]) -> list[str]:
    return [b.strip() for b in headers.get("anthropic-beta", "").split(",") if b.strip()]


def _blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _messages_problem(body: Mapping[str, Any], headers: Mapping[str, str]) -> str | None:
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping) and "block_binding" in thinking and not binding_beta(headers):
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


RULES: dict[str, Callable[[Mapping[str, Any], Mapping[str, str]], str | None]] = {
    "messages": _messages_problem,
    "count_tokens": _messages_problem,
    "chat": _chat_problem,
    "responses": _responses_problem,
    "compact": _responses_problem,
}
