"""The action log of a work memory: which calls ran, in order, even when none of their output
is kept.

A memory that says "30 earlier tool calls" and shows ten of them leaves the agent unable to tell
that it already read the other files. Every call keeps its header; calls in a row whose output
left no line are folded into one line that still names each call's arguments, and a log too
long for any header becomes one summary line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

__all__ = ["LoggedCall", "folded", "split_cost", "summary_line", "unkept_log", "with_note"]


class LoggedCall(Protocol):
    """What the log needs of a group of the memory: its number (0: the agent's text, or an
    output without its call, whose ``header`` is then set), tool, header, output lines, its
    arguments as the log shows them, its place and how many of its lines are kept."""

    number: int
    tool: str
    header: str
    lines: list[int]
    logged: str
    order: int
    kept: int


def summary_line(calls: Sequence[LoggedCall]) -> str:
    """``[calls 1-30: bash 28, python 2; no output kept]``, for a log too long to show."""
    numbered = [group for group in calls if group.number]
    if not numbered:
        return ""
    tools: dict[str, int] = {}
    for group in numbered:
        tools[group.tool] = tools.get(group.tool, 0) + 1
    each = ", ".join(f"{tool} {n}" for tool, n in tools.items())
    return f"[calls {numbered[0].number}-{numbered[-1].number}: {each}; no output kept]"


def unkept_log(groups: Sequence[LoggedCall]) -> list[str]:
    """The log lines of the groups that keep no line, as the memory renders them: calls in a
    row folded, an output without its call on a line of its own; a group with kept lines ends a
    row (its header is rendered with its lines, not here)."""
    lines: list[str] = []
    run: list[LoggedCall] = []
    for group in groups:
        if group.kept:
            lines += folded(run)
            run = []
        elif group.number:
            run.append(group)
        elif group.header:
            lines += folded(run)
            run = []
            lines.append(with_note(group.header, f" (0 of {len(group.lines)} output lines kept)"))
    return lines + folded(run)


def split_cost(groups: Sequence[LoggedCall], group: LoggedCall, count: Callable[[str], int]) -> int:
    """What the log's cost changes by when ``group`` (keeping no line yet) gets one: the row of
    calls it sat in (or between) is folded in two, and it leaves the row."""
    if group.header and not group.number:
        return 0  # an output without its call has a line of its own already
    start = end = group.order
    while (
        start > 0
        and not groups[start - 1].kept
        and (groups[start - 1].number or not groups[start - 1].header)
    ):
        start -= 1
    while (
        end + 1 < len(groups)
        and not groups[end + 1].kept
        and (groups[end + 1].number or not groups[end + 1].header)
    ):
        end += 1
    row = [g for g in groups[start : end + 1] if g.number]
    before = [g for g in row if g.order < group.order]
    after = [g for g in row if g.order > group.order]

    def cost(lines: list[str]) -> int:
        return count("\n".join(lines) + "\n") if lines else 0

    return cost(folded(before)) + cost(folded(after)) - cost(folded(row))


def folded(run: Sequence[LoggedCall]) -> list[str]:
    """Calls in a row whose output left no line: one line per tool's run of them, naming each
    call's arguments (``[calls 3-7 bash, no output lines kept] cat a.py; cat b.py; ...``)."""
    lines = []
    start = 0
    for end in range(1, len(run) + 1):
        if end < len(run) and run[end].tool == run[start].tool:
            continue
        part = run[start:end]
        first, last, tool = part[0].number, part[-1].number, part[0].tool
        which = f"calls {first}-{last}" if len(part) > 1 else f"call {first}"
        shown = "; ".join(_counted(group.logged for group in part))
        lines.append(f"[{which} {tool}, no output lines kept] {shown}".rstrip())
        start = end
    return lines


def _counted(names: Iterable[str]) -> list[str]:
    """Names in order, a name repeated by calls in a row written once with how many
    (``src/a.py (3 calls)``): an agent views and edits one file again and again."""
    out: list[str] = []
    last, times = "", 0
    for name in [*names, None]:
        if name == last:
            times += 1
            continue
        if last:
            out.append(f"{last} ({times} calls)" if times > 1 else last)
        last, times = name or "", 1
    return out


def with_note(header: str, note: str) -> str:
    """Put the kept-lines note inside the header's bracket."""
    close = header.find("]")
    return header[:close] + note.replace(" (", ", ").rstrip(")") + header[close:]
