"""``--session-store memory`` (the default): every conversation's session lives in this process.

Nothing is leased: a request gets the live record of a :class:`SessionStore` (by default the
bounded :class:`MemorySessionStore`: at most ``max_sessions``, least recently used first out,
none idle longer than ``idle_s``), and every change is handed to its ``save`` at once, so a
store that keeps only each conversation's state JSON can be given instead (``Gateway(store=)``).
One process is the limit (``--workers`` above 1 needs a shared kind).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from ....chat import AutomaticChatSession
from ..conversation import ConversationRecord
from .base import SessionFactory, StoreURL

__all__ = [
    "SCHEMES",
    "LocalConversations",
    "MemorySessionStore",
    "SessionStore",
    "open_conversations",
]

SCHEMES = ("memory",)

logger = logging.getLogger("tomc.gateway")


class SessionStore(Protocol):
    """Where conversations live. Implementations must be safe to call from several threads."""

    def get(self, key: str, api: str) -> ConversationRecord:
        """The conversation for ``key``, created on first use; its session holds the state."""

    def save(self, record: ConversationRecord) -> None:
        """Keep ``record`` as it is now: called after its session decided a request, learned
        from usage or noted a compaction, and after its figures changed."""

    def conversations(self) -> list[ConversationRecord]:
        """Every live conversation, most recent first."""


class MemorySessionStore:
    """An in-process LRU of conversations with idle expiry."""

    def __init__(
        self,
        factory: Callable[[], AutomaticChatSession],
        *,
        max_sessions: int = 256,
        idle_s: float = 6 * 3600,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_sessions < 1 or idle_s <= 0:
            raise ValueError("max_sessions must be >= 1 and idle_s > 0")
        self._factory = factory
        self._max = max_sessions
        self._idle_s = idle_s
        self._clock = clock
        self._items: OrderedDict[str, ConversationRecord] = OrderedDict()
        self._lock = threading.Lock()
        self.evicted = 0

    def get(self, key: str, api: str) -> ConversationRecord:
        now = self._clock()
        with self._lock:
            self._expire(now)
            conversation = self._items.get(key)
            if conversation is None:
                conversation = ConversationRecord(key, api, self._factory(), now, now)
                self._items[key] = conversation
                while len(self._items) > self._max:
                    self._items.popitem(last=False)
                    self.evicted += 1
            else:
                self._items.move_to_end(key)
                conversation.last_seen = now
            return conversation

    def save(self, record: ConversationRecord) -> None:
        """Nothing to do: the record and its session live in this process."""

    def conversations(self) -> list[ConversationRecord]:
        with self._lock:
            self._expire(self._clock())
            return list(reversed(self._items.values()))

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[ConversationRecord]:
        return iter(self.conversations())

    def _expire(self, now: float) -> None:
        while self._items:
            key, oldest = next(iter(self._items.items()))
            if now - oldest.last_seen <= self._idle_s:
                break
            del self._items[key]
            self.evicted += 1


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
