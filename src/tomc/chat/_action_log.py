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

__all__ = ["LoggedCall", "folded", "summary_line", "with_note"]


class LoggedCall(Protocol):
    """What the log needs of a call: its number (0: no call), tool, header and output lines."""

    number: int
    tool: str
    header: str
    lines: list[int]


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


def folded(run: Sequence[LoggedCall]) -> list[str]:
    """Calls in a row whose output left no line: one line naming each call's arguments."""
    if not run:
        return []
    if len(run) == 1:
        group = run[0]
        return [with_note(group.header, f" (0 of {len(group.lines)} output lines kept)")]
    tools = {group.tool for group in run}
    what = f" {run[0].tool}" if len(tools) == 1 else ""
    calls = "; ".join(
        (group.header.split("] ", 1)[-1] if "] " in group.header else "")
        if what
        else group.header.split(" ", 2)[-1].replace("] ", ": ", 1)
        for group in run
    )
    return [f"[calls {run[0].number}-{run[-1].number}{what}, no output lines kept] {calls}"]


def with_note(header: str, note: str) -> str:
    """Put the kept-lines note inside the header's bracket."""
    close = header.find("]")
    return header[:close] + note.replace(" (", ", ").rstrip(")") + header[close:]
