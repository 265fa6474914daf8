"""Real coding-agent trajectories for the long-agent-loop benchmark: what each one holds.

Loading, token counts per message, tool groups, the evidence lines of the final patch and which
replies edit a file. Facts about one trajectory only; the replay lives in ``agent_replay``.
The data is read from ``../shared/data/agent_trajectories.jsonl.gz`` (or from the folder
``$TOMC_BENCH_DATA``) at run time, never copied.

Token counts approximate what OpenAI bills; they do not reproduce it. Each message counts the
o200k tokens of its text parts plus small framing constants (below); tool schemas count as the
o200k tokens of their JSON, although providers render them in their own format.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.progress import data_file
from tomc._core.extras import install_hint

DEFAULT_DATA = data_file("agent_trajectories.jsonl.gz")

# Framing constants, as OpenAI's cookbook counts chat messages for gpt-4o-style models:
# each message costs 3 tokens beyond its text (role and separators), a `name` costs one more,
# and every reply is primed with 3. A tool call is charged like a small message of its own.
MESSAGE_FRAMING = 3
NAME_FRAMING = 1
TOOL_CALL_FRAMING = 3
REPLY_PRIMING = 3
_BPE_MAX_CHARS = 1_000_000  # bpe-openai refuses a single longer input
_EVIDENCE_MIN_CHARS = 8


class DataError(ValueError):
    """The trajectory file is missing or malformed; the message names the problem."""


@dataclass(frozen=True)
class Trajectory:
    """One agent run: the tool schemas, the messages in order and the submitted patch."""

    id: str
    tools: list[Any]
    messages: list[dict[str, Any]]
    submission: str
    recorded_file_edits: int = 0  # the data set's own count (meta.file_edits), for comparison


def load(path: str | Path = DEFAULT_DATA, limit: int | None = None) -> list[Trajectory]:
    """Read up to ``limit`` trajectories from a ``.jsonl`` or ``.jsonl.gz`` file."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"trajectory file not found: {path}")
    opener = gzip.open if path.suffix == ".gz" else open
    trajectories: list[Trajectory] = []
    try:
        with opener(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if limit is not None and len(trajectories) >= limit:
                    break
                if line.strip():
                    trajectories.append(_record(json.loads(line), number))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from exc
    if not trajectories:
        raise DataError(f"no trajectories in {path}")
    return trajectories


def _record(data: Any, number: int) -> Trajectory:
    messages = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise DataError(f"line {number}: a record needs a list of message objects")
    meta = data.get("meta") or {}
    submission = meta.get("submission")
    if not isinstance(submission, str):
        raise DataError(f"line {number}: meta.submission (the final patch) is missing")
    return Trajectory(
        id=str(data.get("id", f"line-{number}")),
        tools=list(data.get("tools") or []),
        messages=messages,
        submission=submission,
        recorded_file_edits=int(meta.get("file_edits") or 0),
    )


# ----------------------------------------------------------------------- token counts


def o200k_counter() -> Callable[[str], int]:
    """Exact o200k_base counts of one text (``bpe-openai`` ships the vocabulary)."""
    try:
        import bpe_openai
    except ImportError as exc:
        raise DataError(
            "the agent benchmark needs bpe-openai (no download at run time): " + install_hint("bpe")
        ) from exc
    encoder = bpe_openai.get_encoding("o200k_base")

    def count(text: str) -> int:
        if len(text) <= _BPE_MAX_CHARS:
            return len(encoder.encode_ordinary(text))
        # Split at line ends: a split can change the count by a token or so, nothing more.
        total, start = 0, 0
        while start < len(text):
            end = min(len(text), start + _BPE_MAX_CHARS)
            cut = text.rfind("\n", start, end) + 1 if end < len(text) else end
            end = cut if cut > start else end
            total += len(encoder.encode_ordinary(text[start:end]))
            start = end
        return total

    return count


def token_parts(message: Mapping[str, Any]) -> list[str]:
    """The text of a message as it is sent: content, reasoning, tool names and raw arguments."""
    parts = [_content(message.get("content"))]
    for key in ("reasoning_content", "refusal", "name"):
        if isinstance(message.get(key), str):
            parts.append(message[key])
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        parts.append(str(function.get("name", "")))
        parts.append(str(function.get("arguments", "")))
    return [part for part in parts if part]


def evidence_text(message: Mapping[str, Any]) -> str:
    """What a reader sees in a message; tool arguments decoded, so quotes are not escaped."""
    parts = [_content(message.get("content"))]
    if isinstance(message.get("reasoning_content"), str):
        parts.append(message["reasoning_content"])
    for call in message.get("tool_calls") or ():
        arguments = (call.get("function") or {}).get("arguments", "")
        parts.append(str(arguments))
        parts.extend(_argument_strings(arguments))
    return "\n".join(part for part in parts if part)


def message_tokens(message: Mapping[str, Any], count: Callable[[str], int]) -> int:
    """Tokens of one message: its text parts plus the framing constants."""
    calls = message.get("tool_calls") or ()
    return (
        MESSAGE_FRAMING
        + (NAME_FRAMING if message.get("name") else 0)
        + TOOL_CALL_FRAMING * len(calls)
        + sum(count(part) for part in token_parts(message))
    )


def tools_json(tools: Sequence[Any]) -> str:
    return json.dumps(list(tools), sort_keys=True, ensure_ascii=False) if tools else ""


def canonical(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)


def _content(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            part["text"]
            for part in content
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        )
    return ""


def _argument_strings(arguments: Any) -> list[str]:
    try:
        data = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError:
        return []
    if isinstance(data, dict):
        return [value for value in data.values() if isinstance(value, str)]
    return []


# ----------------------------------------------------------------------- structure


def head_and_groups(messages: Sequence[Mapping[str, Any]]) -> tuple[int, list[tuple[int, int]]]:
    """``(head_end, groups)``: the head is every message up to and including the first user
    message (system prompt and task); each group is a ``(start, end)`` range holding one
    assistant ``tool_calls`` message and its results. Assistant text between groups belongs to
    the following group; anything after the last group forms a final group of its own.
    """
    head_end = next(
        (i + 1 for i, m in enumerate(messages) if m.get("role") == "user"), len(messages)
    )
    groups: list[tuple[int, int]] = []
    start, called = head_end, False
    for index in range(head_end, len(messages)):
        message = messages[index]
        if called and message.get("role") != "tool":
            groups.append((start, index))
            start, called = index, False
        if message.get("role") == "assistant" and message.get("tool_calls"):
            called = True
    if start < len(messages):
        groups.append((start, len(messages)))
    return head_end, groups


# ----------------------------------------------------------------------- evidence


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def evidence_lines(diff: str) -> list[str]:
    """The removed lines of every hunk, stripped, at least 8 characters, first occurrence only.

    Hunk line counts from the ``@@`` headers decide what is inside a hunk, so a removed line
    that itself starts with ``--`` is never mistaken for a file header.
    """
    lines: dict[str, None] = {}
    old_left = new_left = 0
    for line in diff.splitlines():
        if old_left > 0 or new_left > 0:
            tag, text = line[:1], line[1:]
            if tag == "-":
                old_left -= 1
                text = text.strip()
                if len(text) >= _EVIDENCE_MIN_CHARS:
                    lines.setdefault(text)
            elif tag == "+":
                new_left -= 1
            elif tag == "\\":
                pass  # "\ No newline at end of file"
            else:  # context (a blank context line may have lost its leading space)
                old_left -= 1
                new_left -= 1
            continue
        match = _HUNK.match(line)
        if match:
            old_left = int(match.group(1) or 1)
            new_left = int(match.group(2) or 1)
    return list(lines)


def patched_paths(diff: str) -> list[str]:
    """The files a unified diff changes (from its ``diff --git`` / ``+++`` headers)."""
    paths: dict[str, None] = {}
    for line in diff.splitlines():
        match = re.match(r"^diff --git a/(\S+) b/(\S+)", line)
        if match:
            paths.setdefault(match.group(2))
    return list(paths)


# ----------------------------------------------------------------------- edits


_HEREDOC = re.compile(r"<<-?\s*(['\"]?)(\w+)\1([^\n]*)\n(.*?)(?:\n[ \t]*\2[ \t]*(?=\n|$)|$)", re.S)
_QUOTED = re.compile(r"'[^']*'|\"(?:[^\"\\]|\\.)*\"")
_REDIRECT = re.compile(r"(?<![0-9&>=<-])>>?\s*(?!&|/dev/null\b)([^\s&|;<>()]+)")
_SHELL_WRITE = re.compile(
    r"\bsed\b[^|;&\n]*\s-[a-zA-Z]*i"  # sed -i, sed -Ei, sed -n -i ...
    r"|\bperl\b[^|;&\n]*\s-[a-zA-Z]*i"
    r"|\btee\s+(?:-a\s+)?(?!/dev/null\b)[^\s|;&]"
    r"|(?:^|[;&|(\n])\s*(?:patch|cp|mv)\s"
    r"|\bgit\s+apply\b"
    r"|\bstr_replace\b"
)
_PYTHON_WRITE = re.compile(
    r"open\([^)]*,\s*(?:mode\s*=\s*)?['\"][wax]b?\+?['\"]"
    r"|\.write_text\(|\.write_bytes\(|\.writelines?\(|shutil\.(?:copy|move)"
)


def command_of(message: Mapping[str, Any]) -> str:
    """The shell command (or raw arguments) of every tool call in an assistant message."""
    commands = []
    for call in message.get("tool_calls") or ():
        arguments = (call.get("function") or {}).get("arguments", "")
        strings = _argument_strings(arguments)
        commands.append("\n".join(strings) if strings else str(arguments))
    return "\n".join(commands)


def writes_file(command: str) -> bool:
    """Whether a shell command writes a file (a heuristic, see the benchmark's notes).

    Counted: ``sed -i`` / ``perl -i``; ``>`` or ``>>`` into anything but ``/dev/null`` or a
    descriptor (heredoc bodies and quoted strings are ignored, so ``a > b`` in code is not a
    redirect); ``tee``; ``cp``, ``mv``, ``patch``, ``git apply``, ``str_replace``; and Python
    (``python -c`` or a heredoc) that opens a file for writing or calls a write method.
    """
    # Keep the rest of the heredoc's first line: `cat <<'EOF' > file` redirects there.
    shell = _HEREDOC.sub(lambda match: "<<HEREDOC" + match.group(3), command)
    shell_unquoted = _QUOTED.sub("''", shell)
    if _SHELL_WRITE.search(shell_unquoted) or _REDIRECT.search(shell_unquoted):
        return True
    return bool(re.search(r"\bpython[\d.]*\b", command) and _PYTHON_WRITE.search(command))


def mentions_path(command: str, paths: Sequence[str]) -> bool:
    """Whether a command names one of ``paths`` (by file name, not as part of a longer name)."""
    for path in paths:
        name = re.escape(path.rsplit("/", 1)[-1])
        if re.search(rf"(?<![\w.-]){name}(?![\w-])", command):
            return True
    return False
