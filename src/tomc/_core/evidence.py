"""Evidence around records: the source lines a reader sees beside an exact STATE row.

A STATE row says what a key's value is now; the source lines packed beside it must not say
otherwise. Three rules, applied to the included rows whose key the task names (when it names
none, to the first 16 rows of a state question: each key costs the scan a little):

- the line that wrote the current value (the last SET or COPY of the key) comes first;
- then the newest lines that mention the key after that write (up to
  :data:`PROMOTED_MENTIONS` a key): an update said in a sentence, or a question about it, that
  no operation executed. The row itself lists them (``mentioned later: u176``), so the reader
  can judge;
- no other line of the key (an older assignment, a sentence about it) is packed unless the
  writing line is: the last word on a key is never an older value.

A key is mentioned by a line that contains its name as a whole identifier (case as written;
a name with CJK characters anywhere). Lines that are operations themselves are executed
exactly and are never "mentioned later".
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from .lexicon import WORD_CHAR

__all__ = [
    "PROMOTED_MENTIONS",
    "EvidencePlan",
    "evidence_order",
    "key_mentions",
    "plan_evidence",
]

#: Lines mentioning a key after its last write that are moved ahead of the ranked lines.
PROMOTED_MENTIONS = 3


def key_mentions(texts: Sequence[str], names: Collection[str]) -> dict[str, list[int]]:
    """For each name, the units (in source order) whose text mentions it.

    Each name is found with ``str.find`` over the joined text (in C); only its occurrences are
    checked for identifier boundaries and placed on their line.
    """
    joined = "\n".join(texts)
    if joined.count("\n") != len(texts) - 1:
        joined = "\n".join(text.replace("\n", " ") for text in texts)
    starts: list[int] | None = None
    # A CJK character is no identifier character: a CJK name has no word boundary to respect.
    ident = re.compile(WORD_CHAR).match
    found: dict[str, list[int]] = {}
    for name in names:
        units: list[int] = []
        at = joined.find(name)
        while at >= 0:
            end = at + len(name)
            if not (at and ident(joined, at - 1)) and not ident(joined, end):
                if starts is None:
                    starts = [0, *itertools.accumulate(len(text) + 1 for text in texts)]
                unit = bisect.bisect_right(starts, at) - 1
                if not units or units[-1] != unit:
                    units.append(unit)
            at = joined.find(name, at + 1)
        found[name] = units
    return found


@dataclass(frozen=True, slots=True)
class EvidencePlan:
    """Which units go first, and which units may be packed only beside others."""

    first: list[int]  # in this order, ahead of the ranking
    needs: dict[int, tuple[int, ...]]  # unit -> the writing lines it may not be packed without


def plan_evidence(writers: Iterable[tuple[int, Sequence[int], Sequence[int]]]) -> EvidencePlan:
    """From ``(writer, later, mentioning)`` per included STATE row, in the rows' order:
    ``later`` the lines mentioning the key after its write (oldest first), ``mentioning``
    every line that mentions the key. A writing line needs nothing: it is its key's truth."""
    rows = list(writers)
    first: list[int] = []
    seen: set[int] = set()
    for writer, later, _ in rows:
        for unit in (writer, *reversed(later[-PROMOTED_MENTIONS:])):
            if unit not in seen:
                seen.add(unit)
                first.append(unit)
    written = {writer for writer, _, _ in rows}
    needs: dict[int, tuple[int, ...]] = {}
    for writer, _, mentioning in rows:
        for unit in mentioning:
            if unit not in written:
                needs[unit] = (*needs.get(unit, ()), writer)
    return EvidencePlan(first, needs)


def evidence_order(order: Sequence[int], plan: EvidencePlan) -> list[int]:
    """The plan's units first, then ``order`` without them."""
    if not plan.first:
        return list(order)
    ahead = set(plan.first)
    return plan.first + [unit for unit in order if unit not in ahead]
