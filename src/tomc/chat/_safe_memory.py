"""The memory that cannot fail: every call named, the agent's notes, no tool output.

When a region's memory cannot be built (a reader raised on some input) or not in time (a
rebuild past the session's ``compile_deadline_s``), the request must still go out, and within
its window: sending the whole history instead would be refused by the provider or compacted by
the agent. This memory is the action log without the work memory's choices: one line per call
(its tool and arguments) and one per note of the agent or turn of the user, each cut to
:data:`SAFE_LINE_CHARS`, the newest first where the budget is short, shown in source order. It
reads the entries' text once and counts only the lines it keeps: linear, and too plain to fail.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._conversation import Entry

__all__ = ["SAFE_HEADER", "SAFE_LINE_CHARS", "safe_memory", "safe_why"]

#: A line of the safe memory shows at most this many characters of what it stands for.
SAFE_LINE_CHARS = 160
SAFE_HEADER = (
    "[TOMC memory (safe compaction) of {items} earlier items with {calls} tool calls: the "
    "memory could not be compiled {why}, so the tools' output is left out here; each call is "
    "named with its arguments and each note cut to a line, in their original order.]"
)


def safe_memory(
    entries: Sequence[Entry],
    *,
    why: str,
    budget: int,
    count: Callable[[str], int],
    first_call_number: int = 1,
) -> str:
    """The safe memory of ``entries`` in at most ``budget`` tokens of ``count`` (its header
    alone when nothing else fits); ``why`` completes "could not be compiled ..."."""
    content = [entry for entry in entries if not entry.kept]
    lines: list[str] = []
    number = first_call_number
    for entry in content:
        if entry.text:
            lines.append(f"{entry.role}: {_one_line(entry.text)}")
        for call in entry.calls:
            lines.append(f"[call {number} {call.name}] {_one_line(call.arguments)}".rstrip())
            number += 1
    calls = number - first_call_number
    header = SAFE_HEADER.format(items=len(content), calls=calls, why=why)
    # Room for saying how many lines are left out, priced at the largest such number.
    used = count(header + "\n") + count(_left_out(len(lines)) + "\n")
    kept: list[str] = []
    for line in reversed(lines):
        cost = count(line + "\n")
        if used + cost > budget:
            break  # the newest lines, without a gap: what the agent did last reads as a story
        used += cost
        kept.append(line)
    if len(kept) < len(lines) and used <= budget:
        kept.append(_left_out(len(lines) - len(kept)))
    return "\n".join([header, *reversed(kept)]) + "\n"


def safe_why(text: str) -> str:
    """Why a safe memory (its ``text``) was made, as its header says it."""
    start = text.find("could not be compiled ")
    end = text.find(", so the tools' output", start)
    if start < 0 or end < 0:
        return ""
    return text[start + len("could not be compiled ") : end]


def _left_out(lines: int) -> str:
    return f"[{lines} older lines of calls and notes left out]"


def _one_line(text: str) -> str:
    """``text``'s first :data:`SAFE_LINE_CHARS` characters on one line (white space folded)."""
    # Only the start is read: a 10 MB argument costs what a short one does.
    folded = " ".join(text[: 4 * SAFE_LINE_CHARS].split())
    if len(folded) <= SAFE_LINE_CHARS:
        return folded
    return folded[: SAFE_LINE_CHARS - 1] + "…"
