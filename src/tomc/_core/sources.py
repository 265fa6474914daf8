"""Reading a history into source units: one unit per nonempty content line, in order."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import InputTooLargeError, InvalidHistoryError

__all__ = [
    "MAX_INTERACTIVE_CHARS",
    "MAX_TASK_CHARS",
    "History",
    "SourceTable",
    "check_interactive_size",
    "detect_chat_messages",
    "history_chars",
    "read_history",
]

#: Interactive surfaces (CLI by default, MCP, web, notebooks) refuse a history over this many
#: characters (message text only for chat lists).
MAX_INTERACTIVE_CHARS = 200_000
#: The task has its own, separate limit, so it never eats into the history's.
MAX_TASK_CHARS = 10_000

History = str | Sequence[Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class SourceTable:
    """Columns of the source units. Kept as parallel tuples so big histories stay cheap."""

    texts: tuple[str, ...]
    roles: tuple[str | None, ...]
    message_indexes: tuple[int, ...]
    line_indexes: tuple[int, ...]
    is_chat: bool

    def __len__(self) -> int:
        return len(self.texts)


def _message_text(message: Any, index: int) -> str:
    if not isinstance(message, Mapping):
        raise InvalidHistoryError(
            f"message {index} is a {type(message).__name__}; each message must be a mapping "
            "with 'role' and 'content'"
        )
    role = message.get("role")
    if not isinstance(role, str) or not role:
        raise InvalidHistoryError(f"message {index} has no 'role' string")
    content = message.get("content")
    if content is None:
        return ""  # e.g. an assistant message that only carries tool calls
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, bytes | bytearray):
        texts = []
        for part_index, part in enumerate(content):
            if isinstance(part, str):
                texts.append(part)
                continue
            if not isinstance(part, Mapping):
                raise InvalidHistoryError(
                    f"message {index} part {part_index} is a {type(part).__name__}, not a "
                    "content part mapping"
                )
            kind = part.get("type")
            if kind in ("text", "input_text", "output_text") and isinstance(part.get("text"), str):
                texts.append(part["text"])
            else:
                raise InvalidHistoryError(
                    f"message {index} part {part_index} has type {kind!r}; only text parts can "
                    "be compiled (drop images, audio and files, or pass the request through)"
                )
        return "\n".join(texts)
    raise InvalidHistoryError(
        f"message {index} content is a {type(content).__name__}; expected a string or a list of "
        "text parts"
    )


def read_history(history: History) -> SourceTable:
    """Split a history into source units; raise :class:`InvalidHistoryError` when unreadable."""
    if isinstance(history, bytes | bytearray):
        raise InvalidHistoryError("history is bytes; decode it to str first")
    texts: list[str] = []
    roles: list[str | None] = []
    message_indexes: list[int] = []
    line_indexes: list[int] = []
    if isinstance(history, str):
        if "\x00" in history:
            raise InvalidHistoryError("history contains NUL bytes; it looks like binary data")
        lines = history.splitlines()
        # The lines with more than white space, and where they stand: map and compress keep the
        # per-line work in C (str.strip gives a line back as it is when it has none to strip).
        content = list(map(str.strip, lines))
        texts = list(itertools.compress(lines, content))
        line_indexes = list(itertools.compress(range(len(lines)), content))
        roles = [None] * len(texts)
        message_indexes = [0] * len(texts)
        is_chat = False
    elif isinstance(history, Sequence):
        for message_index, message in enumerate(history):
            text = _message_text(message, message_index)
            if "\x00" in text:
                raise InvalidHistoryError(f"message {message_index} contains NUL bytes")
            role = message["role"]
            for line_index, line in enumerate(text.splitlines()):
                if line.strip():
                    texts.append(line)
                    roles.append(role)
                    message_indexes.append(message_index)
                    line_indexes.append(line_index)
        is_chat = True
    else:
        raise InvalidHistoryError(
            f"history must be a str or a list of chat messages, not {type(history).__name__}"
        )
    if not texts:
        raise InvalidHistoryError("history is empty: it has no nonempty content line")
    return SourceTable(
        tuple(texts), tuple(roles), tuple(message_indexes), tuple(line_indexes), is_chat
    )


def history_chars(history: History) -> int:
    """Characters of text in a history (message text only for chat lists)."""
    if isinstance(history, str):
        return len(history)
    total = 0
    for index, message in enumerate(history):
        total += len(_message_text(message, index))
    return total


def check_interactive_size(
    history: History,
    task: str = "",
    limit: int | None = MAX_INTERACTIVE_CHARS,
    *,
    task_limit: int | None = MAX_TASK_CHARS,
) -> None:
    """Refuse a history over ``limit`` characters or a task over ``task_limit``.

    ``None`` or 0 lifts a limit. The task does not count against the history's limit: a
    notebook may hold up to ``limit`` characters and must stay recallable with any task.
    """
    if limit:
        size = history_chars(history)
        if size > limit:
            raise InputTooLargeError(
                size,
                limit,
                "split the history, or call tomc.compile_memory() from Python, which has no limit",
                what="history",
            )
    if task_limit and isinstance(task, str) and len(task) > task_limit:
        raise InputTooLargeError(
            len(task), task_limit, "say what the memory is for in fewer words", what="task"
        )


def detect_chat_messages(text: str) -> list[Any] | None:
    """The chat list a pasted or piped text encodes, or ``None`` when it is plain lines.

    Only a JSON array of objects counts: a log line such as ``[10:02] deploy done`` or a
    one-line ``[1, 2]`` stays text. Objects without a ``role`` still count, so they get the
    compiler's error rather than being compiled as one line of JSON.
    """
    if not text.lstrip().startswith("["):
        return None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # deeply nested brackets are text, not a crash
        return None
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return value
    return None
