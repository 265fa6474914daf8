"""State replay: execute SET and COPY in source order, keeping each value's provenance.

A COPY snapshots its source's value at that point in the history, and its provenance is the
source's whole chain plus the copy itself. Its twin in ``tests/reference.py`` copies whole
tuples; the property tests check that they agree. Unit indexes are positions in the source
table (``u{index}``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from .operations import Copy, Set
from .result import UNKNOWN

__all__ = ["CHAIN_EDGE", "Chain", "StateEntry", "replaced_writes", "replay_state"]


#: How many units a chain keeps at each end for display (the memory shows 4 + 4 ids).
CHAIN_EDGE = 4


class Chain:
    """A provenance chain, shared by every copy made from it.

    A copy's chain is its source's chain plus the copy's own unit, so each COPY is one new
    link, not a new tuple. Length and the first and last :data:`CHAIN_EDGE` units are known
    in O(1); the whole tuple is built only when asked for (iterating, :meth:`units`).
    """

    __slots__ = ("head", "length", "parent", "tail", "unit")

    def __init__(self, unit: int, parent: Chain | None = None) -> None:
        self.unit = unit
        self.parent = parent
        if parent is None:
            self.length = 1
            self.head: tuple[int, ...] = (unit,)
            self.tail: tuple[int, ...] = (unit,)
        else:
            self.length = parent.length + 1
            self.head = parent.head if len(parent.head) >= CHAIN_EDGE else (*parent.head, unit)
            self.tail = (*parent.tail[-(CHAIN_EDGE - 1) :], unit)

    def __len__(self) -> int:
        return self.length

    def __iter__(self) -> Iterator[int]:
        return iter(self.units())

    def units(self) -> tuple[int, ...]:
        """Every unit of the chain, oldest first (O(length))."""
        out = []
        link: Chain | None = self
        while link is not None:
            out.append(link.unit)
            link = link.parent
        out.reverse()
        return tuple(out)


@dataclass(frozen=True, slots=True)
class StateEntry:
    name: str
    value: str
    chain: Chain  # the whole supporting chain, oldest first
    last_unit: int  # the unit that last wrote this variable

    @property
    def source_units(self) -> tuple[int, ...]:
        return self.chain.units()


def replay_state(operations: Iterable[tuple[int, Set | Copy]]) -> list[StateEntry]:
    """Execute SET and COPY in source order; a COPY snapshots its source's value at that point.

    Linear in the number of operations: a copy links to its source's :class:`Chain` rather
    than copying it. Entries come in order of each variable's first write.
    """
    values: dict[str, tuple[str, Chain]] = {}
    for unit, op in operations:
        if type(op) is Set:
            values[op.name] = (op.value, Chain(unit))
        else:
            source = values.get(op.source)
            if source is None:
                values[op.target] = (UNKNOWN, Chain(unit))
            else:
                values[op.target] = (source[0], Chain(unit, source[1]))
    return [StateEntry(name, value, chain, chain.unit) for name, (value, chain) in values.items()]


def replaced_writes(operations: Iterable[tuple[int, Set | Copy]]) -> dict[int, StateEntry]:
    """Unit -> its variable's entry, for every write whose value a later write replaced with
    another (a write of the value the variable still holds replaced nothing a reader needs to
    know). Linear: one replay that keeps each write's value, then one pass over the writes."""
    ops = list(operations)
    values: dict[str, str] = {}
    written: list[tuple[int, str, str]] = []
    for unit, op in ops:
        if type(op) is Set:
            name, value = op.name, op.value
        else:
            name, value = op.target, values.get(op.source, UNKNOWN)
        values[name] = value
        written.append((unit, name, value))
    entries = {entry.name: entry for entry in replay_state(ops)}
    replaced: dict[int, StateEntry] = {}
    for unit, name, value in written:
        entry = entries[name]
        if unit != entry.last_unit and value != entry.value:
            replaced[unit] = entry
    return replaced
