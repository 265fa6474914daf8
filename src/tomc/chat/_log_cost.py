"""What the folded action log's cost changes by as calls leave it, without rendering it.

While a work memory packs, a call whose first output line is kept leaves its folded row
(:func:`._action_log.folded`): the row of calls that kept nothing is cut in two and the call is
no longer named in it. The memory pays exactly that change. Rendering the row and counting it
for every candidate line made a rebuild quadratic in the history (a row of a long session names
thousands of calls: a whole build of 1M tokens took 137 s). This prices the change from counts
of short strings, each made once:

- a row's lines (one per tool's run of calls) are joined by newlines, which the BPE
  pre-tokenizers never merge with the ``[`` that starts the next line, so a row's raw count is
  the sum of its lines';
- a line is ``[calls 3-7 bash, no output lines kept]`` and then one piece per name,
  `` name;`` (`` name (3 calls);`` for calls in a row under one name, the last piece `` name``
  and the newline); a piece starts with a space, which no pre-token reaches across, so a line's
  raw count is its head's plus its pieces', and whole pieces and whole lines are differences of
  prefix sums.

The meter's rounding (a safety factor, a character floor) applies to the rendered text, so raw
counts and characters are summed and rounded once, as the meter rounds the text. A question is
then two binary searches and a few look-ups: the count of the rendered log to the token for the
meters of :mod:`._meter` (the property test compares it with rendering and counting,
``tests/reference.py``); with another counter, a sum of its counts. The memory's final count is
checked against its budget all the same (:func:`tomc.chat._rebuild._compile`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

from ._action_log import LoggedCall

__all__ = ["FoldedLogCost"]

#: A text's raw count and its characters, which add up over the parts of a text.
Measure = tuple[int, int]
Finish = Callable[[int, int], int]


def _parts(count: Callable[[str], int]) -> tuple[Callable[[str], int], Finish]:
    """The raw count and the rounding of ``count``: a meter's (the work memory is handed
    ``meter.count``), else ``count`` itself, summed."""
    parts = getattr(getattr(count, "__self__", None), "parts", None)
    if callable(parts):
        return parts()
    return count, lambda raw, chars: raw


class FoldedLogCost:
    """The folded log's cost as calls are kept, for ``groups`` in order (their ``logged``
    names set by :func:`._action_log.plan_log`). ``split_cost(group)`` is what keeping the first
    line of ``group`` changes the log's cost by; ``keep(group)`` records that it was kept."""

    def __init__(self, groups: Sequence[LoggedCall], count: Callable[[str], int]) -> None:
        self._raw, self._finish = _parts(count)
        self._measured: dict[str, Measure] = {}
        self._asked: dict[tuple[int, int, int], int] = {}  # (spot, first, last) -> change
        # Calls are numbered 0.. in ``calls``; any other group sits at a cut before a call.
        # A wall at 2i ends rows before call i; at 2i + 1 it is call i, kept.
        self._calls = [group for group in groups if group.number]
        self._index: dict[int, int] = {}  # group order -> its call's index, or its cut
        walls = {0, 2 * len(self._calls)}
        seen = 0
        for group in groups:
            self._index[group.order] = seen
            if group.number:
                seen += 1
            elif group.header:  # an output without its call: a line of its own
                walls.add(2 * seen)
            if group.kept:
                walls.add(self._wall(group))
        self._walls = sorted(walls)
        self._runs({w // 2 for w in walls if w % 2 == 0})

    def _runs(self, cuts: set[int]) -> None:
        """Each tool's runs of calls (one line when no call of it is kept) and, inside them,
        calls in a row under one name (one piece); prefix sums of their measures."""
        calls = self._calls
        self._run: list[int] = []
        self._run_first: list[int] = []  # run -> its first call (and one past the last)
        self._streak: list[int] = []
        self._first: list[int] = []  # streak -> its first call (and one past the last)
        for i, call in enumerate(calls):
            new_run = not i or i in cuts or call.tool != calls[i - 1].tool
            if new_run:
                self._run_first.append(i)
            if new_run or call.logged != calls[i - 1].logged:
                self._first.append(i)
            self._run.append(len(self._run_first) - 1)
            self._streak.append(len(self._first) - 1)
        self._run_first.append(len(calls))
        self._first.append(len(calls))
        self._piece_sums: list[Measure] = [(0, 0)]
        for s in range(len(self._first) - 1):
            size = self._first[s + 1] - self._first[s]
            piece = self._piece(calls[self._first[s]].logged, size, last=False)
            self._piece_sums.append(_add(self._piece_sums[-1], piece))
        self._run_sums: list[Measure] = [(0, 0)]
        for r in range(len(self._run_first) - 1):
            line = self._line(self._run_first[r], self._run_first[r + 1] - 1)
            self._run_sums.append(_add(self._run_sums[-1], line))

    def _wall(self, group: LoggedCall) -> int:
        index = self._index[group.order]
        return 2 * index + 1 if group.number else 2 * index

    def keep(self, group: LoggedCall) -> None:
        """``group`` kept its first line: it ends the row it sat in (or between)."""
        wall = self._wall(group)
        at = bisect.bisect_left(self._walls, wall)
        if at == len(self._walls) or self._walls[at] != wall:
            self._walls.insert(at, wall)

    def split_cost(self, group: LoggedCall) -> int:
        """What the log's cost changes by when ``group`` (keeping no line yet) gets one."""
        if group.header and not group.number:
            return 0  # an output without its call has a line of its own already
        index = self._index[group.order]
        spot = self._wall(group)
        at = bisect.bisect_left(self._walls, spot)
        if self._walls[at] == spot:
            return 0  # rows already end here
        first = (self._walls[at - 1] + 1) // 2
        last = self._walls[at] // 2 - 1
        # A group's lines are asked about one after another while its row stays the same.
        found = self._asked.get((spot, first, last))
        if found is None:
            after = index + 1 if group.number else index
            found = self._cost(first, index - 1) + self._cost(after, last)
            found -= self._cost(first, last)
            self._asked[spot, first, last] = found
        return found

    def _cost(self, first: int, last: int) -> int:
        """What the folded row of calls ``first``..``last`` costs (0 when it is empty)."""
        if last < first:
            return 0
        a, b = self._run[first], self._run[last]
        if a == b:
            return self._finish(*self._line(first, last))
        head = self._line(first, self._run_first[a + 1] - 1)
        tail = self._line(self._run_first[b], last)
        whole = _sub(self._run_sums[b], self._run_sums[a + 1])
        return self._finish(*_add(_add(head, whole), tail))

    def _line(self, first: int, last: int) -> Measure:
        """The measure of the folded line of calls ``first``..``last`` (one run of a tool)."""
        calls = self._calls
        if last > first:
            which = f"calls {calls[first].number}-{calls[last].number}"
        else:
            which = f"call {calls[first].number}"
        head = f"[{which} {calls[first].tool}, no output lines kept]"
        a, b = self._streak[first], self._streak[last]
        # The streaks cut by the line's ends count only their calls inside it; the line's
        # last named piece carries the newline instead of a semicolon.
        ends = [(a, min(last, self._first[a + 1] - 1) - first + 1)]
        if b > a:
            ends.append((b, last - self._first[b] + 1))
        total = _sub(self._piece_sums[b], self._piece_sums[a + 1]) if b > a + 1 else (0, 0)
        for s, size in ends[:-1]:
            total = _add(total, self._piece(calls[self._first[s]].logged, size, last=False))
        s, size = ends[-1]
        name = calls[self._first[s]].logged
        if not name:
            # Calls under no name are one streak, so the last named piece is the streak just
            # before it (if any), priced in ``total`` with its semicolon.
            named = next((t for t in range(s - 1, a - 1, -1) if calls[self._first[t]].logged), None)
            if named is None:
                return self._measure(head + "\n")
            name = calls[self._first[named]].logged
            size = self._first[named + 1] - max(first, self._first[named])
            total = _sub(total, self._piece(name, size, last=False))
        return _add(_add(self._measure(head), total), self._piece(name, size, last=True))

    def _piece(self, name: str, size: int, *, last: bool) -> Measure:
        if not name:
            return (0, 0)
        text = name if size == 1 else f"{name} ({size} calls)"
        return self._measure(f" {text}\n" if last else f" {text};")

    def _measure(self, text: str) -> Measure:
        found = self._measured.get(text)
        if found is None:
            found = self._measured[text] = (self._raw(text), len(text))
        return found


def _add(a: Measure, b: Measure) -> Measure:
    return (a[0] + b[0], a[1] + b[1])


def _sub(a: Measure, b: Measure) -> Measure:
    return (a[0] - b[0], a[1] - b[1])
