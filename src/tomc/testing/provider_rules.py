"""The rules each real API enforces on a request, with its error wording, stated independently of
TOMC: the fake provider rejects what the real provider would (tool pairing in all three formats,
Anthropic's ``thinking.block_binding`` without its beta header), so a rewritten request the real
provider would refuse is refused here too.

Anthropic's preserved-thinking prefix check (:func:`sign_thinking`, :func:`failing_thinking`,
:func:`prefix_mismatch_error`) lives here too, as the documentation states it; the scripted agent
upstream (``tests/agent_upstream.py``) signs its thinking blocks and checks them with it. Each
rule names its source:

- :data:`PRESERVED_THINKING` ``#prefix-check``: a block's prefix is the top-level ``system``,
  the set of ``tools`` and every message before it; parameters outside those three and
  ``cache_control`` markers are not part of it.
- :data:`PRESERVED_THINKING` ``#what-counts-as-an-edit``: appending messages, adding or moving
  ``cache_control`` markers, changing other parameters, adding a tool with ``defer_loading:
  true`` that nothing has referenced yet, and removing thinking blocks from the start, the end
  or all of them keep later thinking valid; editing an earlier message, ``system`` or ``tools``,
  removing a thinking block from the middle, or putting back one removed earlier does not.
- :data:`PRESERVED_THINKING` ``#prefix-check`` ("Earlier thinking blocks aren't in the prefix,
  but each thinking block records which thinking block came before it"): the thinking blocks
  kept must be an unbroken run of the sequence a block was produced after.
- :data:`PREFIX_CHECKS` (and the keep-tail compaction example of :data:`PRESERVED_THINKING`):
  a change invalidates only the thinking already after it; thinking produced afterwards stays
  valid.
- :data:`MESSAGES_API`: a message's ``content`` given as a string "is shorthand for an array of
  one content block of type text": the two forms are the same message, so the check compares
  them as equal.
- :data:`PRESERVED_THINKING` ``#mismatch-behavior``: the 400's wording (continued with the beta
  header's name when the request lacks it); ``"drop_block"`` drops each failing block, and under
  enforcement a failing block takes the rest of its turn's thinking blocks with it ("Check
  whether your code edits the prefix"); a tampered signature is always a 400; the token counting
  endpoint runs the same check (``#preserved-thinking-controls``).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "BINDING_BETA",
    "FIX_BOUND",
    "MESSAGES_API",
    "PREFIX_CHECKS",
    "PRESERVED_THINKING",
    "RULES",
    "SIGNATURE_PREFIX",
    "binding_beta",
    "drop_thinking",
    "failing_thinking",
    "prefix_mismatch_error",
    "sign_thinking",
    "tampered_thinking",
    "thinking_prefix",
]

BINDING_BETA = "thinking-binding-controls-2026-08-01"
#: The sources of the preserved-thinking rules below.
PRESERVED_THINKING = "https://platform.claude.com/docs/en/build-with-claude/preserved-thinking"
PREFIX_CHECKS = (
    "https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks"
)
FIX_BOUND = (
    "https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/"
    "fix-bound-to-a-different-conversation"
)
MESSAGES_API = "https://platform.claude.com/docs/en/api/messages/create"
#: What starts every signature the fakes sign (a signature without it is not theirs: unchecked).
SIGNATURE_PREFIX = "EqTOMCfake1."
THINKING_TYPES = ("thinking", "redacted_thinking")


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


# ---------------------------------------------------------------------- preserved thinking


def _without_cache_control(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _without_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_without_cache_control(v) for v in value]
    return value


def _content(message: Mapping[str, Any]) -> list[Any]:
    """A message's content as blocks: a string is one text block (MESSAGES_API)."""
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _is_thinking(block: Any) -> bool:
    return isinstance(block, Mapping) and block.get("type") in THINKING_TYPES


def _references(value: Any, into: set[str]) -> set[str]:
    """The tool names ``tool_reference`` blocks anywhere in ``value`` name."""
    if isinstance(value, Mapping):
        if value.get("type") == "tool_reference":
            for key in ("name", "tool_name"):
                if isinstance(value.get(key), str):
                    into.add(value[key])
        for item in value.values():
            _references(item, into)
    elif isinstance(value, list):
        for item in value:
            _references(item, into)
    return into


def thinking_prefix(
    body: Mapping[str, Any], message_index: int, earlier_blocks: Sequence[Any]
) -> str:
    """The hash a thinking block at ``messages[message_index]``, after ``earlier_blocks`` of its
    own message, is bound to: ``system``, ``tools`` and the messages before it (PRESERVED_THINKING
    #prefix-check), with no ``cache_control`` marker, no thinking block (earlier thinking is not
    in the prefix), each message's string content as its one text block (MESSAGES_API), and no
    ``defer_loading: true`` tool that nothing before the block references yet
    (PRESERVED_THINKING #what-counts-as-an-edit, #tool-changes)."""
    messages = list(body.get("messages") or [])[:message_index]
    before = [b for b in earlier_blocks if not _is_thinking(b)]
    referenced = _references([messages, before], set())
    tools = [
        tool
        for tool in body.get("tools") or []
        if not (
            isinstance(tool, Mapping)
            and tool.get("defer_loading") is True
            and tool.get("name") not in referenced
        )
    ]
    canonical = {
        "system": body.get("system"),
        "tools": tools,
        "messages": [
            {**m, "content": [b for b in _content(m) if not _is_thinking(b)]}
            if isinstance(m, Mapping)
            else m
            for m in messages
        ],
        "blocks": before,
    }
    text = json.dumps(_without_cache_control(canonical), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _signed(signature: Any) -> dict[str, Any] | None:
    """What a signature of ours records; ``{}`` for a tampered one; ``None``: not ours."""
    if not isinstance(signature, str) or not signature.startswith(SIGNATURE_PREFIX):
        return None
    try:
        payload = json.loads(base64.b64decode(signature[len(SIGNATURE_PREFIX) :], validate=True))
        if (
            isinstance(payload["p"], str)
            and isinstance(payload["id"], str)
            and isinstance(payload["seen"], int)
        ):
            return payload
    except (ValueError, KeyError, TypeError):
        pass
    return {}


def _kept_thinking(messages: Iterable[Any], blocks: Sequence[Any]) -> list[str]:
    """The ids of our signed thinking blocks in ``messages`` then ``blocks``, in order."""
    ids = []
    for message in messages:
        for block in _content(message) if isinstance(message, Mapping) else []:
            if _is_thinking(block) and (signed := _signed(block.get("signature"))):
                ids.append(signed["id"])
    for block in blocks:
        if _is_thinking(block) and (signed := _signed(block.get("signature"))):
            ids.append(signed["id"])
    return ids


def sign_thinking(
    body: Mapping[str, Any], message_index: int, earlier_blocks: Sequence[Any], block_id: str
) -> str:
    """The signature of a thinking block the fake produces at ``messages[message_index]``
    (the answer's index) after ``earlier_blocks`` of the answer, for the request ``body`` as the
    model read it (failing blocks already dropped): its prefix hash, its id, and the thinking
    block it came after with how many it saw (PRESERVED_THINKING #prefix-check: "each thinking
    block records which thinking block came before it, across turns")."""
    seen = _kept_thinking(list(body.get("messages") or [])[:message_index], earlier_blocks)
    payload = {
        "p": thinking_prefix(body, message_index, earlier_blocks),
        "id": block_id,
        "after": seen[-1] if seen else None,
        "seen": len(seen),
    }
    encoded = json.dumps(payload, separators=(",", ":")).encode()
    return SIGNATURE_PREFIX + base64.b64encode(encoded).decode()


def tampered_thinking(body: Mapping[str, Any]) -> tuple[int, int] | None:
    """(message, block) of the first thinking block whose signature looks like ours but does not
    decode: a 400 whatever ``prefix_mismatch_behavior`` says (PRESERVED_THINKING
    #mismatch-behavior)."""
    for i, message in enumerate(body.get("messages") or []):
        for j, block in enumerate(_content(message) if isinstance(message, Mapping) else []):
            if _is_thinking(block) and _signed(block.get("signature")) == {}:
                return i, j
    return None


def failing_thinking(body: Mapping[str, Any]) -> list[tuple[int, int]]:
    """(message, block) of every thinking block that fails the prefix check, in order.

    A block of ours passes when its prefix hash is unchanged and the thinking blocks kept before
    it in this request are an unbroken run ending with the one it came after: none at all (all
    removed from the start), or the one it recorded last with no more than it saw
    (PRESERVED_THINKING #prefix-check, #what-counts-as-an-edit). Each block is judged on its own,
    so thinking produced after a change stays valid (PREFIX_CHECKS); a failing block takes the rest
    of its turn's thinking blocks with it (PRESERVED_THINKING, "Check whether your code edits the
    prefix": "a failing block also takes the rest of that turn's thinking blocks with it"). Blocks
    not signed by the fakes are not checked.
    """
    out: list[tuple[int, int]] = []
    kept: list[str] = []
    for i, message in enumerate(body.get("messages") or []):
        if not isinstance(message, Mapping):
            continue
        blocks = _content(message)
        turn_failed = False
        for j, block in enumerate(blocks):
            if not _is_thinking(block):
                continue
            signed = _signed(block.get("signature"))
            if not signed:
                continue  # not ours (a tampered one is tampered_thinking's)
            valid = (
                not turn_failed
                and signed["p"] == thinking_prefix(body, i, blocks[:j])
                and (not kept or (kept[-1] == signed.get("after") and len(kept) <= signed["seen"]))
            )
            if valid:
                kept.append(signed["id"])
            else:
                turn_failed = True
                out.append((i, j))
    return out


def prefix_mismatch_error(where: tuple[int, int], headers: Mapping[str, str]) -> str:
    """The 400 message for a block that fails the prefix check (PRESERVED_THINKING
    #mismatch-behavior; FIX_BOUND)."""
    i, j = where
    message = (
        f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block. The block is bound "
        "to a different conversation. Remove the block, or set "
        '`thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
    )
    if not binding_beta(headers):
        message += (
            f" That setting requires the `{BINDING_BETA}` value in the `anthropic-beta` header."
        )
    return message


def drop_thinking(body: Mapping[str, Any], where: Iterable[tuple[int, int]]) -> dict[str, Any]:
    """``body`` without the blocks at ``where`` (what the model reads under ``"drop_block"``)."""
    drop = set(where)
    messages = []
    for i, message in enumerate(body.get("messages") or []):
        if any(i == m for m, _ in drop) and isinstance(message, Mapping):
            blocks = [b for j, b in enumerate(_content(message)) if (i, j) not in drop]
            message = {**message, "content": blocks}
        messages.append(message)
    return {**body, "messages": messages}


RULES: dict[str, Callable[[Mapping[str, Any], Mapping[str, str]], str | None]] = {
    "messages": _messages_problem,
    "count_tokens": _messages_problem,
    "chat": _chat_problem,
    "responses": _responses_problem,
    "compact": _responses_problem,
}
