"""Which files a stretch of agent work changed, read from its tool calls.

What an agent edited is what it must not lose track of after its history is compacted (Claude
Code's own summary prompt asks for the files and code sections it touched), and it is cheap to
keep: one line of paths. The calls say it in a few documented shapes:

- an editing tool with a path argument: Claude Code's ``Edit``, ``MultiEdit``, ``Write`` and
  ``NotebookEdit`` (``file_path``, ``notebook_path``), and the ``str_replace_editor`` /
  ``str_replace_based_edit_tool`` family (``path``, with a ``command`` other than ``view``);
- a patch: Codex's ``apply_patch`` (``*** Update File: path``, ``Add File``, ``Delete File``),
  as its own tool or inside a shell command;
- a shell command that writes a file: ``sed -i ... path``, ``> path`` / ``>> path``,
  ``tee [-a] path``.

A path is kept as the call wrote it; the order is that of the first change, each path once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ._conversation import ToolCall

__all__ = ["changed_files"]

_EDIT_TOOLS = frozenset(
    {
        "edit",
        "multiedit",
        "write",
        "notebookedit",
        "str_replace_editor",
        "str_replace_based_edit_tool",
        "create_file",
        "write_file",
        "edit_file",
    }
)
_PATH_KEYS = ("file_path", "notebook_path", "path", "filename")
_READ_ONLY_COMMANDS = frozenset({"view", "read"})
_FILE = r"([\w.~/-]*[\w-]\.[\w]{1,8}|[\w.~-]*/[\w./-]*[\w-])"
_SHELL_WRITES = (
    re.compile(r"\*\*\* (?:Update|Add|Delete) File: (\S+)"),
    re.compile(
        r"\bsed\s+(?:-[a-zA-Z]*i[a-zA-Z]*\S*)\s+(?:-e\s+)?(?:'[^']*'|\"[^\"]*\"|\S+)\s+" + _FILE
    ),
    re.compile(r"(?<![<>0-9&])>{1,2}\s*" + _FILE),
    re.compile(r"\btee\s+(?:-a\s+)?" + _FILE),
)


def _arguments(call: ToolCall) -> tuple[dict[str, object] | None, str]:
    parsed = call.parsed_arguments()
    return (parsed if isinstance(parsed, dict) else None), call.arguments


def _from_call(call: ToolCall) -> Iterable[str]:
    parsed, raw = _arguments(call)
    name = (call.name or "").lower()
    editing = parsed is not None and name in _EDIT_TOOLS
    if editing and str(parsed.get("command", "")).lower() not in _READ_ONLY_COMMANDS:
        for key in _PATH_KEYS:
            value = parsed.get(key)
            if isinstance(value, str) and value.strip():
                yield value.strip()
                break
    # Shell commands and patches, wherever they sit in the arguments (a JSON string, a code
    # mode script): the raw text with JSON string escapes undone.
    text = raw.replace('\\"', '"').replace("\\n", "\n")
    for pattern in _SHELL_WRITES:
        for match in pattern.finditer(text):
            path = match.group(1).strip("'\"")
            if path and not path.startswith("/dev/"):
                yield path


def changed_files(calls: Iterable[ToolCall]) -> list[str]:
    """The files ``calls`` changed, in the order of their first change, each once."""
    seen: dict[str, None] = {}
    for call in calls:
        for path in _from_call(call):
            seen.setdefault(path, None)
    return list(seen)
