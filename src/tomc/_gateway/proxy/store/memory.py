"""``--session-store memory`` (the default): every conversation's session lives in this process.

Nothing is leased: a request gets the live session of a
:class:`~tomc._gateway.proxy.sessions.SessionStore` (by default the bounded
:class:`~tomc._gateway.proxy.sessions.MemorySessionStore`, with idle expiry), and every change
is handed to its ``save`` at once. One process is the limit (``--workers`` above 1 needs a
shared kind).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from ..sessions import ConversationRecord, MemorySessionStore, SessionStore
from .base import SessionFactory, StoreURL

__all__ = ["SCHEMES", "LocalConversations", "open_conversations"]

SCHEMES = ("memory",)

logger = logging.getLogger("tomc.gateway")


class _LocalCheckout:
    def __init__(self, sessions: SessionStore, conversation: ConversationRecord) -> None:
        self.conversation: ConversationRecord | None = conversation
        self._sessions = sessions

    def changed(self) -> None:
        # At once: the next request of the conversation may arrive before finish() runs.
        if self.conversation is None:
            return
        try:
            self._sessions.save(self.conversation)
        except Exception as exc:  # the next request starts from what the store kept
            logger.warning("conversation not saved (%s: %s)", type(exc).__name__, exc)

    async def finish(self) -> None:
        self.conversation = None


class LocalConversations:
    """The :class:`~tomc._gateway.proxy.store.base.Conversations` of one process."""

    shared = False

    def __init__(self, sessions: SessionStore, url: StoreURL | None = None) -> None:
        self.sessions = sessions
        self.url = url or StoreURL("memory", "memory")

    async def checkout(self, key: str, api: str) -> _LocalCheckout:
        return _LocalCheckout(self.sessions, self.sessions.get(key, api))

    async def count(self, figures: Mapping[str, int]) -> None:
        return None  # the gateway keeps its own counters

    def snapshot(self) -> dict[str, Any]:
        """:meth:`status`, callable from any thread."""
        now = time.monotonic()
        conversations = [c.to_dict(now) for c in self.sessions.conversations()]
        return {
            "tokens_saved": sum(c["tokens_saved"] for c in conversations),
            "conversations": conversations,
        }

    async def status(self) -> dict[str, Any]:
        return self.snapshot()

    def open_ledger(self) -> None:
        return None  # this process's ledger is the gateway's own (SQLite)

    async def close(self) -> None:
        return None


def open_conversations(url: StoreURL, factory: SessionFactory) -> LocalConversations:
    """The in-process store for ``url`` (``memory``)."""
    return LocalConversations(MemorySessionStore(factory), url)
