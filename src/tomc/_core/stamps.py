"""Shared stamps: neighbouring lines that open with the same dated stamp show it once.

A chat export or a log often opens each line with the time it was said (``[1:56 pm on 8 May,
2023] Caroline: ...``), the same for every line of a session. In the memory such a stamp is
written once, on a line of its own, above the kept lines of its group; each of them keeps
the rest of its text exactly. The stamp costs a tenth to a third of a chat line; on LoCoMo the
room it frees holds more evidence at every budget.

Only a history whose every line opens with a stamp has groups: in the memory, a line
without a stamp of its own would read as said at the time of the group above it. There, a
group is a run of at least two consecutive source lines whose stamps are identical; a stamp is
bracketed, holds a digit (a time or a date, not a level such as ``[INFO]``) and is followed by a
space, and the rest of the line does not open with another (it would read as a line with a stamp
of its own, which is how a reader tells a line outside a group). Since a group is a run of
source lines, its kept lines are consecutive in the memory and its stamp is written exactly
once. A group whose stamp the counter would join to the text after it (a pre-token across the
line break) is left as it is, so costs stay additive.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from .tokens import TokenCounter, row_costs

__all__ = ["StampGroups", "find_stamp_groups"]

_STAMP = re.compile(r"\[[^\]\n]{0,80}\d[^\]\n]{0,80}\] ")


@dataclass(frozen=True, slots=True)
class StampGroups:
    """Rows as packed under their group's stamp, and the groups' stamp lines."""

    rows: Sequence[str]  # each row, without its stamp where it is in a group
    row_tokens: Sequence[int]
    group_of: dict[int, int]  # unit -> its group (grouped units only)
    headers: list[str]  # group -> the stamp as a line of its own
    header_tokens: list[int]

    @classmethod
    def none(cls, rows: Sequence[str], row_tokens: Sequence[int]) -> StampGroups:
        """The rows as they are, in no group."""
        return cls(rows, row_tokens, {}, [], [])

    @property
    def grouped(self) -> bool:
        return bool(self.group_of)


def _runs(rows: Sequence[str]) -> list[tuple[int, int, str]]:
    """``(first, last, stamp)`` of every run of two or more rows opening with one stamp; none
    unless every row opens with a stamp."""
    runs: list[tuple[int, int, str]] = []
    first, current = 0, None
    for index, row in enumerate([*rows, ""]):
        found = _STAMP.match(row) if row.startswith("[") else None
        if found is None and index < len(rows):
            return []  # a line without a stamp would read as one of the group above it
        stamp = found.group() if found else None
        if stamp and _STAMP.match(row, len(stamp)):
            stamp = None  # its rest would read as a line with a stamp of its own
        if stamp != current:
            if current is not None and index - first >= 2:
                runs.append((first, index - 1, current))
            first, current = index, stamp
    return runs


def find_stamp_groups(
    rows: Sequence[str], row_tokens: Sequence[int], counter: TokenCounter
) -> StampGroups:
    """The stamp groups of ``rows`` (none: the rows as they are)."""
    runs = _runs(rows)
    if not runs:
        return StampGroups.none(rows, row_tokens)
    out_rows, out_tokens = list(rows), list(row_tokens)
    headers = [stamp.rstrip() for _, _, stamp in runs]
    members = [
        (unit, g) for g, (first, last, _) in enumerate(runs) for unit in range(first, last + 1)
    ]
    stripped = [rows[unit][len(runs[g][2]) :] for unit, g in members]
    joins = getattr(counter, "joins", None)
    header_costs = row_costs(counter, headers)
    costs = row_costs(counter, stripped)
    refused = set()
    if joins is not None:
        refused = {
            g for (unit, g), text in zip(members, stripped, strict=True) if joins(headers[g], text)
        }
    group_of: dict[int, int] = {}
    kept_groups: dict[int, int] = {}  # old group -> new group
    for (unit, g), text, cost in zip(members, stripped, costs, strict=True):
        if g in refused:
            continue
        new = kept_groups.setdefault(g, len(kept_groups))
        group_of[unit] = new
        out_rows[unit] = text
        out_tokens[unit] = cost
    order = sorted(kept_groups, key=kept_groups.__getitem__)
    return StampGroups(
        out_rows,
        out_tokens,
        group_of,
        [headers[g] for g in order],
        [header_costs[g] for g in order],
    )
