"""TOMC for a caller's own Chat Completions loop.

:class:`AutomaticChatSession` rewrites only old history into a compiled memory and keeps
prefix caches warm; :mod:`tomc.chat.simulate` prices that under provider prompt caching.
This package depends on the core compiler, never the other way round.
"""

from __future__ import annotations

from .native import NativeEvent
from .profiles import ModelProfile
from .protocol import check_tool_pairing
from .session import AutomaticChatSession, Decision

__all__ = [
    "AutomaticChatSession",
    "Decision",
    "ModelProfile",
    "NativeEvent",
    "check_tool_pairing",
]
