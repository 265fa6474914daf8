"""Building one memory for one region: compiled chat history, or finished agent work.

A region of plain dialogue goes through the core compiler (exact records plus BM25-selected
lines, :func:`tomc.compile_memory`); a region with tool calls is rendered as agent work
(:mod:`.work_memory`), because its lines only make sense under the call that produced them.
Each memory starts with a header that says what it stands for and where it sits in time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .._core.compiler import compile_memory
from .._core.mentions import TaskMentions
from .._core.values import is_literal
from ._conversation import TOOL, Entry
from ._layout import WORK
from ._meter import TokenMeter
from ._work_memory import build_work_memory

__all__ = [
    "CONTINUED_PREFIX",
    "HISTORY_HEADER",
    "MEMORY_MARK",
    "WORK_HEADER",
    "EarlierWork",
    "RegionMemory",
    "build_region_memory",
    "entry_text",
]

#: How every memory item's text begins (each header below starts with it).
MEMORY_MARK = "[TOMC memory"
HISTORY_HEADER = (
    "[TOMC memory of {count} earlier items, from before the current task, compiled on the CPU. "
    "It replaces them in this request: records are exact; source lines are selected excerpts "
    "in their original order, so a detail that is missing here was left out, not absent.]"
)
WORK_HEADER = (
    "[TOMC memory of the work so far on the current task: {calls} earlier tool calls and the "
    "agent's notes, compiled on the CPU; the newest steps follow unchanged after it. Kept output "
    "lines appear under the call that produced them, in their original order; a line that is "
    "missing here was left out, not absent.]"
)
CONTINUED_PREFIX = "[TOMC memory, continued"
#: An appended block's header: the first block says how to read a block, and a long session
#: appends many (at 16K each in a few hundred tokens of room: the longer wording cost 1.0 point
#: of the replay's patch evidence there).
CONTINUED_HEADER = (
    CONTINUED_PREFIX + ": {calls} more tool calls on the current task, in the form of the "
    "block above; a value listed here replaces that key's value in earlier blocks.]"
)
#: At most this share of a work memory goes to exact records (when the task asks for them): an
#: agent's next step mostly needs the output lines, and code lines such as ``x = compute()``
#: read as assignments. On the real trajectories, tomc_raw's 42% cost rebuilds for no evidence.
WORK_RECORD_SHARE = 0.25
#: A deep memory still gives exact records this many tokens (at most half its budget): a few
#: dozen current values cost less than the lines they stand for.
MIN_RECORD_TOKENS = 512
#: The compiler's routes whose records (of the route's own kind) a work memory shows; values
#: have a section of their own (:mod:`.work_values`), beside the STATE rows the task names.
WORK_RECORD_ROUTES = ("relation", "count")
HISTORY_WORK_HEADER = (
    "[TOMC memory of {count} earlier items, from before the current task, with {calls} tool "
    "calls, compiled on the CPU. Kept output lines appear under the call that produced them, in "
    "their original order; a line that is missing here was left out, not absent.]"
)


@dataclass(frozen=True, slots=True)
class EarlierWork:
    """The work earlier blocks stand for (its first call's number) and what they show."""

    entries: tuple[Entry, ...]
    text: str
    first_call_number: int


@dataclass(frozen=True, slots=True)
class RegionMemory:
    """The text of one memory and how it was made (``tomc_raw``, ``rag``, ``work``, ...)."""

    text: str
    strategy: str


def entry_text(entry: Entry) -> str:
    """A faithful text rendering of one entry: its text, tool calls and results."""
    lines = [entry.text] if entry.text else []
    lines.extend(f"[tool call {c.id}] {c.name}({c.arguments})" for c in entry.calls)
    # The marker gets its own line, so an output's first line parses like any other.
    lines.extend(f"[tool result {o.call_id}]\n{o.text}" for o in entry.outputs)
    return "\n".join(lines)


def build_region_memory(
    entries: Sequence[Entry],
    *,
    kind: str,
    task: str,
    focus: Sequence[Entry],
    later: Sequence[Entry],
    budget: int,
    meter: TokenMeter,
    strategy: str,
    compiler: Callable[..., Any] | None = None,
    first_call_number: int = 1,
    continued: bool = False,
    earlier: EarlierWork | None = None,
) -> RegionMemory:
    """One memory for ``entries`` within ``budget`` tokens of ``meter``; ``continued`` marks a
    block appended after earlier memory blocks of the same work."""
    content = [entry for entry in entries if not entry.kept]
    has_tools = any(entry.calls or entry.kind == TOOL for entry in content)
    # The compiler refuses NUL bytes as binary data; in a tool's output they are shown escaped.
    history = [
        {"role": entry.role, "content": entry_text(entry).replace("\x00", "\\x00")}
        for entry in content
    ]
    compile_fn = compiler or compile_memory
    if kind == WORK or has_tools:
        calls = sum(len(entry.calls) for entry in content)
        template = WORK_HEADER if kind == WORK else HISTORY_WORK_HEADER
        template = CONTINUED_HEADER if continued else template
        header = template.format(count=len(content), calls=calls)
        if strategy in ("tomc", "tomc_raw"):
            # Exact records first when the task asks for them (a value, a relation, a count);
            # they count against the budget like the lines that follow.
            share = budget
            if strategy != "tomc":
                share = max(
                    math.floor(budget * WORK_RECORD_SHARE), min(MIN_RECORD_TOKENS, budget // 2)
                )
            counter, room = _compiler_room(meter, share)
            records = compile_fn(
                history, task, budget_tokens=max(0, room), strategy="tomc", counter=counter
            )
            # Relations and counts, and the values (copies executed) of keys the task names
            # when they are literals: code is full of `x = compute()` lines, which are no
            # values; the rest of the values head the work memory in a section of their own.
            named = set(TaskMentions(task).variables([r.key for r in records.ledger]))
            rows = [
                row.text
                for row in records.ledger
                if row.included
                and (
                    row.kind == records.route in WORK_RECORD_ROUTES
                    or (row.kind == "state" and row.key in named and is_literal(row.value))
                )
            ]
            if rows:
                header = "\n".join([header, *rows])
        later_text = "\n".join(entry_text(entry) for entry in later)
        memory = build_work_memory(
            content,
            task=task,
            focus=focus,
            later_text=later_text,
            budget=budget,
            count=meter.count,
            header=header,
            first_call_number=first_call_number,
            earlier=(
                None
                if earlier is None
                else (earlier.entries, earlier.text, earlier.first_call_number)
            ),
        )
        return RegionMemory(memory.text, "work")
    header = HISTORY_HEADER.format(count=len(content)) + "\n"
    counter, room = _compiler_room(meter, budget - meter.count(header))
    result = compile_fn(
        history, task, budget_tokens=max(0, room), strategy=strategy, counter=counter
    )
    return RegionMemory(header + result.compiled_memory, result.applied_strategy)


def _compiler_room(meter: TokenMeter, tokens: int) -> tuple[Any, int]:
    """The counter and budget to give the compiler for ``tokens`` of the meter."""
    if meter.exact:
        return meter.counter, tokens
    # The compiler counts with the meter's own counter (lexical, or o200k for a model whose
    # tokenizer is unpublished); the meter adds its safety factor on top. Counting lexically
    # under an o200k meter let a memory come out over its budget.
    return meter.counter, math.floor(tokens / meter.factor)
