"""The provider's own context management a request asks for, read as a prompt-size ceiling.

Both providers can edit a long prompt on their side. TOMC keeps a request under the size at
which such an edit would start (:meth:`~tomc.chat.dialects.Dialect.provider_ceiling`), so the
turns it compiled are never compacted a second time and nothing the provider would clear is
left to clear; every field goes out as the client sent it.

- Anthropic Messages, ``context_management.edits``: ``compact_20260112`` (server-side
  compaction; ``trigger`` of type ``input_tokens``, 150,000 by default) and
  ``clear_tool_uses_20250919`` (clears old tool results; ``trigger`` 100,000 input tokens by
  default). A trigger counted in tool uses has no size: no ceiling. ``clear_thinking_20251015``
  has no trigger and clears only thinking blocks, which TOMC keeps as the format requires: the
  provider applies it to what TOMC sends.
- OpenAI Responses, ``context_management: [{"type": "compaction", "compact_threshold": N}]``.
  ``truncation: "auto"`` drops items only past the model's window, which TOMC's own ceiling
  already keeps the request under.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["ANTHROPIC_DEFAULT_TRIGGERS", "CEILING_SHARE", "anthropic_ceiling", "responses_ceiling"]

#: The share of a provider's trigger TOMC keeps a prompt under: the provider counts with its own
#: tokenizer, which may count a few percent more than TOMC's estimate.
CEILING_SHARE = 0.95
#: Anthropic's default trigger (input tokens) of each edit type that removes history, by prefix.
ANTHROPIC_DEFAULT_TRIGGERS = {"compact_": 150_000, "clear_tool_uses_": 100_000}


def _count(value: object) -> int | None:
    ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
    return value if ok else None


def _ceiling(triggers: list[int]) -> int | None:
    return math.floor(min(triggers) * CEILING_SHARE) if triggers else None


def anthropic_ceiling(request: Mapping[str, Any]) -> int | None:
    """The ceiling ``context_management.edits`` set on a Messages request, if any."""
    management = request.get("context_management")
    edits = management.get("edits") if isinstance(management, Mapping) else None
    triggers = []
    for edit in edits if isinstance(edits, list) else ():
        kind = edit.get("type") if isinstance(edit, Mapping) else None
        default = next(
            (
                tokens
                for prefix, tokens in ANTHROPIC_DEFAULT_TRIGGERS.items()
                if isinstance(kind, str) and kind.startswith(prefix)
            ),
            None,
        )
        if default is None:
            continue
        trigger = edit.get("trigger")
        if trigger is None:
            triggers.append(default)
        elif isinstance(trigger, Mapping) and trigger.get("type") == "input_tokens":
            value = _count(trigger.get("value"))
            triggers.append(value if value is not None else default)
    return _ceiling(triggers)


def responses_ceiling(request: Mapping[str, Any]) -> int | None:
    """The ceiling a Responses request's ``context_management`` compaction sets, if any."""
    management = request.get("context_management")
    entries = management if isinstance(management, list) else [management]
    triggers = [
        threshold
        for entry in entries
        if isinstance(entry, Mapping) and entry.get("type") == "compaction"
        for threshold in [_count(entry.get("compact_threshold"))]
        if threshold is not None
    ]
    return _ceiling(triggers)
