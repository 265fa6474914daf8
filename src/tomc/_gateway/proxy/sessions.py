"""One AutomaticChatSession per conversation, in a bounded store with idle expiry.

The store is a small interface (:class:`SessionStore`) so that a team deployment can later keep
conversations somewhere every worker sees; :class:`MemorySessionStore` keeps them in this
process: at most ``max_sessions`` (least recently used go first) and none idle for longer than
``idle_s``. Each :class:`ConversationRecord` also keeps the figures the status page shows, never
message text.

Everything a conversation's decisions depend on is its session's
:class:`~tomc.chat.ConversationState` (plain data, saved as JSON) and the session's options,
which every conversation shares. The gateway calls :meth:`SessionStore.save` after each change
to a record, so a store shared between processes can keep only the state's JSON per conversation
and give each request a session made from the shared options with that state loaded.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from ...chat import AutomaticChatSession, Decision
from .usage import ProviderUsage

__all__ = ["ConversationRecord", "MemorySessionStore", "SessionStore"]

logger = logging.getLogger("tomc.gateway")


@dataclass
class ConversationRecord:
    """A conversation's session and what happened to its requests (figures only)."""

    key: str
    api: str
    session: AutomaticChatSession
    created: float
    last_seen: float
    requests: int = 0
    codes: Counter = field(default_factory=Counter)
    tokens_before: int = 0
    tokens_after: int = 0
    failures: int = 0
    last_model: str = ""
    last_code: str = ""
    #: The decision of the latest request (``None`` after a gateway error), for the usage ledger.
    last_decision: Decision | None = None
    #: The last decision's context target (``None``: none applied) and where it came from.
    context_target: int | None = None
    target_source: str = ""
    #: What the provider reported for the latest request, once its answer is in.
    last_usage: ProviderUsage | None = None

    def record(self, decision: Decision | None, now: float) -> None:
        self.requests += 1
        self.last_seen = now
        self.last_decision = decision
        self.last_usage = None
        if decision is None:
            self.failures += 1
            self.last_code = "gateway_error"
            self.codes["gateway_error"] += 1
            return
        self.codes[decision.code] += 1
        self.tokens_before += decision.tokens_before
        self.tokens_after += decision.tokens_after
        self.last_model = decision.model
        self.last_code = decision.code
        self.context_target = getattr(decision, "context_target", None)

    def note_usage(self, usage: ProviderUsage) -> None:
        """The provider's side of the latest request: what it counted, read from its cache,
        wrote to it and billed (logged, and shown in the status as ``last_request``)."""
        self.last_usage = usage
        code = self.last_decision.code if self.last_decision is not None else "-"
        logger.info("%s %s: %s", self.key, code, usage.describe())

    def last_request(self) -> dict[str, Any] | None:
        """The latest request's account: TOMC's decision and time, the provider's figures."""
        decision, usage = self.last_decision, self.last_usage
        if decision is None:
            return None
        return {
            "decision": decision.code,
            "rebuild": decision.rebuild,
            "tokens_before": decision.tokens_before,
            "tokens_after": decision.tokens_after,
            "prepare_ms": round(decision.prepare_s * 1000, 1),
            "provider": None
            if usage is None
            else {
                "prompt_tokens": usage.prompt_tokens,
                "cache_read_tokens": usage.cache_read_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
                "billed_input": round(usage.billed_input, 1),
            },
        }

    def to_dict(self, now: float) -> dict[str, Any]:
        saved = self.tokens_before - self.tokens_after
        return {
            "conversation": self.key,
            "api": self.api,
            "model": self.last_model,
            "requests": self.requests,
            "rebuilds": self.session.rebuilds,
            "decisions": dict(sorted(self.codes.items())),
            "last_decision": self.last_code,
            "context_target": self.context_target,
            "target_source": self.target_source,
            "tokens_sent": self.tokens_after,
            "tokens_without_tomc": self.tokens_before,
            "tokens_saved": saved,
            "saved_share": saved / self.tokens_before if self.tokens_before else 0.0,
            "account": _account(self.session),
            "last_request": self.last_request(),
            "gateway_errors": self.failures,
            "idle_s": round(now - self.last_seen, 1),
            "age_s": round(now - self.created, 1),
        }


def _account(session: AutomaticChatSession) -> dict[str, float]:
    """The session's cost account: what it billed against going direct, by its own estimates."""
    account = session.state.account
    return {"billed": round(account.sent, 1), "direct": round(account.direct, 1)}


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
