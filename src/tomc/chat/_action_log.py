"""The action log of a work memory: which calls ran, in order, even when none of their output
is kept.

A memory that says "30 earlier tool calls" and shows ten of them leaves the agent unable to tell
that it already read the other files. Every call keeps its header; calls in a row whose output
left no line are folded into one line that still names each call's arguments, and a log too
long for any header becomes one summary line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ._work_lines import PATH, Group, cut, distinct_arguments

__all__ = [
    "ACTION_LOG_SHARE",
    "HEADER_ARGS",
    "LogPlan",
    "LoggedCall",
    "folded",
    "plan_log",
    "summary_line",
    "unkept_log",
    "with_note",
]

#: A call's header shows at most this many characters of its arguments.
HEADER_ARGS = 80
#: The action log (one header per call) takes at most this share of the memory's room; past
#: it, the arguments each header shows are shortened (down to :data:`MIN_HEADER_ARGS`).
ACTION_LOG_SHARE = 0.3
MIN_HEADER_ARGS = 24
#: A call with no path in its arguments is named in a folded row by at most this many
#: characters of them (its own header, when it keeps lines, shows more).
MAX_LOGGED_ARGS = 60
#: A compact log (a small memory's): headers show at most this many characters, a folded row
#: names a call by its first path (else this many characters of its arguments), and the log
#: takes at most this share before headers are cut further. On the SWE-bench replay at 16K
#: (about 1,760 tokens of room): 97.1% of the patch evidence with them, 95.9% with the full
#: log's rules.
COMPACT_HEADER_ARGS, COMPACT_LOGGED_ARGS, COMPACT_LOG_SHARE = 48, 24, 0.05


@dataclass(frozen=True, slots=True)
class LogPlan:
    """What the action log takes before any line: every call folded into lines that name
    each one's arguments (``reserved_headers``), or when not even that fits, a summary line."""

    reserved: int
    reserved_headers: bool
    summary: str = ""


def plan_log(
    groups: Sequence[Group], count: Callable[[str], int], room: int, *, compact: bool
) -> LogPlan:
    """Each call's header (and its cost), and what the action log reserves of ``room``.

    Every call's header is reserved before any line: the arguments a header shows are cut
    shorter while the log would take more than its share of ``room``.
    """
    for group in groups:
        if group.number:
            named = list(dict.fromkeys(m for m in PATH.findall(group.arguments) if len(m) > 2))
            group.touched = " ".join(named[:1] if compact else named)
    calls = [group for group in groups if group.header]
    distinct_arguments(calls)
    numbered = [group for group in calls if group.number]
    share = COMPACT_LOG_SHARE if compact else ACTION_LOG_SHARE
    logged = COMPACT_LOGGED_ARGS if compact else MAX_LOGGED_ARGS
    first = COMPACT_HEADER_ARGS if compact else HEADER_ARGS
    for limit in (first, *(n for n in (48, MIN_HEADER_ARGS) if n < first), 0):
        for group in numbered:
            # In the folded log a call is named by the files it touched, else by what its
            # tool's calls do not share; its own header shows its arguments while they fit.
            # Paths are kept whole (a cut path names nothing) until no argument has room.
            short = (group.touched if limit else "") or cut(
                group.distinct or group.arguments, min(limit, logged)
            )
            group.logged = short
            # In a small memory a header names what the call did without what every call of
            # its tool says alike (Codex's code around each command): each kept line pays it.
            full = group.distinct if compact and group.distinct else group.arguments
            shown = full if len(full) <= limit else short
            group.header = f"[call {group.number} {group.tool}]" + (f" {shown}" if shown else "")
        for group in groups:
            # Priced with the longest note it can get, so the rendered header never costs more.
            noted = with_note(group.header, " (99999 of 99999 output lines kept)")
            group.header_cost = count(noted + "\n") if group.header else 0
        log = unkept_log(groups)
        reserved = count("\n".join(log) + "\n") if log else 0
        if reserved <= share * room or (limit <= MIN_HEADER_ARGS and reserved <= room):
            return LogPlan(reserved, True)
    line = summary_line(calls)
    cost = count(line + "\n") if line else 0
    return LogPlan(cost, False, line) if cost <= room else LogPlan(0, False)


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
