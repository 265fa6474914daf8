"""TOMC for a caller's own agent loop, in any of three wire formats.

:class:`AutomaticChatSession` rewrites only old history into a compiled memory and keeps
prefix caches warm, for OpenAI Chat Completions, Anthropic Messages and OpenAI Responses
requests alike (:mod:`tomc.chat.dialects` reads and writes each format); the gateway runs the
same session for Claude Code and Codex. :class:`SessionOptions` are its options as one value
and :class:`ConversationState` what it learned about its conversation (saved and loaded as
JSON). ``tomc simulate`` prices that under provider prompt caching. This package
depends on the core compiler, never the other way round.
"""

from __future__ import annotations

from .._core.errors import SessionStateError
from ._decision import CODES, Decision
from ._native import NativeEvent
from ._options import SessionOptions
from ._profiles import ModelProfile
from ._session import AutomaticChatSession, PreparedRequest
from ._state import ConversationState
from .dialects._chat_completions import check_tool_pairing

__all__ = [
    "CODES",
    "AutomaticChatSession",
    "ConversationState",
    "Decision",
    "ModelProfile",
    "NativeEvent",
    "PreparedRequest",
    "SessionOptions",
    "SessionStateError",
    "check_tool_pairing",
]
