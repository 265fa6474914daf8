"""State replay: execute SET and COPY in source order, keeping each value's provenance.

A COPY snapshots its source's value at that point in the history, and its provenance is the
source's whole chain plus the copy itself. Its twin in ``tests/reference.py`` copies whole
tuples; the property tests check that they agree. Unit indexes are positions in the source
table (``u{index}``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .operations import Copy, Set
from .result import UNKNOWN

__all__ = ["StateEntry", "replay_state"]


@dataclass(frozen=True, slots=True)
class StateEntry:
    name: str
    value: str
    source_units: tuple[int, ...]  # the whole supporting chain, oldest first
    last_unit: int  # the unit that last wrote this variable


class _Link:
    """One step of a provenance chain; copies share their source's chain instead of copying it."""

    __slots__ = ("parent", "unit")

    def __init__(self, unit: int, parent: _Link | None) -> None:
        self.unit = unit
        self.parent = parent

    def units(self) -> tuple[int, ...]:
        out = []
        link: _Link | None = self
        while link is not None:
            out.append(link.unit)
            link = link.parent
        out.reverse()
        return tuple(out)


def replay_state(operations: Iterable[tuple[int, Set | Copy]]) -> list[StateEntry]:
    """Execute SET and COPY in source order; a COPY snapshots its source's value at that point.

    Linear in the number of operations: a copy links to its source's provenance rather than
    copying the chain. Entries come in order of each variable's first write.
    """
    values: dict[str, tuple[str, _Link, int]] = {}
    for unit, op in operations:
        if type(op) is Set:
            values[op.name] = (op.value, _Link(unit, None), unit)
        else:
            source = values.get(op.source)
            if source is None:
                values[op.target] = (UNKNOWN, _Link(unit, None), unit)
            else:
                values[op.target] = (source[0], _Link(unit, source[1]), unit)
    return [
        StateEntry(name, value, link.units(), last) for name, (value, link, last) in values.items()
    ]
