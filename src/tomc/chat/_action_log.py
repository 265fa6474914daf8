"""The action log of a work memory: which calls ran, in order, even when none of their output
is kept.

A memory that says "30 earlier tool calls" and shows ten of them leaves the agent unable to tell
that it already read the other files. Every call keeps its header; calls in a row whose output
left no line are folded into one line that still names each call's arguments, and a log too
long for any header becomes one summary line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["LoggedCall", "bracket", "folded", "summary_line", "with_note"]


class LoggedCall(Protocol):
    """What the log needs of a call: its number (0: an output without its call), tool, header,
    output lines, and its arguments as the log shows them."""

    number: int
    tool: str
    header: str
    lines: list[int]
    logged: str


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


def bracket(tool: str) -> str:
    """The longest opening a folded line of ``tool`` can have (for pricing)."""
    return f"[calls 99999-99999 {tool}, no output lines kept] "


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
        shown = "; ".join(group.logged for group in part) if any(g.logged for g in part) else ""
        lines.append(f"[{which} {tool}, no output lines kept] {shown}".rstrip())
        start = end
    return lines


def with_note(header: str, note: str) -> str:
    """Put the kept-lines note inside the header's bracket."""
    close = header.find("]")
    return header[:close] + note.replace(" (", ", ").rstrip(")") + header[close:]
