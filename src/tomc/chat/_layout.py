"""Where a request's history may be compiled: pure layout decisions over neutral entries.

Protected, and always sent raw and byte-identical: instruction items (kept in order, ahead of a
memory), the latest user message (the task), the most recent items, the latest assistant item
and everything after it (its thinking, and the pending tool protocol), and every item up to the
last opaque compaction item. Tool calls and their results, and a reasoning item and what follows
it, are never separated.

Everything else falls into at most two regions, so that nothing that happened after the task is
shown before it: the ``history`` region before the task, and the ``work`` region of finished tool
groups after it. Each region becomes one memory item in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._conversation import (
    ASSISTANT,
    COMPACTION,
    REASONING,
    TOOL,
    USER,
    Entry,
    allowed_cuts,
    latest_index,
)

__all__ = ["HISTORY", "WORK", "Layout", "Region", "plan_layout"]

HISTORY = "history"
WORK = "work"


@dataclass(frozen=True, slots=True)
class Region:
    """Items ``[start, end)`` replaced by one memory (instruction items inside are kept)."""

    start: int
    end: int
    kind: str


@dataclass(frozen=True, slots=True)
class Layout:
    """The regions to compile, where the raw tail starts, and the task's index."""

    regions: tuple[Region, ...]
    tail: int
    task: int | None
    floor: int


def _tail_start(cuts: Sequence[bool], floor: int, limit: int) -> int:
    """The largest allowed cut in ``[floor, limit]``, else ``floor``."""
    for cut in range(limit, floor - 1, -1):
        if cuts[cut]:
            return cut
    return floor


def plan_layout(entries: Sequence[Entry], keep_recent: int) -> Layout:
    """Regions that may be compiled when the ``keep_recent`` newest messages stay raw."""
    cuts = allowed_cuts(entries)
    compaction = latest_index(entries, COMPACTION)
    floor = 0 if compaction is None else compaction + 1
    task = latest_index(entries, USER)
    limit = _recent_start(entries, keep_recent)
    last_assistant = latest_index(entries, ASSISTANT)
    if last_assistant is not None:
        limit = min(limit, last_assistant)
    tail = _tail_start(cuts, floor, max(floor, limit))
    regions: list[Region] = []
    if task is not None and task < floor:
        # The task lies inside what the provider compacted; what follows it is work.
        if _compilable(entries, floor, tail):
            regions.append(Region(floor, tail, WORK))
    else:
        history_end = tail if task is None else min(task, tail)
        if _compilable(entries, floor, history_end):
            regions.append(Region(floor, history_end, HISTORY))
        if task is not None and tail > task + 1:
            regions.append(Region(task + 1, tail, WORK))
    return Layout(tuple(regions), tail, task, floor)


def _recent_start(entries: Sequence[Entry], keep_recent: int) -> int:
    """Where the ``keep_recent`` newest messages begin, counted as Chat Completions counts them,
    so every format protects the same tail: one assistant turn (a Responses message and its
    function calls are several items) is one message, each tool result is one message (an
    Anthropic user message of three results is three), and reasoning items count for nothing."""
    seen = 0
    for index in range(len(entries) - 1, -1, -1):
        if seen >= keep_recent:
            return index + 1
        entry = entries[index]
        if entry.kind == TOOL:
            seen += max(1, len(entry.outputs))
        elif entry.kind == REASONING:
            continue
        elif entry.kind == ASSISTANT and index > 0 and entries[index - 1].kind == ASSISTANT:
            continue  # the same turn as the item before it
        else:
            seen += 1
    return 0


def _compilable(entries: Sequence[Entry], start: int, end: int) -> bool:
    return any(not entries[index].kept for index in range(start, end))
