"""``--session-store memory`` (the default): every conversation's session lives in this process.

Nothing is copied or leased: a request gets the live session of
:class:`~tomc._gateway.proxy.sessions.MemorySessionStore` (bounded, with idle expiry), which is
why one process is the limit (``--workers`` above 1 needs a shared kind).
"""

from __future__ import annotations

import time
from typing import Any

from ..sessions import Conversation, MemorySessionStore, SessionStore
from .base import SessionFactory, StoreURL

__all__ = ["SCHEMES", "LocalConversations", "open_conversations"]

SCHEMES = ("memory",)


class _LocalCheckout:
    def __init__(self, conversation: Conversation) -> None:
        self.conversation: Conversation | None = conversation

    async def finish(self, prompt_tokens: int | None, status: int) -> None:
        conversation, self.conversation = self.conversation, None
        if conversation is not None and prompt_tokens is not None and status < 400:
            conversation.session.observe_usage(prompt_tokens)


class LocalConversations:
    """The :class:`~tomc._gateway.proxy.store.base.Conversations` of one process."""

    shared = False

    def __init__(self, sessions: SessionStore, url: StoreURL | None = None) -> None:
        self.sessions = sessions
        self.url = url or StoreURL("memory", "memory")
        self.requests = 0
        self.passthrough_paths = 0

    async def checkout(self, key: str, api: str) -> _LocalCheckout:
        return _LocalCheckout(self.sessions.get(key, api))

    def count(self, *, requests: int = 0, passthrough_paths: int = 0) -> None:
        self.requests += requests
        self.passthrough_paths += passthrough_paths

    async def status(self, now: float | None = None) -> dict[str, Any]:
        now = time.monotonic() if now is None else now
        conversations = [c.to_dict(now) for c in self.sessions.conversations()]
        return {
            "requests": self.requests,
            "passthrough_paths": self.passthrough_paths,
            "tokens_saved": sum(c["tokens_saved"] for c in conversations),
            "conversations": conversations,
        }

    async def close(self) -> None:
        return None


def open_conversations(url: StoreURL, factory: SessionFactory) -> LocalConversations:
    """The in-process store for ``url`` (``memory``)."""
    return LocalConversations(MemorySessionStore(factory), url)
