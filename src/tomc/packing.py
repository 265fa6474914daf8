"""Whole-row packing: take rows in priority order whenever they still fit the budget.

A row is packed whole or not at all, so the memory never cuts a record or a source line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .counters import LexicalCounter, TokenCounter
from .records import CAPS, Record
from .sources import SourceTable

__all__ = ["pack_records", "pack_sources", "row_costs", "row_texts"]


def row_texts(table: SourceTable) -> Sequence[str]:
    """What each source unit packs as: its text, after ``role: `` in a chat history."""
    if not table.is_chat:
        return table.texts
    return [f"{role}: {text}" for role, text in zip(table.roles, table.texts, strict=True)]


def row_costs(rows: Sequence[str], table: SourceTable, counter: TokenCounter) -> list[int]:
    """Each row's tokens as it is packed: newline-terminated."""
    if isinstance(counter, LexicalCounter):
        count = counter.count
        if not table.is_chat:
            return [count(row) for row in rows]
        # Lexical counts are additive across a space, so count each role prefix once.
        prefix = {role: count(f"{role}: ") for role in set(table.roles)}
        return [prefix[r] + count(t) for r, t in zip(table.roles, table.texts, strict=True)]
    return [counter.count(row + "\n") for row in rows]


def pack_records(records: list[Record], budget: int, counter: TokenCounter, uncapped: bool) -> int:
    """Mark the eligible records that fit, in order, at most ``CAPS`` per kind; tokens used."""
    used = 0
    kept_per_kind: dict[str, int] = {}
    for record in records:
        if not record.eligible:
            continue
        cap = CAPS[record.kind]
        if not uncapped and kept_per_kind.get(record.kind, 0) >= cap:
            record.reason = f"over cap ({cap} {record.kind} rows)"
            continue
        kept_per_kind[record.kind] = kept_per_kind.get(record.kind, 0) + 1
        record.tokens = counter.count(record.text + "\n")
        if used + record.tokens <= budget:
            used += record.tokens
            record.included = True
            record.reason = (
                "task-relevant; fits record budget" if record.relevant else "fits record budget"
            )
        else:
            record.reason = f"over record budget (needs {record.tokens}, {budget - used} left)"
    return used


def pack_sources(order: Iterable[int], row_tokens: Sequence[int], budget: int) -> list[int]:
    """The rows, taken in ``order`` whenever they still fit, back in source order."""
    left = budget
    kept = []
    for index in order:
        cost = row_tokens[index]
        if cost <= left:
            left -= cost
            kept.append(index)
    kept.sort()
    return kept
