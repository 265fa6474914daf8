"""Conversations kept in a shared store: any process can serve any request of a conversation.

One request: lease the conversation (waiting while another request holds it), take its session
from this process's cache when the cached copy has the saved version, else load the saved state
into this process's older copy (its per-item counts still hold, so only what was added since is
counted again) or into a fresh session; the gateway prepares and forwards; once the answer has
been relayed, the provider's usage is fed back and the state is saved and the lease released in
one step. The lease is renewed while the answer streams. A request that could not get the
lease within ``wait_s`` is prepared from the latest saved state and saves nothing, so two
processes never write one conversation at once.

Failing open: when the store does not answer, requests go out unchanged and the log says so
once per outage; the store is tried again a second later, and the first answer ends the outage.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from typing import Any

import anyio

from ....chat import AutomaticChatSession
from ..conversation import ConversationRecord
from ..metering.ledger import Ledger
from .base import Lease, SessionFactory, StateStore, StoreUnavailableError

__all__ = ["OutageGuard", "SharedConversations", "VersionCache"]

logger = logging.getLogger("tomc.gateway")

Snapshot = Callable[[AutomaticChatSession], bytes]
Restore = Callable[[AutomaticChatSession, bytes], None]
#: Conversations the status page lists.
STATUS_LIMIT = 50
# What every request adds to one of: prepared in a conversation, sent unchanged (body not
# JSON, store down), or a path only forwarded.
_ALL_REQUESTS = ("requests", "unprepared", "passthrough_paths")


class OutageGuard:
    """Whether to try the store now; logs the start and the end of each outage once.

    ``effect`` and ``recovery`` say in those two log lines what the outage means to the part
    guarded (the conversations, or the usage ledger)."""

    def __init__(
        self,
        shown: str,
        *,
        retry_s: float = 1.0,
        clock=time.monotonic,
        effect: str = (
            "requests pass through unchanged and usage figures are dropped until it answers again"
        ),
        recovery: str = "requests are prepared again",
    ) -> None:
        self._shown = shown
        self._effect = effect
        self._recovery = recovery
        self._retry_s = retry_s
        self._clock = clock
        self._since: float | None = None
        self._retry_at = 0.0
        self.outages = 0
        self.passed_through = 0

    @property
    def down(self) -> bool:
        return self._since is not None

    def ready(self, *, request: bool = True) -> bool:
        """False while a recent failure says the store is down (the request passes through;
        ``request`` false: not a request, such as the usage ledger's bookkeeping)."""
        if self._since is None or self._clock() >= self._retry_at:
            return True
        self.passed_through += int(request)
        return False

    def failed(self, exc: BaseException, *, request: bool = True) -> None:
        now = self._clock()
        self._retry_at = now + self._retry_s
        self.passed_through += int(request)
        if self._since is None:
            self._since = now
            self.outages += 1
            logger.warning("session store %s unavailable (%s); %s", self._shown, exc, self._effect)

    def answered(self) -> None:
        if self._since is not None:
            logger.warning(
                "session store %s answers again after %.1f s; %s",
                self._shown,
                self._clock() - self._since,
                self._recovery,
            )
            self._since = None


class VersionCache:
    """This process's ready sessions, keyed by conversation and valid for one saved version.

    A leased request takes its session out (nobody else here can use that object meanwhile)
    and puts it back under the version it saved. At most ``limit`` sessions (least recently
    used go first), so a process's memory stays bounded however many conversations the store
    holds.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._items: OrderedDict[str, tuple[int, AutomaticChatSession]] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def take(self, key: str, version: int) -> tuple[AutomaticChatSession | None, bool]:
        """This process's session of ``key`` (taken out) and whether it holds ``version``.

        A session of an older version is still worth having: its caches (per-item token
        counts) hold for every item it has seen, so loading the newer state into it costs
        only the items added since. Round robin over processes depends on that.
        """
        entry = self._items.pop(key, None)
        if entry is not None and entry[0] == version:
            self.hits += 1
            return entry[1], True
        self.misses += 1
        return (entry[1] if entry is not None else None), False

    def put(self, key: str, version: int, session: AutomaticChatSession) -> None:
        if self.limit <= 0:
            return
        self._items[key] = (version, session)
        self._items.move_to_end(key)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class _PassThrough:
    """The request goes out unchanged (the store is down)."""

    conversation: ConversationRecord | None = None

    def changed(self) -> None:
        return None

    async def finish(self) -> None:
        return None


class _SharedCheckout:
    def __init__(
        self,
        owner: SharedConversations,
        conversation: ConversationRecord,
        lease: Lease | None,
        rebuilds: int,
    ) -> None:
        self.conversation: ConversationRecord | None = conversation
        self._owner = owner
        self._lease = lease
        self._rebuilds = rebuilds
        self._renewing = asyncio.ensure_future(self._renew()) if lease is not None else None

    def changed(self) -> None:
        return None  # saved once, under the lease, when the request is finished

    async def _renew(self) -> None:
        assert self._lease is not None
        every = self._owner.store.url.options.lease_s / 3
        while True:
            await asyncio.sleep(every)
            try:
                kept = await self._owner.store.renew(self._lease)
            except StoreUnavailableError as exc:
                logger.info("lease of %s not renewed: %s", self._lease.key, exc)
                continue
            if not kept:
                if self.conversation is not None:  # not released by our own save
                    logger.warning("lease of %s lost while its request ran", self._lease.key)
                return

    async def finish(self) -> None:
        conversation, self.conversation = self.conversation, None
        if conversation is None:
            return
        try:
            # The lease is renewed until the state is saved: snapshotting a big memory takes a
            # while on a busy machine, and a lease that expired meanwhile would let another
            # process prepare the next request from the previous state.
            await self._owner.hand_back(conversation, self._lease, self._rebuilds)
        except Exception as exc:  # never fail a finished request for its bookkeeping
            logger.warning(
                "conversation %s not saved (%s: %s)", conversation.key, type(exc).__name__, exc
            )
        finally:
            if self._renewing is not None:
                self._renewing.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._renewing


class SharedConversations:
    """The :class:`~tomc._gateway.proxy.store.base.Conversations` of a shared store."""

    shared = True

    def __init__(
        self, store: StateStore, factory: SessionFactory, snapshot: Snapshot, restore: Restore
    ) -> None:
        self.store = store
        self.url = store.url
        self._factory = factory
        self._snapshot = snapshot
        self._restore = restore
        self.cache = VersionCache(store.url.options.cache)
        self.guard = OutageGuard(store.url.shown)

    async def checkout(self, key: str, api: str) -> _SharedCheckout | _PassThrough:
        if not self.guard.ready():
            return _PassThrough()
        lease = None
        try:
            lease = await self.store.acquire(key)
            if lease is None:
                logger.info("%s is busy in another request: prepared read-only", key)
                session = await self._load(key)
            elif not lease.version:  # nothing saved: a new conversation, or one that expired
                session = self._factory()
            else:
                cached, current = self.cache.take(key, lease.version)
                if current and cached is not None:
                    session = cached
                else:  # an older copy of this process's keeps its item counts
                    session = await self._load(key, cached)
        except StoreUnavailableError as exc:
            self.guard.failed(exc)
            return _PassThrough()
        except BaseException:
            if lease is not None:
                with contextlib.suppress(Exception):
                    await self.store.release(lease)
            raise
        self.guard.answered()
        now = time.monotonic()
        conversation = ConversationRecord(key, api, session, now, now)
        return _SharedCheckout(self, conversation, lease, session.rebuilds)

    async def _load(
        self, key: str, stale: AutomaticChatSession | None = None
    ) -> AutomaticChatSession:
        """The saved state of ``key`` in a session: ``stale`` (this process's session of an
        older version, its caches kept) or a new one."""
        saved = await self.store.load(key)
        if saved is None:  # expired meanwhile: the conversation starts over
            return self._factory()
        session = stale if stale is not None else self._factory()
        try:
            await anyio.to_thread.run_sync(self._restore, session, saved.data)
        except Exception as exc:  # another TOMC's layout, a damaged blob: start over
            logger.warning(
                "%s: saved state not loaded (%s: %s); the conversation starts over",
                key,
                type(exc).__name__,
                exc,
            )
            session = self._factory()
        return session

    async def hand_back(
        self, conversation: ConversationRecord, lease: Lease | None, rebuilds: int
    ) -> None:
        """Save (when leased) and count one finished request of ``conversation``."""
        session = conversation.session
        if lease is not None:
            try:
                data = await anyio.to_thread.run_sync(self._snapshot, session)
            except Exception as exc:  # keep the saved state; never keep the lease
                logger.warning(
                    "%s: state not saved (%s: %s)", conversation.key, type(exc).__name__, exc
                )
                data = None
            try:
                version = await self.store.save(lease, data)
            except StoreUnavailableError as exc:
                self.guard.failed(exc)
                return
            if data is None:
                pass  # released; the cached copy (if any) went when the lease was taken
            elif version is None:
                logger.warning(
                    "%s: lease lost before saving; this request's state is dropped",
                    conversation.key,
                )
            else:
                self.cache.put(conversation.key, version, session)
        figures = Counter(
            requests=conversation.requests,
            tokens_before=conversation.tokens_before,
            tokens_after=conversation.tokens_after,
            gateway_errors=conversation.failures,
            rebuilds=session.rebuilds - rebuilds if lease is not None else 0,
        )
        for code, n in conversation.codes.items():
            figures[f"decision:{code}"] += n
        details = {
            "api": conversation.api,
            "model": conversation.last_model,
            "last_decision": conversation.last_code,
            "context_target": str(conversation.context_target or ""),
            "target_source": conversation.target_source,
        }
        await self.count(figures, conversation.key, details)

    async def count(
        self, figures: Counter, conversation: str = "", details: dict[str, str] | None = None
    ) -> None:
        """Add ``figures`` to the store's totals (and to ``conversation``'s own)."""
        try:
            await self.store.count(+figures, conversation, details or {})
        except StoreUnavailableError as exc:
            self.guard.failed(exc)

    async def status(self) -> dict[str, Any]:
        store = {
            "kind": self.url.scheme,
            "url": self.url.shown,
            "available": not self.guard.down,
            "outages": self.guard.outages,
            "passed_through_while_down": self.guard.passed_through,
            "cached_here": len(self.cache),
            "cache_limit": self.cache.limit,
        }
        try:
            totals = await self.store.totals()
            recent = await self.store.recent(STATUS_LIMIT)
        except StoreUnavailableError as exc:
            self.guard.failed(exc)
            totals, recent = {}, []
            store["available"] = False
        return {
            "requests": sum(totals.get(n, 0) for n in _ALL_REQUESTS),
            "passthrough_paths": totals.get("passthrough_paths", 0),
            "tokens_saved": totals.get("tokens_before", 0) - totals.get("tokens_after", 0),
            "conversations": recent,
            "session_store": store,
        }

    def open_ledger(self) -> Ledger:
        """The usage ledger kept in this store, shared by every process (see
        :mod:`tomc._gateway.proxy.store.redis_ledger`); one outage of the store is one outage
        of both, logged once."""
        return self.store.open_ledger(self.guard)

    async def close(self) -> None:
        await self.store.close()
