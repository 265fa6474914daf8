"""Which lines of a stretch of work the agent is working on, read from what it did.

Recency alone says that the newest calls matter most. What an agent did says more about a
line: it read the same line again from another command (the code it is on, not a test suite
run twice), a later call quotes the line in its arguments (the old text of an edit, a script
that patches or prints it), or its call touches a file the latest step works on.
:func:`line_signals` gives each line whether it is the newest copy of its text and its bonus
for the first two; :func:`place` marks the calls of the third. The work memory
(:mod:`._work_memory`) adds them to a line's score.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ._conversation import ToolCall
from ._work_lines import Group, Work, line_key, paths_in, quoted_lines_of

__all__ = ["QUOTED_WEIGHT", "REPEAT_WEIGHT", "LineSignals", "line_signals", "origin_of", "place"]

#: A line shown by ``n`` calls with different arguments (as their headers show them) gets
#: ``REPEAT_WEIGHT * (1 - 1/n)``: the lines an agent re-reads are the code it is working on,
#: while a command run again (a test suite) repeats its output without meaning it. On the
#: replay (``python -m benchmarks.agent_replay``) this kept 97.1% / 100% / 100% of the patch
#: evidence at 16K / 24K / 32K against 95.8% / 99.6% / 100% without it, billed input within
#: 0.2%; in ablations at 16K, counting every copy kept 97.3% (with stale test output ranked
#: up) and weights of 1.5 or 2 kept slightly less. An appended block counts the calls that
#: blocks before it stand for too, as a whole rebuild would.
REPEAT_WEIGHT = 1.0
#: A line a later call's arguments quote (a line of at least
#: :data:`._work_lines.MIN_QUOTED_CHARACTERS`), or the latest step's, gets this much: an agent
#: that patches a line with a script or an edit has its old text nowhere else in the memory
#: (a header shows 80 characters of the arguments). On the replay at 24K, an appended block of
#: 400 tokens kept the newest version of a function and lost the line the final patch replaces;
#: quoted lines at 2 (with re-reads counted across blocks) kept 7,248 of 7,249 line-requests
#: against 7,244; at 1, 7,244; at 3, as at 2.
QUOTED_WEIGHT = 2.0


@dataclass(frozen=True, slots=True)
class LineSignals:
    """Per work line: whether it is the newest copy of its text (``alive``) and its bonus."""

    alive: list[bool]
    bonus: list[float]


def line_signals(
    work: Work, later_text: str, earlier: Work | None, focus_calls: Iterable[ToolCall]
) -> LineSignals:
    """Newest copy wins: a line shown again later (here or in ``later_text``, sent after the
    memory) is superseded. A line's bonus counts the origins (:func:`origin_of`) of its text
    here and in ``earlier`` (the work of the blocks before this one), and whether a later call
    here or one of ``focus_calls`` (the latest step's) quotes it."""
    later_keys = {line_key(line) for line in later_text.splitlines() if line.strip()}
    keys = [line_key(text) for text in work.texts]
    seen_in: dict[str, set[str]] = {}
    for key, origin in zip(keys, _origins(work), strict=True):
        seen_in.setdefault(key, set()).add(origin)
    if earlier is not None:
        for text, origin in zip(earlier.texts, _origins(earlier), strict=True):
            if (key := line_key(text)) in seen_in:
                seen_in[key].add(origin)
    quoted_by = _last_quoting_group(work.groups, focus_calls)
    seen: set[str] = set()
    alive = [False] * len(keys)
    bonus = [0.0] * len(keys)
    for index in range(len(keys) - 1, -1, -1):
        key = keys[index]
        bonus[index] = REPEAT_WEIGHT * (1.0 - 1.0 / len(seen_in[key]))
        if quoted_by.get(key, -1) > work.owner[index]:
            bonus[index] += QUOTED_WEIGHT
        if key not in seen and key not in later_keys:
            seen.add(key)
            alive[index] = True
    return LineSignals(alive, bonus)


def _last_quoting_group(groups: Sequence[Group], focus_calls: Iterable[ToolCall]) -> dict[str, int]:
    """Line key -> the last group whose call quotes it (past the last for the latest step)."""
    last: dict[str, int] = {}
    for group in groups:
        for key in group.quotes:
            last[key] = group.order
    for call in focus_calls:
        for key in quoted_lines_of(call):
            last[key] = len(groups)
    return last


def _origins(work: Work) -> list[str]:
    return [origin_of(work.groups[group]) for group in work.owner]


def origin_of(group: Group) -> str:
    """What produced a line: its call's arguments as the header shows them (the part after
    ``[call N tool]``, which numbers each call), or the agent's text at its place."""
    if not group.header:
        return f"text {group.order}"
    # The header's number differs between runs of one command: compare what follows it.
    return group.header.split("] ", 1)[-1] if "] " in group.header else group.header


def place(groups: Sequence[Group], focus_paths: set[str]) -> None:
    """Each group's focus: whether its call touches a file the latest step works on."""
    for group in groups:
        group.focus = bool(focus_paths & paths_in(group.header))
