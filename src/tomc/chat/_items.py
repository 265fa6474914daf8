"""Per-item reads of the previous request, so a request costs about its new items."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ._conversation import Entry
from ._meter import CALL_OVERHEAD, ITEM_OVERHEAD, TokenMeter
from .dialects import Dialect

__all__ = ["ItemCache", "read_item"]


def read_item(dialect: Dialect, meter: TokenMeter, item: Any, index: int) -> Entry:
    """One item as an entry, with its token count: its text by ``meter`` plus the framing of
    the item and of each tool call or result it carries."""
    entry, counted = dialect.read(item, index)
    structure = len(entry.calls) + len(entry.outputs)
    return replace(entry, tokens=meter.count(counted) + ITEM_OVERHEAD + CALL_OVERHEAD * structure)


class ItemCache:
    """Per-item reads of the previous request, so a request costs about its new items.

    Items are compared with a structural snapshot taken when they were read (containers copied,
    strings shared): an unchanged item compares equal at C speed, and an item edited in place
    or replaced reads again. Objects that are not dicts or lists (SDK models) compare by identity.
    """

    def __init__(self) -> None:
        self.key: tuple[str, int, bool, float] | None = None
        self.snapshots: list[Any] = []
        self.entries: list[Entry] = []

    def read(self, dialect: Dialect, meter: TokenMeter, items: Sequence[Any]) -> list[Entry]:
        # Entries are counted by the meter as it is now (its learned factor too), so that what
        # the cache gives back is what a fresh read would: it only saves time.
        key = (dialect.name, id(meter.counter), meter.exact, meter.factor)
        if key != self.key:
            self.key, self.snapshots, self.entries = key, [], []
        same = 0
        limit = min(len(items), len(self.snapshots))
        snapshots = self.snapshots
        while same < limit and _same(items[same], snapshots[same]):
            same += 1
        entries = self.entries[:same]
        snapshots = snapshots[:same]
        for index in range(same, len(items)):
            entries.append(read_item(dialect, meter, items[index], index))
            snapshots.append(_snapshot(items[index]))
        self.snapshots, self.entries = snapshots, entries
        return entries


def _snapshot(value: Any) -> Any:
    if type(value) is dict:
        return {key: _snapshot(item) for key, item in value.items()}
    if type(value) is list:
        return [_snapshot(item) for item in value]
    return value


def _same(item: Any, snapshot: Any) -> bool:
    if type(item) is dict or type(item) is list:
        return item == snapshot
    return item is snapshot
