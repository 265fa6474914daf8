"""TOMC for a caller's own Chat Completions loop.

:class:`AutomaticChatSession` rewrites only old history into a compiled memory and keeps
prefix caches warm; :mod:`tomc.chat.simulate` prices that under provider prompt caching.
This package depends on the core compiler, never the other way round.
"""

from __future__ import annotations

from .decision import CODES, Decision
from .dialects.chat_completions import check_tool_pairing
from .native import NativeEvent
from .profiles import ModelProfile
from .session import AutomaticChatSession, PreparedRequest

__all__ = [
    "CODES",
    "AutomaticChatSession",
    "Decision",
    "ModelProfile",
    "NativeEvent",
    "PreparedRequest",
    "check_tool_pairing",
]
