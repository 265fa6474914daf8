"""Result types of a compilation: source units, ledger rows and the compile result."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from .inspector import render_inspection

__all__ = ["KINDS", "UNKNOWN", "CompileResult", "LedgerRow", "SourceUnit"]

UNKNOWN = "<UNKNOWN>"
KINDS = ("state", "relation", "count", "source")


@dataclass(frozen=True, slots=True)
class SourceUnit:
    """One nonempty content line of the history, exactly as submitted.

    ``id`` is ``u0, u1, ...`` over nonempty lines in order; ``role`` is the chat role (``None``
    for a plain-text history); ``message_index`` and ``line_index`` locate the line.
    """

    id: str
    text: str
    role: str | None
    message_index: int
    line_index: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "role": self.role,
            "message_index": self.message_index,
            "line_index": self.line_index,
        }


@dataclass(frozen=True, slots=True)
class LedgerRow:
    """One candidate record or source line, and what packing decided about it.

    ``kind`` is ``state | relation | count | source``. For state rows ``key`` is the variable
    and ``value`` its final value; for count rows ``key`` is the term and ``value`` the number
    of occurrences; for relation rows ``key`` is the path; for source rows ``key`` is the unit
    id and ``value`` its BM25 score. ``text`` is exactly what is packed when ``included``,
    except that a source line in a group of lines sharing a stamp is packed without it, under
    the group's stamp line (its ``reason`` says so).
    """

    kind: str
    key: str
    value: str
    text: str
    source_ids: tuple[str, ...]
    tokens: int
    included: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "key": self.key,
            "value": self.value,
            "text": self.text,
            "source_ids": list(self.source_ids),
            "tokens": self.tokens,
            "included": self.included,
            "reason": self.reason,
        }


@dataclass(frozen=True)
class CompileResult:
    """What :func:`tomc.compile_memory` returns.

    ``strategy`` is the strategy asked for; ``applied_strategy`` is what ran (``auto``
    resolves to ``tomc_raw``, ``rag`` or ``unchanged``). ``sources`` and ``ledger`` are built on
    first access, so a caller who only wants the memory does not pay for the audit trail.
    """

    compiled_memory: str
    route: str
    route_reason: str
    strategy: str
    applied_strategy: str
    budget_tokens: int
    memory_tokens: int
    _count_input: Callable[[], int] = field(repr=False, compare=False)
    tokens_by_kind: Mapping[str, int]
    caps_exceeded: Mapping[str, bool]
    latency_s: float
    counter: str
    task: str
    _build_sources: Callable[[], tuple[SourceUnit, ...]] = field(repr=False, compare=False)
    _build_ledger: Callable[[], tuple[LedgerRow, ...]] = field(repr=False, compare=False)

    @cached_property
    def input_tokens(self) -> int:
        """The history's tokens (by ``counter``); records only counts them on first access."""
        return self._count_input()

    @cached_property
    def sources(self) -> tuple[SourceUnit, ...]:
        return self._build_sources()

    @cached_property
    def ledger(self) -> tuple[LedgerRow, ...]:
        return self._build_ledger()

    @property
    def included_rows(self) -> tuple[LedgerRow, ...]:
        return tuple(row for row in self.ledger if row.included)

    def to_dict(self, *, include_sources: bool = True) -> dict[str, Any]:
        """A JSON-serialisable view (stable key order)."""
        data: dict[str, Any] = {
            "compiled_memory": self.compiled_memory,
            "route": self.route,
            "route_reason": self.route_reason,
            "strategy": self.strategy,
            "applied_strategy": self.applied_strategy,
            "counter": self.counter,
            "task": self.task,
            "budget_tokens": self.budget_tokens,
            "memory_tokens": self.memory_tokens,
            "input_tokens": self.input_tokens,
            "tokens_by_kind": dict(self.tokens_by_kind),
            "caps_exceeded": dict(self.caps_exceeded),
            "latency_s": self.latency_s,
            "ledger": [row.to_dict() for row in self.ledger],
        }
        if include_sources:
            data["sources"] = [unit.to_dict() for unit in self.sources]
        return data

    def inspect(self, *, full: bool = False) -> str:
        """The plain-text inspector (``full``: every source unit and source id, nothing summed
        up)."""
        return render_inspection(self, full=full)
