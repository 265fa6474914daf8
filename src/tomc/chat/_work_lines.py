"""The lines of a stretch of agent work, each under the call that printed it.

A tool output line without its origin is ambiguous ("42", "OK", a line of code from which
file?), so the work memory reads a stretch of work as groups: a call (its number, tool and
arguments, shortened for a header) with its output lines, or the agent's own text. This module
reads them (:func:`collect`), names what a call touched and which lines make up a traceback;
:mod:`._worked_on` tells which lines the agent works on, :mod:`._work_memory` ranks and renders
them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ._call_settings import setting_lines, written_where
from ._conversation import ASSISTANT, TOOL, USER, Entry, ToolCall
from ._salient import traceback_blocks

__all__ = [
    "FRAMING",
    "MAX_HEADER_ARGS",
    "PATH",
    "Group",
    "Output",
    "Work",
    "call_header",
    "collect",
    "cut",
    "distinct_arguments",
    "line_key",
    "paths_in",
    "quoted_lines_of",
    "short_arguments",
    "traceback_lines_of",
]

#: Characters of a call's arguments shown in its header.
MAX_HEADER_ARGS = 160
# Where a shared prefix or suffix of arguments may end or begin.
_SEPARATORS = (" ", '"', "'", "(", ")", "{", "}", ",", ";", "=")
#: A shortened header drops what every call of its tool shares when that is this long or more.
MIN_COMMON_ARGS = 12
# Paths as agents write them: a/b/c.py, ./x.cfg, src/mod.rs (at least one slash or a dot-ext).
PATH = re.compile(r"(?:\.{0,2}/)?[\w\-.]+(?:/[\w\-.]+)+|[\w\-]+\.[A-Za-z]{1,5}\b")
_SPACE = re.compile(r"\s+")
# The argument that names what a call did, when a tool takes several (Claude Code's Bash takes
# a command and a description, Read a file path and a range).
_DISTINGUISHING = ("command", "cmd", "file_path", "path", "pattern", "query", "url", "code")


@dataclass(slots=True)
class Group:
    header: str  # "" for the agent's free text
    order: int
    lines: list[int]
    focus: bool = False
    header_cost: int = 0
    kept: int = 0
    number: int = 0  # the call's number; 0 for the agent's text or an output without its call
    tool: str = ""
    arguments: str = ""
    distinct: str = ""  # the arguments without what all calls of the tool share
    logged: str = ""  # the arguments as the action log shows them
    touched: str = ""  # the paths its arguments name, in order
    quotes: frozenset[str] = frozenset()  # keys of the lines its arguments quote


def short_arguments(call: ToolCall, limit: int = MAX_HEADER_ARGS) -> str:
    """The call's arguments for a header: a lone string argument as itself, else as sent."""
    arguments = call.arguments.strip()
    parsed = call.parsed_arguments()
    if isinstance(parsed, dict) and len(parsed) == 1:
        (value,) = parsed.values()
        if isinstance(value, str):
            arguments = value
    elif isinstance(parsed, dict):
        # What tells one call of a tool from another: its command, file, pattern or address
        # (an editor's {"command": "view", "path": ...} needs both).
        shown = []
        for key in _DISTINGUISHING:
            value = parsed.get(key)
            if isinstance(value, list) and all(isinstance(part, str) for part in value):
                value = " ".join(value)  # Codex's shell: ["bash", "-lc", "sed -n ..."]
            if isinstance(value, str) and value.strip():
                shown.append(value)
        if shown:
            arguments = " ".join(shown)
    arguments = _SPACE.sub(" ", arguments).strip()
    return cut(arguments, limit)


#: A line an argument quotes is one this long at least (``return None`` says nothing).
MIN_QUOTED_CHARACTERS = 12


def quoted_lines_of(call: ToolCall) -> frozenset[str]:
    """The keys (:func:`line_key`) of the lines a call's arguments hold: the old text of an
    edit, a patch, a script that prints or patches code, a heredoc. Arguments that are not
    JSON (a custom tool's text) are read as they are."""
    parsed = call.parsed_arguments()
    keys: set[str] = set()
    stack = [call.arguments if parsed is None else parsed]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            for line in value.splitlines():
                # A patch's lines (Codex's apply_patch, a diff) carry a marker before the text.
                marked = line.startswith(("-", "+"))
                for key in (line_key(line), line_key(line[1:]) if marked else ""):
                    if len(key) >= MIN_QUOTED_CHARACTERS:
                        keys.add(key)
    return frozenset(keys)


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…" if limit > 1 else ""


def _common_prefix(texts: Sequence[str]) -> int:
    """How many characters every text starts with."""
    shortest, longest = min(texts), max(texts)  # the extremes differ first, if any do
    for position, char in enumerate(shortest):
        if char != longest[position]:
            return position
    return len(shortest)


def distinct_arguments(groups: Sequence[Group]) -> None:
    """Each call's arguments without what every call of its tool says alike (Codex wraps each
    command in the same code: ``const r = await tools.exec_command({cmd: "…", ...})``), so a
    shortened header still names what the call did."""
    by_tool: dict[str, list[Group]] = {}
    for group in groups:
        if group.number:
            by_tool.setdefault(group.tool, []).append(group)
    for calls in by_tool.values():
        texts = [group.arguments for group in calls]
        if len(texts) < 2:
            continue
        # Whole words only: back to a separator, so a path or a name is never cut in two.
        prefix = _common_prefix(texts)
        prefix = max((texts[0].rfind(sep, 0, prefix) + 1 for sep in _SEPARATORS), default=0)
        suffix = _common_prefix([text[prefix:][::-1] for text in texts])
        ends = [texts[0].find(sep, len(texts[0]) - suffix) for sep in _SEPARATORS]
        suffix = len(texts[0]) - min((end for end in ends if end >= 0), default=len(texts[0]))
        for group in calls:
            middle = group.arguments[prefix : len(group.arguments) - suffix]
            if middle.strip() and prefix + suffix >= MIN_COMMON_ARGS:
                group.distinct = ("…" if prefix else "") + middle + ("…" if suffix else "")


def call_header(number: int, call: ToolCall) -> str:
    """``[call 7 bash] sed -n '1,40p' app.py``: which call, which tool, with what."""
    return f"[call {number} {call.name or 'tool'}] {short_arguments(call)}"


def paths_in(text: str) -> set[str]:
    return {match.strip("./") for match in PATH.findall(text) if len(match) > 2}


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


def line_key(line: str) -> str:
    numbered = _NUMBERED.match(line)
    if numbered:
        line = line[numbered.end() :]
    return " ".join(line.split())  # str.split splits on the white space that \s matches


@dataclass(slots=True)
class Work:
    """The lines of a stretch of work, each owned by a group (a call, or the agent's text)."""

    groups: list[Group]
    texts: list[str]
    owner: list[int]
    calls: int


@dataclass(frozen=True, slots=True)
class Output:
    """One tool output as printed: its call's number, its lines, the work line each became
    (-1: blank or framing), and the first path its call names (where it was read from).
    ``written``: the lines the call's own arguments write (:mod:`._call_settings`), which are
    no line of the work."""

    call: int
    lines: list[str]
    indices: list[int]
    where: str
    written: bool = False


def collect(entries: Sequence[Entry], first_call_number: int) -> tuple[Work, list[Output]]:
    """Every nonempty line under its group: a call's output under that call's header. Also
    each output's lines as printed, with the work line each became (-1: blank or framing),
    for reading values in their context."""
    work = Work([], [], [], 0)
    groups = work.groups
    by_call: dict[str, int] = {}
    outputs: list[Output] = []

    def add(group: int, line: str) -> int:
        groups[group].lines.append(len(work.texts))
        work.texts.append(line)
        work.owner.append(group)
        return len(work.texts) - 1

    for entry in entries:
        if entry.kind in (USER, ASSISTANT) and entry.text.strip():
            prefix = "user: " if entry.kind == USER else "assistant: "
            group = len(groups)
            groups.append(Group("", len(groups), []))
            for line in entry.text.splitlines():
                if line.strip():
                    add(group, line if groups[group].lines else prefix + line)
        for call in entry.calls:
            by_call[call.id] = len(groups)
            number = first_call_number + work.calls
            groups.append(
                Group(
                    call_header(number, call),
                    len(groups),
                    [],
                    number=number,
                    tool=call.name or "tool",
                    arguments=short_arguments(call),
                    quotes=quoted_lines_of(call),
                )
            )
            work.calls += 1
            # What the call writes is read before what it prints: its output is newer.
            written = setting_lines(call)
            if written:
                outputs.append(
                    Output(number, written, [-1] * len(written), written_where(call), True)
                )
        if entry.kind == TOOL:
            for output in entry.outputs:
                group = by_call.get(output.call_id)
                if group is None:
                    group = len(groups)
                    groups.append(Group(f"[result {output.call_id}]", len(groups), []))
                lines = output.text.splitlines()
                indices = [
                    add(group, line) if line.strip() and not FRAMING.match(line) else -1
                    for line in lines
                ]
                where = next(iter(PATH.findall(groups[group].arguments)), "")
                outputs.append(Output(groups[group].number, lines, indices, where))
    return work, outputs


def traceback_lines_of(work: Work) -> dict[int, int]:
    """Work line -> the first work line of the traceback it is part of."""
    out: dict[int, int] = {}
    for group in work.groups:
        if not group.header:
            continue
        blocks = traceback_blocks([work.texts[i] for i in group.lines])
        for index, block in zip(group.lines, blocks, strict=True):
            if block >= 0:
                out[index] = group.lines[block]
    return out
