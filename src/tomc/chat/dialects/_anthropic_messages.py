"""Anthropic Messages (``client.messages.create``, ``POST /v1/messages``).

Items are ``user`` and ``assistant`` messages whose content is a string or a list of blocks.
Tool calls are ``tool_use`` blocks of an assistant message; their ``tool_result`` blocks come
first in the very next user message. ``thinking`` (with its ``signature``) and
``redacted_thinking`` blocks go back verbatim with their turn: inside the compiled region they
are dropped whole with it, never turned into text.

Newer models bind a thinking signature to everything before it (system, tools and earlier
messages): after a rewrite, a raw turn's thinking would fail that check. By default the session
takes the provider's documented route for compaction that keeps a raw tail: the turns stay as
they are and ``thinking.block_binding.prefix_mismatch_behavior = "drop_block"`` goes with the
``thinking-binding-controls-2026-08-01`` beta, so the provider drops the stale blocks instead of
refusing the request (a request without a ``thinking`` parameter gets ``"adaptive"``: its model
thinks by default, since its history carries signed thinking). With
``thinking_prefix="passthrough"``, thinking disabled, or a caller's own ``block_binding`` that
asks for errors, such a request passes through (``thinking_bound``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from .._conversation import (
    ASSISTANT,
    COMPACTION,
    INSTRUCTION,
    TOOL,
    USER,
    Entry,
    ToolCall,
    ToolOutput,
)
from .._injected import split_parts
from ._base import BaseDialect, PassThrough, as_mapping, canonical_digest
from ._pricing import ANTHROPIC_BILLING, CacheBilling, CachePricing, anthropic_pricing
from ._provider_context import anthropic_ceiling
from ._wire import Upstream, WireUsage, count, first_user_content

__all__ = ["ANTHROPIC", "BINDING_BETA", "AnthropicMessages", "is_compaction_request"]

#: Anthropic's API; its base URL has no ``/v1`` (the SDKs and Claude Code add it).
ANTHROPIC = Upstream("anthropic", "https://api.anthropic.com")
#: Headers only Anthropic's clients send: a request carrying them goes to Anthropic.
_ANTHROPIC_HEADERS = ("anthropic-version", "x-api-key")
#: The session id inside ``metadata.user_id`` before Claude Code v2.1.78.
_LEGACY_SESSION = re.compile(r"_session_([0-9a-fA-F-]{8,})")

BINDING_BETA = "thinking-binding-controls-2026-08-01"
_THINKING = frozenset({"thinking", "redacted_thinking"})
# Claude Code's own summarisation request: its last user message carries all of these.
_COMPACTION_MARKS = (
    "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.",
    "Your task is to create a detailed summary of the conversation so far",
)
_COMPACTION_SECTIONS = ("Pending Tasks:", "Current Work:")


def _block_text(content: Any) -> tuple[str, str | None]:
    """Text of a tool_result's content (a string or text blocks), and a blocker if any."""
    if content is None or isinstance(content, str):
        return content or "", None
    texts = []
    for block in content if isinstance(content, list) else [content]:
        if isinstance(block, Mapping) and block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        else:
            kind = block.get("type") if isinstance(block, Mapping) else type(block).__name__
            return "", f"a {kind} block in a tool result"
    return "\n".join(texts), None


#: Cache breakpoints a request may carry (platform.claude.com, prompt caching).
MAX_BREAKPOINTS = 4


def _breakpoints(body: Mapping[str, Any]) -> list[tuple[tuple[int, int], Mapping[str, Any]]]:
    """Every ``cache_control`` of a request in prefix order (tools, system, then messages), as
    ``((part, message index), control)``; a top-level (automatic) one takes a slot too."""
    found: list[tuple[tuple[int, int], Mapping[str, Any]]] = []

    def scan(blocks: Any, position: tuple[int, int]) -> None:
        for block in blocks if isinstance(blocks, list) else ():
            control = block.get("cache_control") if isinstance(block, Mapping) else None
            if isinstance(control, Mapping):
                found.append((position, control))

    scan(body.get("tools"), (-2, 0))
    scan(body.get("system"), (-1, 0))
    for number, message in enumerate(body.get("messages") or ()):
        if isinstance(message, Mapping):
            scan(message.get("content"), (1, number))
    top = body.get("cache_control")
    if isinstance(top, Mapping):
        found.append(((2, 0), top))
    return found


def _claude_session(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    """Claude Code's session: the ``x-claude-code-session-id`` header, else the session id in
    ``metadata.user_id`` (a JSON string since v2.1.78, ``..._session_<uuid>`` before); a
    subagent's ``x-claude-code-agent-id`` makes its own conversation."""
    session = headers.get("x-claude-code-session-id")
    if not session:
        metadata = body.get("metadata")
        user_id = metadata.get("user_id") if isinstance(metadata, Mapping) else None
        if isinstance(user_id, str):
            try:
                decoded = json.loads(user_id)
            except ValueError:
                decoded = None
            if isinstance(decoded, Mapping) and isinstance(decoded.get("session_id"), str):
                session = decoded["session_id"]
            elif match := _LEGACY_SESSION.search(user_id):
                session = match[1]
    if not session:
        return None
    agent = headers.get("x-claude-code-agent-id")
    return f"claude:{session}" + (f":agent:{agent}" if agent else "")


def _usage(usage: Any, transformations: Any) -> WireUsage:
    """Anthropic's ``usage`` (``input_tokens`` is only the uncached part) and the number of
    ``thinking_dropped`` entries of its ``input_transformations`` (with the binding beta)."""
    dropped = None
    if isinstance(transformations, list):
        dropped = sum(
            1
            for entry in transformations
            if isinstance(entry, Mapping) and entry.get("type") == "thinking_dropped"
        )
    if not isinstance(usage, Mapping):
        return WireUsage(thinking_dropped=dropped)
    return WireUsage(
        uncached_tokens=count(usage.get("input_tokens")),
        cache_read_tokens=count(usage.get("cache_read_input_tokens")),
        cache_write_tokens=count(usage.get("cache_creation_input_tokens")),
        output_tokens=count(usage.get("output_tokens")),
        thinking_dropped=dropped,
    )


def is_compaction_request(messages: Sequence[Any]) -> bool:
    """Whether this is Claude Code's summarisation request (it passes through untouched)."""
    if not messages:
        return False
    last = as_mapping(messages[-1]) or {}
    if last.get("role") != "user":
        return False
    content = last.get("content")
    if isinstance(content, list):
        content = "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "text"
        )
    if not isinstance(content, str):
        return False
    return all(mark in content for mark in _COMPACTION_MARKS) and any(
        section in content for section in _COMPACTION_SECTIONS
    )


class AnthropicMessages(BaseDialect):
    """The Anthropic Messages dialect."""

    name: ClassVar[str] = "messages"
    items_key: ClassVar[str] = "messages"
    adjacent_results: ClassVar[bool] = True
    memory_roles: ClassVar[tuple[str, ...]] = ("user",)
    method_name: ClassVar[str] = "messages.create"
    paths: ClassVar[tuple[str, ...]] = ("/v1/messages",)
    upstreams: ClassVar[tuple[Upstream, ...]] = (ANTHROPIC,)
    cache_billing: ClassVar[CacheBilling] = ANTHROPIC_BILLING
    usage_marks: ClassVar[tuple[bytes, ...]] = (b"usage", b"input_transformations")

    def cache_pricing(self, request: Mapping[str, Any]) -> CachePricing:
        return anthropic_pricing([control for _, control in _breakpoints(request)])

    def provider_ceiling(self, request: Mapping[str, Any]) -> int | None:
        return anthropic_ceiling(request)

    def items(self, request: Mapping[str, Any]) -> Sequence[Any]:
        messages = self._list(request)
        if is_compaction_request(messages):
            raise PassThrough(
                "agent_compaction", "the agent's own summarisation request passes through"
            )
        return messages

    def read(self, item: Any, index: int) -> tuple[Entry, str]:
        message = self._mapping(item, index, "message")
        role = message.get("role")
        if role == "system":
            # A mid-conversation system message (Claude Code sends its agent and skills list as
            # one) is an instruction: it stays raw where it is, before any memory of its region.
            text = json.dumps(message.get("content"), ensure_ascii=False, default=str)
            return Entry(INSTRUCTION, "system", digest=canonical_digest(message)), text
        if role not in ("user", "assistant"):
            text = json.dumps(message.get("content"), ensure_ascii=False, default=str)
            entry = Entry(
                INSTRUCTION,
                str(role),
                blocker=f"a {role!r} message",
                digest=canonical_digest(message),
            )
            return entry, text
        content = message.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list):
            raise PassThrough("invalid_request", f"message {index} content is not a list or string")
        if role == "assistant" and any(
            isinstance(block, Mapping) and block.get("type") == "compaction" for block in blocks
        ):
            # Server-side compaction's summary (compact_20260112): the provider ignores what came
            # before it, so nothing before it is compiled and the message goes back as it came.
            text = json.dumps(blocks, ensure_ascii=False, default=str)
            return Entry(COMPACTION, "assistant", digest=canonical_digest(message)), text
        texts: list[str] = []
        counted: list[str] = []
        calls: list[ToolCall] = []
        outputs: list[ToolOutput] = []
        blocker: str | None = None
        thinking = False
        for block in blocks:
            if not isinstance(block, Mapping):
                raise PassThrough("invalid_request", f"message {index} has a non-object block")
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
                counted.append(texts[-1])
            elif kind == "tool_use" and role == "assistant":
                arguments = json.dumps(block.get("input", {}), ensure_ascii=False, default=str)
                calls.append(ToolCall(str(block.get("id")), str(block.get("name", "")), arguments))
                counted.extend((calls[-1].id, calls[-1].name, arguments))
            elif kind == "tool_result" and role == "user":
                text, problem = _block_text(block.get("content"))
                outputs.append(
                    ToolOutput(str(block.get("tool_use_id")), text, bool(block.get("is_error")))
                )
                counted.extend((outputs[-1].call_id, text))
                blocker = blocker or problem
            elif kind in _THINKING and role == "assistant":
                thinking = True
                counted.append(str(block.get("thinking") or block.get("data") or ""))
            else:
                blocker = blocker or f"a {kind or 'untyped'} block"
                counted.append(json.dumps(block, ensure_ascii=False, default=str))
        kind_of = ASSISTANT if role == "assistant" else (TOOL if outputs else USER)
        text, injected = ("\n".join(texts), False) if role == "assistant" else split_parts(texts)
        pinned = injected and kind_of == USER
        if pinned and not text.strip() and blocker is None:
            kind_of, pinned = INSTRUCTION, False  # only the agent's own context: never a task
        entry = Entry(
            kind=kind_of,
            role=role,
            text=text,
            pinned=pinned,
            calls=tuple(calls),
            outputs=tuple(outputs),
            blocker=blocker,
            signed_thinking=thinking,
            digest=canonical_digest(message),
        )
        return entry, "\n".join(counted)

    def fixed_text(self, request: Mapping[str, Any]) -> str:
        present = [request.get(key) for key in ("system", "tools") if request.get(key)]
        return json.dumps(present, ensure_ascii=False, default=str) if present else ""

    def output_reserve(self, request: Mapping[str, Any]) -> int | None:
        reserve = request.get("max_tokens")
        return reserve if isinstance(reserve, int) and not isinstance(reserve, bool) else None

    def memory_item(self, text: str, role: str) -> dict[str, Any]:
        return {"role": "user", "content": [{"type": "text", "text": text}]}

    def validate(self, items: Sequence[Any]) -> list[str]:
        """Tool results answer the directly preceding assistant's tool_use ids and come first."""
        problems: list[str] = []
        previous_calls: set[str] = set()
        for index, item in enumerate(items):
            message = as_mapping(item) or {}
            content = message.get("content")
            blocks = content if isinstance(content, list) else []
            if message.get("role") == "user":
                results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
                leading = 0
                while leading < len(blocks) and blocks[leading].get("type") == "tool_result":
                    leading += 1
                if leading != len(results):
                    problems.append(f"message {index}: tool_result blocks must come first")
                if previous_calls and set(results) != previous_calls:
                    problems.append(
                        f"message {index}: tool_result ids {sorted(map(str, results))} do not "
                        f"answer the preceding tool_use ids {sorted(previous_calls)}"
                    )
                elif results and not previous_calls:
                    problems.append(f"message {index}: tool_result without a preceding tool_use")
                previous_calls = set()
            else:
                if previous_calls:
                    problems.append(f"message {index}: tool_use ids without tool_result after them")
                previous_calls = {str(b.get("id")) for b in blocks if b.get("type") == "tool_use"}
        if previous_calls:
            problems.append(
                f"tool_use ids without tool_result after them: {sorted(previous_calls)}"
            )
        return problems

    def finalize(
        self,
        body: dict[str, Any],
        raw_after_change: Sequence[Entry],
        thinking_prefix: str,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """The documented route for a rewrite that keeps raw turns with signed thinking after it
        (platform.claude.com, preserved thinking, "Compact on the client"): keep the turns
        exactly as they are and send ``prefix_mismatch_behavior: "drop_block"`` with its beta,
        so the provider drops the stale blocks (and lists them in ``input_transformations``)
        instead of refusing the request. A caller's own ``block_binding`` is kept as it is:
        if it asks for errors, the request passes through."""
        if not any(entry.signed_thinking for entry in raw_after_change):
            return body, {}
        thinking = body.get("thinking")
        enabled = isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")
        binding = thinking.get("block_binding") if isinstance(thinking, Mapping) else None
        if isinstance(binding, Mapping) and "prefix_mismatch_behavior" in binding:
            if binding.get("prefix_mismatch_behavior") == "drop_block":
                return body, {"anthropic-beta": BINDING_BETA}
            raise PassThrough(
                "thinking_bound",
                "the caller's thinking.block_binding asks for an error when a prefix changes, and "
                "raw turns after the rewritten prefix carry signed thinking",
            )
        if thinking is None:
            # Signed thinking without a thinking parameter: the model thinks by default, and for
            # such models the docs say adding `"adaptive"` changes nothing else.
            thinking, enabled = {"type": "adaptive"}, True
        if thinking_prefix != "drop_block" or not enabled:
            raise PassThrough(
                "thinking_bound",
                "raw turns after the rewritten prefix carry signed thinking, which the provider "
                "binds to that prefix; with thinking_prefix='drop_block' (the default) and "
                "thinking on, the provider drops them instead",
            )
        binding = {"prefix_mismatch_behavior": "drop_block"}
        return {**body, "thinking": {**thinking, "block_binding": binding}}, {
            "anthropic-beta": BINDING_BETA
        }

    def cache_memory(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        """A ``cache_control`` breakpoint on the newest memory block, so a later append finds
        everything up to it cached (Anthropic writes cache entries only at breakpoints, and a
        rebuild changes what follows the memory, where the agent's own breakpoint sits).

        Only when the request already uses breakpoints (the agent caches) and has fewer than the
        four allowed; the marker copies the agent's next breakpoint after it (else the last one
        before it), so its TTL never breaks the longer-before-shorter order."""
        marks = _breakpoints(body)
        if not marks or len(marks) >= MAX_BREAKPOINTS:
            return body
        later = [control for position, control in marks if position > (1, index)]
        control = later[0] if later else marks[-1][1]
        messages = list(body["messages"])
        message = dict(messages[index])
        content = list(message.get("content") or ())
        if not content or not isinstance(content[-1], Mapping):
            return body
        content[-1] = {**content[-1], "cache_control": dict(control)}
        messages[index] = {**message, "content": content}
        return {**body, "messages": messages}

    def endpoint(self, client: Any) -> Callable[..., Any] | None:
        create = getattr(getattr(client, "messages", None), "create", None)
        # An OpenAI client has no top-level ``messages``; a thread-messages resource would take
        # other arguments, so require the Anthropic shape of the resource too.
        return create if callable(create) and hasattr(client, "messages") else None

    # ------------------------------------------------------------------ wire facts

    def owns(self, path: str, headers: Mapping[str, str]) -> bool:
        # count_tokens, batches, and Anthropic's clients on shared paths (``/v1/models``).
        return path.startswith("/v1/messages") or any(h in headers for h in _ANTHROPIC_HEADERS)

    def conversation_hint(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
        return _claude_session(headers, body)

    def conversation_seed(self, body: Mapping[str, Any]) -> tuple[Any, ...]:
        return body.get("system"), first_user_content(body.get("messages"))

    def response_usage(self, body: Any) -> WireUsage | None:
        if not isinstance(body, Mapping):
            return None
        return _usage(body.get("usage"), body.get("input_transformations"))

    def event_usage(self, event: Mapping[str, Any]) -> tuple[WireUsage, bool] | None:
        """``message_start`` reports the input (and the dropped thinking); the final
        ``message_delta`` closes the figures, and after a server-side model fallback carries an
        ``input_transformations`` list that replaces the first."""
        kind = event.get("type")
        if kind == "message_start" and isinstance(event.get("message"), Mapping):
            message = event["message"]
            return _usage(message.get("usage"), message.get("input_transformations")), False
        if kind == "message_delta":
            usage = event.get("usage")
            found = _usage(usage, event.get("input_transformations"))
            return found, isinstance(usage, Mapping)
        return None

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": kind, "message": message}}
