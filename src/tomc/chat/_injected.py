"""Text an agent injects into user turns: instructions and context, not the user's own words.

Coding agents put machine-written context into ``user``-role items: Codex sends its
``<environment_context>`` (working directory, shell, sandbox, date) and the project's
``AGENTS.md`` instructions as user messages before the task; Claude Code wraps its skills list,
``CLAUDE.md`` and reminders in ``<system-reminder>`` blocks inside user messages, the first one
included. Such text is an instruction: it is kept verbatim wherever it sits, it is never the task
the compiler ranks for, and it never yields records (a quoted phrase in a skills list is no
COUNT term). Each agent's own compaction summary, sent back as a user message, is treated alike.

Detection is by shape, never by guessing at prose: a part whose whole text is one or more
blocks of a tag agents use for their context (:data:`AGENT_TAGS`), or that starts with a marker
an agent writes (``# AGENTS.md instructions for``), is injected; ``<system-reminder>`` spans
inside a user's own text are taken out of it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["AGENT_TAGS", "is_injected", "own_text", "split_parts"]

#: Tags agents wrap their own context in (Codex: codex-rs/core's environment context, user
#: instructions and turn-abort notes; Claude Code: system reminders and local-command notes).
#: A user's task is often wrapped in tags too (``<pr_description>``), so only these count.
AGENT_TAGS = (
    "environment_context",
    "user_instructions",
    "turn_aborted",
    "system-reminder",
    "local-command-caveat",
)
# One or more whole blocks of those tags and nothing else.
_TAGGED = re.compile(
    r"\s*(?:<(" + "|".join(map(re.escape, AGENT_TAGS)) + r")(?:\s[^<>]*)?>.*?</\1>\s*)+",
    re.DOTALL,
)
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>\s*", re.DOTALL)
#: Openings of text that agents write into user items (their instruction files, and the
#: summaries their own compaction sends back).
_MARKERS = (
    "# AGENTS.md instructions for ",
    "Another language model started to solve this problem",
    "This session is being continued from a previous conversation",
)


def is_injected(text: str) -> bool:
    """Whether ``text`` (one content part, or a message's whole text) was written by the agent."""
    stripped = text.lstrip()
    if not stripped:
        return False
    if stripped.startswith(_MARKERS):
        return True
    return _TAGGED.fullmatch(text) is not None


def own_text(text: str) -> str:
    """``text`` without ``<system-reminder>`` spans (the user's own words)."""
    if "<system-reminder>" not in text:
        return text
    return _REMINDER.sub("", text).strip()


def split_parts(texts: Sequence[str]) -> tuple[str, bool]:
    """The user's own text of a message's text parts, and whether any part was injected."""
    own: list[str] = []
    injected = False
    for text in texts:
        if is_injected(text):
            injected = True
            continue
        kept = own_text(text)
        injected = injected or kept != text
        if kept.strip():
            own.append(kept)
    return "\n".join(own), injected
