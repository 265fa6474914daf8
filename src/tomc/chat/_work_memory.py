"""The memory of finished agent work: kept output lines under the call that produced them.

A tool output line without its origin is ambiguous ("42", "OK", a line of code from which
file?), so the memory is organised by call: a header line names the tool and its arguments (cut
to :data:`MAX_HEADER_ARGS` characters) and says how many of its output lines were kept; the kept
lines follow verbatim, in source order. The agent's own text between calls is kept the same way.

What is kept is chosen for the step the agent is on, because that is what the next request needs:

- lines the agent will see again later (a file re-read, a command re-run, or the raw tail that
  follows the memory) are superseded here: only the newest copy counts;
- lines are ranked by BM25 against the task and the agent's latest step (its recent commands
  and notes), with a boost for output of calls that touch the files the latest step works on,
  and one for lines the work showed more than once (the code it keeps going back to);
- lines no query term reaches fill what is left, newest first;
- headers of calls with no kept line are listed last, newest first, while room remains, so the
  agent still sees what it already ran.

Packing takes whole lines, charges a call's header with its first kept line, and never exceeds
the budget by the meter that will judge the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .._core.lexicon import query_terms
from .._core.retrieval import bm25_scores
from ._changed_files import changed_files
from ._conversation import ASSISTANT, TOOL, USER, Entry, ToolCall

__all__ = ["FRAMING", "MAX_HEADER_ARGS", "WorkMemory", "build_work_memory", "call_header"]

#: Characters of a call's arguments shown in its header.
MAX_HEADER_ARGS = 160
#: Paths named in a memory's line of changed files.
MAX_CHANGED_FILES = 40
#: How a candidate line is ranked: its BM25 score against the task and the latest step (scaled
#: to the best line's), plus how recent its call is (0 for the oldest, 1 for the newest), plus a
#: bonus when its call touches a file the latest step works on. The weights were chosen on the
#: real trajectories of benchmarks/agent_replay.py: without the recency term the memory kept
#: clearly less of the patch evidence than sliding truncation; more weight than 3 changed
#: nothing. A line shown by ``n`` calls with different arguments (as their headers show them)
#: gets ``REPEAT_WEIGHT * (1 - 1/n)``: the lines an agent re-reads are the code it is working
#: on, while a command run again (a test suite) repeats its output without meaning it. On the
#: replay (``python -m benchmarks.agent_replay``) this kept 97.1% / 100% / 100% of the patch
#: evidence at 16K / 24K / 32K against 95.8% / 99.6% / 100% without it, billed input within
#: 0.2%; in ablations at 16K, counting every copy kept 97.3% (with stale test output ranked
#: up) and weights of 1.5 or 2 kept slightly less.
BM25_WEIGHT = 1.0
RECENCY_WEIGHT = 3.0
FOCUS_WEIGHT = 1.0
REPEAT_WEIGHT = 1.0
# Paths as agents write them: a/b/c.py, ./x.cfg, src/mod.rs (at least one slash or a dot-ext).
_PATH = re.compile(r"(?:\.{0,2}/)?[\w\-.]+(?:/[\w\-.]+)+|[\w\-]+\.[A-Za-z]{1,5}\b")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True, slots=True)
class WorkMemory:
    """A rendered work memory and what went into it."""

    text: str
    tokens: int
    kept_lines: int
    candidate_lines: int
    calls: int


@dataclass(slots=True)
class _Group:
    header: str  # "" for the agent's free text
    order: int
    lines: list[int]
    recency: int = 0
    focus: bool = False
    header_cost: int = 0
    kept: int = 0


def _short_arguments(call: ToolCall) -> str:
    """The call's arguments for a header: a lone string argument as itself, else as sent."""
    arguments = call.arguments.strip()
    try:
        parsed = json.loads(arguments)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and len(parsed) == 1:
        (value,) = parsed.values()
        if isinstance(value, str):
            arguments = value
    arguments = _SPACE.sub(" ", arguments).strip()
    if len(arguments) > MAX_HEADER_ARGS:
        arguments = arguments[: MAX_HEADER_ARGS - 1] + "…"
    return arguments


def call_header(number: int, call: ToolCall) -> str:
    """``[call 7 bash] sed -n '1,40p' app.py``: which call, which tool, with what."""
    return f"[call {number} {call.name or 'tool'}] {_short_arguments(call)}"


def _paths(text: str) -> set[str]:
    return {match.strip("./") for match in _PATH.findall(text) if len(match) > 2}


#: Lines an agent's tool runner writes around a command's output, which say nothing about the
#: work (Codex's exec: "Chunk ID: ...", "Wall time: 0.1 seconds", "Original token count: ...",
#: "Output:", a successful exit; its code mode's "Script completed"). A failing exit code is
#: kept: it is evidence.
FRAMING = re.compile(
    r"^(?:Chunk ID: \S+|Wall time:? [\d.]+ seconds?|Original token count: \d+"
    r"|Total output lines: \d+|Output:|Process exited with code 0|Script completed)\s*$"
)


# A line number that grep -n, cat -n or nl put in front of a line: the same source line seen
# through two commands is one line.
_NUMBERED = re.compile(r"^\s*(?:[\w./\-]+:)?\d+[:\t-]\s?")


def _key(line: str) -> str:
    numbered = _NUMBERED.match(line)
    if numbered:
        line = line[numbered.end() :]
    return " ".join(line.split())  # str.split splits on the white space that \s matches


def build_work_memory(
    entries: Sequence[Entry],
    *,
    task: str,
    focus: Sequence[Entry],
    later_text: str,
    budget: int,
    count: Callable[[str], int],
    header: str,
    first_call_number: int = 1,
) -> WorkMemory:
    """Render ``entries`` (a finished stretch of agent work) into at most ``budget`` tokens.

    ``focus`` is the agent's latest step (the raw items after the region), ``later_text`` all the
    text that will be sent after the memory (lines there are not repeated), ``count`` the
    meter's count, ``header`` the memory's first line(s).
    """
    changed = changed_files(call for entry in entries for call in entry.calls)
    if changed:
        # What the work changed stays in view whatever else is left out (it is one line).
        shown = changed[:MAX_CHANGED_FILES]
        more = len(changed) - len(shown)
        tail = f" and {more} more" if more else ""
        header = f"{header}\n[files changed by these calls: {', '.join(shown)}{tail}]"
    work = _collect(entries, first_call_number)
    origins = [_origin(work.groups[group]) for group in work.owner]
    alive, copies = _newest_copies(work.texts, later_text, origins)
    focus_text = "\n".join(
        [entry.text for entry in focus]
        + [call.arguments for entry in focus for call in entry.calls]
    )
    _weigh_groups(work.groups, _paths(focus_text), count)
    candidates = [index for index in range(len(work.texts)) if alive[index]]
    costs = {index: count(work.texts[index] + "\n") for index in candidates}
    order = _ranked(work, candidates, costs, copies, query_terms(task + "\n" + focus_text))
    kept = _pack(work, order, costs, budget - count(header))
    text = _render(header, work, kept)
    return WorkMemory(text, count(text), len(kept), len(candidates), work.calls)


@dataclass(slots=True)
class _Work:
    """The lines of a stretch of work, each owned by a group (a call, or the agent's text)."""

    groups: list[_Group]
    texts: list[str]
    owner: list[int]
    calls: int


def _collect(entries: Sequence[Entry], first_call_number: int) -> _Work:
    """Every nonempty line under its group: a call's output under that call's header."""
    work = _Work([], [], [], 0)
    groups = work.groups
    by_call: dict[str, int] = {}

    def add(group: int, line: str) -> None:
        groups[group].lines.append(len(work.texts))
        work.texts.append(line)
        work.owner.append(group)

    for entry in entries:
        if entry.kind in (USER, ASSISTANT) and entry.text.strip():
            prefix = "user: " if entry.kind == USER else "assistant: "
            group = len(groups)
            groups.append(_Group("", len(groups), []))
            for line in entry.text.splitlines():
                if line.strip():
                    add(group, line if groups[group].lines else prefix + line)
        for call in entry.calls:
            by_call[call.id] = len(groups)
            groups.append(
                _Group(call_header(first_call_number + work.calls, call), len(groups), [])
            )
            work.calls += 1
        if entry.kind == TOOL:
            for output in entry.outputs:
                group = by_call.get(output.call_id)
                if group is None:
                    group = len(groups)
                    groups.append(_Group(f"[result {output.call_id}]", len(groups), []))
                for line in output.text.splitlines():
                    if line.strip() and not FRAMING.match(line):
                        add(group, line)
    return work


def _newest_copies(
    texts: Sequence[str], later_text: str, origins: Sequence[str]
) -> tuple[list[bool], list[int]]:
    """Newest copy wins: a line shown again later (here or after the memory) is superseded.

    Also returns, for each line, from how many different origins (see :func:`_origin`) its
    text came: the same command run again (a test suite) does not make its lines repeats.
    """
    later_keys = {_key(line) for line in later_text.splitlines() if line.strip()}
    keys = [_key(text) for text in texts]
    seen_in: dict[str, set[str]] = {}
    for key, origin in zip(keys, origins, strict=True):
        seen_in.setdefault(key, set()).add(origin)
    times = {key: len(found) for key, found in seen_in.items()}
    seen: set[str] = set()
    alive = [False] * len(texts)
    for index in range(len(texts) - 1, -1, -1):
        key = keys[index]
        if key in seen or key in later_keys:
            continue
        seen.add(key)
        alive[index] = True
    return alive, [times[key] for key in keys]


def _origin(group: _Group) -> str:
    """What produced a line: its call's arguments as the header shows them (the part after
    ``[call N tool]``, which numbers each call), or the agent's text at its place."""
    if not group.header:
        return f"text {group.order}"
    # The header's number differs between runs of one command: compare what follows it.
    return group.header.split("] ", 1)[-1] if "] " in group.header else group.header


def _weigh_groups(
    groups: Sequence[_Group], focus_paths: set[str], count: Callable[[str], int]
) -> None:
    """Each group's recency, focus and header cost."""
    # A file keeps being worked on after its last read: a call's recency is that of the newest
    # call touching any of the same files.
    touched: dict[str, int] = {}
    group_paths = [_paths(group.header) for group in groups]
    for group, paths in zip(groups, group_paths, strict=True):
        for path in paths:
            touched[path] = group.order
    for group, paths in zip(groups, group_paths, strict=True):
        group.focus = bool(focus_paths & paths)
        group.recency = max([group.order, *(touched[path] for path in paths)])
        # Priced with the longest note it can get, so the rendered header never costs more.
        noted = _with_note(group.header, " (99999 of 99999 output lines kept)")
        group.header_cost = count(noted + "\n") if group.header else 0


def _ranked(
    work: _Work,
    candidates: list[int],
    costs: dict[int, int],
    copies: Sequence[int],
    terms: Sequence[str],
) -> list[int]:
    """The candidate lines, best first (see the weights above); ties: newer first."""
    texts, groups = work.texts, work.groups
    scores = bm25_scores([texts[i] for i in candidates], [costs[i] for i in candidates], terms)
    top = max(scores.values(), default=0.0) or 1.0
    span = max(1, len(groups) - 1)
    score_of: dict[int, float] = {}
    for position, index in enumerate(candidates):
        group = groups[work.owner[index]]
        score_of[index] = (
            BM25_WEIGHT * scores.get(position, 0.0) / top
            + RECENCY_WEIGHT * group.order / span
            + (FOCUS_WEIGHT if group.focus else 0.0)
            + REPEAT_WEIGHT * (1.0 - 1.0 / copies[index])
        )
    return sorted(candidates, key=lambda i: (-score_of[i], -i))


def _pack(work: _Work, order: list[int], costs: dict[int, int], left: int) -> set[int]:
    """The lines that fit in ``left`` tokens, taken in ``order``, a group's header charged
    with its first line; then headers of groups with no kept line while room remains."""
    kept: set[int] = set()
    for index in order:
        group = work.groups[work.owner[index]]
        cost = costs[index] + (group.header_cost if group.kept == 0 else 0)
        if cost <= left:
            left -= cost
            kept.add(index)
            group.kept += 1
    for group in reversed(work.groups):  # action log: the calls whose output left no line
        if group.header and group.kept == 0 and group.header_cost <= left:
            left -= group.header_cost
            group.kept = -1  # header only
    return kept


def _render(header: str, work: _Work, kept: set[int]) -> str:
    out = [header]
    for group in work.groups:
        if group.kept == 0:
            continue
        lines = [i for i in group.lines if i in kept]
        if group.header:
            note = f" ({len(lines)} of {len(group.lines)} output lines kept)"
            if group.kept == -1 or len(lines) < len(group.lines):
                out.append(_with_note(group.header, note))
            else:
                out.append(group.header)
        out.extend(work.texts[i] for i in lines)
    return "\n".join(out) + "\n"


def _with_note(header: str, note: str) -> str:
    """Put the kept-lines note inside the header's bracket."""
    close = header.find("]")
    return header[:close] + note.replace(" (", ", ").rstrip(")") + header[close:]
