"""The neutral view of a request's history that the session policy works on.

Each wire format (Chat Completions, Anthropic Messages, OpenAI Responses) has a dialect that reads
one item of its list (a message, or a Responses input item) into an :class:`Entry`. The policy
never looks at wire JSON: it sees kinds, tool-call ids, the text that could be compiled, whether
an item can be compiled at all, and a token count. Everything here is pure.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ASSISTANT",
    "COMPACTION",
    "INSTRUCTION",
    "REASONING",
    "TOOL",
    "USER",
    "Entry",
    "ToolCall",
    "ToolOutput",
    "allowed_cuts",
    "latest_index",
    "pairing_problems",
]

INSTRUCTION = "instruction"  # system / developer items inside the list
USER = "user"  # a user turn with text: a task
ASSISTANT = "assistant"  # assistant text and/or tool calls
TOOL = "tool"  # tool results (Anthropic: a user message of tool_result blocks)
REASONING = "reasoning"  # an opaque reasoning item that belongs to the item after it
COMPACTION = "compaction"  # a provider's opaque compaction item: nothing before it is compiled
KINDS = (INSTRUCTION, USER, ASSISTANT, TOOL, REASONING, COMPACTION)


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call as the model made it: its id, tool name and arguments (as sent)."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> object | None:
        """The arguments read as JSON; ``None`` when they are not JSON (a custom tool's text) or
        nest deeper than the parser goes (``json`` raises ``RecursionError`` there)."""
        try:
            return json.loads(self.arguments)
        except (ValueError, TypeError, RecursionError):
            return None


@dataclass(frozen=True, slots=True)
class ToolOutput:
    """One tool result: the call it answers and its text."""

    call_id: str
    text: str
    is_error: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class Entry:
    """One item of a request's history list, as the policy sees it.

    ``text`` is the item's own text (not its tool calls or results). ``blocker`` says why the item
    cannot be turned into text (an image, a file, an unknown block): such an item may stay raw, but
    a history that would need it compiled passes through. Thinking and reasoning are not blockers:
    inside the compiled region they are dropped whole, never turned into text. ``signed_thinking``
    marks an item that carries thinking bound to the prefix before it. ``glue_next`` keeps an item
    with the one after it (a Responses reasoning item and its output). ``pinned`` marks a user
    turn that carries agent-injected instructions (see :mod:`tomc.chat._injected`): it stays raw
    in place like an instruction, and its ``text`` is the user's own words only. ``tokens`` is the
    item's count by the session's meter; ``digest`` identifies its exact content.
    """

    kind: str
    role: str
    text: str = ""
    calls: tuple[ToolCall, ...] = ()
    outputs: tuple[ToolOutput, ...] = ()
    glue_next: bool = False
    blocker: str | None = None
    signed_thinking: bool = False
    pinned: bool = False
    tokens: int = 0
    digest: bytes = b""

    @property
    def kept(self) -> bool:
        """Sent raw and in place even inside a compiled region (instructions, pinned turns)."""
        return self.kind == INSTRUCTION or self.pinned


def latest_index(entries: Sequence[Entry], kind: str) -> int | None:
    """Index of the last entry of ``kind``, if any."""
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].kind == kind:
            return index
    return None


def allowed_cuts(entries: Sequence[Entry]) -> list[bool]:
    """``cuts[b]`` says whether the list may be split between ``entries[b-1]`` and ``entries[b]``.

    A cut may not separate a tool call from any of its results, an item glued to the next, or
    two assistant items in a row (one turn: a Responses message and its function calls).
    ``cuts`` has ``len(entries) + 1`` slots; both ends are always allowed when nothing is open.
    """
    cuts = [True] * (len(entries) + 1)
    open_calls: set[str] = set()
    for index, entry in enumerate(entries):
        for output in entry.outputs:
            open_calls.discard(output.call_id)
        for call in entry.calls:
            open_calls.add(call.id)
        following = entries[index + 1] if index + 1 < len(entries) else None
        same_turn = (
            following is not None and entry.kind == ASSISTANT and following.kind == ASSISTANT
        )
        cuts[index + 1] = not open_calls and not entry.glue_next and not same_turn
    return cuts


def pairing_problems(
    entries: Sequence[Entry], *, adjacent: bool, allow_pending_tail: bool = False
) -> list[str]:
    """Broken tool pairing in a history; an empty list means it is sound.

    Every result must answer a call made earlier and not yet answered, and every call must be
    answered. With ``adjacent`` (Chat Completions and Anthropic), results must come right after
    the item that made the calls, before the conversation moves on. Responses pairs by ``call_id``
    anywhere later in the list. ``allow_pending_tail`` accepts calls of the last calling item that
    are still unanswered at the end (a history whose results are not in yet).
    """
    problems: list[str] = []
    open_calls: dict[str, int] = {}
    for index, entry in enumerate(entries):
        for output in entry.outputs:
            if output.call_id in open_calls:
                del open_calls[output.call_id]
            else:
                problems.append(
                    f"item {index}: tool result {output.call_id!r} answers no open call"
                )
        if adjacent and open_calls and entry.kind != TOOL:
            problems.append(_unanswered(open_calls))  # the conversation moved on
            open_calls.clear()
        ids = [call.id for call in entry.calls]
        if len(set(ids)) != len(ids):
            problems.append(f"item {index}: duplicate tool call ids")
        for call_id in ids:
            if call_id in open_calls:
                problems.append(f"item {index}: tool call id {call_id!r} reused while open")
            open_calls[call_id] = index
    if open_calls:
        last_caller = max(open_calls.values())
        pending = all(index == last_caller for index in open_calls.values()) and all(
            entries[i].kind == TOOL for i in range(last_caller + 1, len(entries))
        )
        if not (allow_pending_tail and pending):
            problems.append(_unanswered(open_calls))
    return problems


def _unanswered(open_calls: dict[str, int]) -> str:
    missing = ", ".join(sorted(open_calls))
    return f"item {min(open_calls.values())}: tool calls without results: {missing}"
