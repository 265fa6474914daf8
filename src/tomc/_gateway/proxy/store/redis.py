"""``--session-store redis://host:port/db``: conversation state in Redis or Valkey.

Keys, under the URL's ``prefix`` (``tomc:``):

- ``lock:<conversation>``: a request's lease, a random token set with ``SET NX PX``; renewed and
  released by scripts that compare the token first, so a request never frees another's lease;
- ``state:<conversation>``: a hash of the state blob (``d``) and its version (``v``); saving
  checks the lease, bumps the version, writes the blob, resets the idle expiry and releases
  the lease in one script;
- ``fig:<conversation>``, ``recent`` and ``totals``: the status figures (``HINCRBY``), summed
  over every process, with the same idle expiry;
- ``ledger:...``: the usage ledger's figures (:mod:`.redis_ledger`).

Uses the official client (``redis``, the ``team`` extra), asyncio flavour, on a blocking pool
of the URL's ``connections`` (64): a burst of requests beyond it waits for a free connection
instead of failing with "Too many connections" (the client's default pool refuses at once past
its size, which failed every request of a burst open). Every failure becomes
:class:`~tomc._gateway.proxy.store.base.StoreUnavailableError` (the gateway then fails open),
one that found no free connection in time saying the pool is too small for the load; one retry
without delay covers a connection the server closed while idle.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ...._core.errors import GatewayError
from ...._core.extras import install_hint
from .base import Lease, SavedState, SessionFactory, StoreUnavailableError, StoreURL

__all__ = ["SCHEMES", "RedisStateStore", "open_conversations"]

SCHEMES = ("redis", "rediss", "valkey", "valkeys")

_ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return tonumber(redis.call('HGET', KEYS[2], 'v') or '0')
end
return -1
"""
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""
# Saves when the lease is still ours, or when it expired unnoticed and nobody saved since.
_SAVE = """
local holder = redis.call('GET', KEYS[1])
local version = tonumber(redis.call('HGET', KEYS[2], 'v') or '0')
if holder ~= ARGV[1] and (holder or version ~= tonumber(ARGV[3])) then
  return -1
end
if ARGV[4] then
  version = redis.call('HINCRBY', KEYS[2], 'v', 1)
  redis.call('HSET', KEYS[2], 'd', ARGV[4])
end
if version > 0 then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
if holder == ARGV[1] then
  redis.call('DEL', KEYS[1])
end
return version
"""
# Waits between tries for a lease another request holds: short at first (the usual holder is
# a request whose answer just ended and is being saved), then at most this.
_FIRST_WAIT_S, _LONGEST_WAIT_S = 0.002, 0.05
#: Conversations listed in ``recent`` at most (the oldest go first).
_RECENT_LIMIT = 10_000
_COUNTED = ("requests", "rebuilds", "tokens_before", "tokens_after", "gateway_errors")

T = TypeVar("T")


def _import_redis() -> Any:
    try:
        import redis.asyncio as aioredis
    except ImportError:
        raise GatewayError(
            "--session-store redis:// needs the official redis client, the 'team' extra "
            f"(pip install 'tomc[team]'): {install_hint('team')}"
        ) from None
    return aioredis


class RedisStateStore:
    """A :class:`~tomc._gateway.proxy.store.base.StateStore` on one Redis or Valkey server."""

    def __init__(self, url: StoreURL) -> None:
        self.url = url
        self.options = url.options
        self._aioredis = _import_redis()
        self._client: Any = None
        self._scripts: dict[str, Any] = {}
        #: Commands that found no free connection in time (the pool too small for the load).
        self.pool_exhausted = 0

    # ---------------------------------------------------------------- plumbing

    def _connect(self) -> Any:
        """The client, made on first use (inside the serving event loop)."""
        if self._client is None:
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

            parts = urlsplit(self.url.text)
            scheme = {"valkey": "redis", "valkeys": "rediss"}.get(self.url.scheme, self.url.scheme)
            plain = urlunsplit((scheme, parts.netloc, parts.path, "", ""))
            pool = self._aioredis.BlockingConnectionPool.from_url(
                plain,
                max_connections=self.options.connections,
                timeout=self.options.pool_wait_s,
                socket_timeout=self.options.timeout_s,
                socket_connect_timeout=self.options.timeout_s,
                retry=Retry(NoBackoff(), 1),
                client_name="tomc-gateway",
            )
            self._client = self._aioredis.Redis.from_pool(pool)  # closes the pool with it
            for name, source in (
                ("acquire", _ACQUIRE),
                ("renew", _RENEW),
                ("release", _RELEASE),
                ("save", _SAVE),
            ):
                self._scripts[name] = self._client.register_script(source)
        return self._client

    async def _call(self, work: Callable[[Any], Awaitable[T]]) -> T:
        from redis.exceptions import RedisError

        try:
            return await work(self._connect())
        except (RedisError, OSError) as exc:
            if _pool_exhausted(exc):
                self.pool_exhausted += 1
                raise StoreUnavailableError(
                    f"no free connection among this process's {self.options.connections} "
                    f"within {self.options.pool_wait_s:g} s: the pool is too small for this "
                    "load (raise the URL's ?connections=)"
                ) from exc
            raise StoreUnavailableError(f"{type(exc).__name__}: {exc}") from exc

    def _key(self, kind: str, key: str) -> str:
        return f"{self.options.prefix}{kind}:{key}"

    async def _script(self, name: str, keys: list[str], args: list[Any]) -> int:
        return int(await self._call(lambda _: self._scripts[name](keys=keys, args=args)))

    # ---------------------------------------------------------------- leases and state

    async def acquire(self, key: str) -> Lease | None:
        token = secrets.token_hex(16)
        keys = [self._key("lock", key), self._key("state", key)]
        args = [token, self.options.lease_ms]
        deadline = time.monotonic() + self.options.wait_s
        pause = _FIRST_WAIT_S
        while True:
            version = await self._script("acquire", keys, args)
            if version >= 0:
                return Lease(key, token, version)
            if time.monotonic() + pause > deadline:
                return None
            await asyncio.sleep(pause)
            pause = min(pause * 2, _LONGEST_WAIT_S)

    async def version(self, key: str) -> int:
        raw = await self._call(lambda c: c.hget(self._key("state", key), "v"))
        return int(raw or 0)

    async def renew(self, lease: Lease) -> bool:
        keys = [self._key("lock", lease.key)]
        return await self._script("renew", keys, [lease.token, self.options.lease_ms]) == 1

    async def release(self, lease: Lease) -> None:
        await self._script("release", [self._key("lock", lease.key)], [lease.token])

    async def load(self, key: str) -> SavedState | None:
        version, data = await self._call(lambda c: c.hmget(self._key("state", key), "v", "d"))
        if version is None or data is None:
            return None
        return SavedState(int(version), bytes(data))

    async def save(self, lease: Lease, data: bytes | None) -> int | None:
        keys = [self._key("lock", lease.key), self._key("state", lease.key)]
        args: list[Any] = [lease.token, self.options.idle_ms, lease.version]
        if data is not None:
            args.append(data)
        version = await self._script("save", keys, args)
        return None if version < 0 else version

    # ---------------------------------------------------------------- figures

    async def count(
        self, figures: Mapping[str, int], conversation: str, details: Mapping[str, str]
    ) -> None:
        now = time.time()

        async def work(client: Any) -> None:
            pipe = client.pipeline(transaction=False)
            totals = self._key("totals", "all")
            for name, value in figures.items():
                pipe.hincrby(totals, name, value)
            if conversation:
                own = self._key("fig", conversation)
                for name, value in figures.items():
                    pipe.hincrby(own, name, value)
                pipe.hsetnx(own, "created", now)
                pipe.hset(own, mapping={**details, "key": conversation, "last_seen": now})
                pipe.pexpire(own, self.options.idle_ms)
                recent = self._key("recent", "all")
                pipe.zadd(recent, {conversation: now})
                pipe.zremrangebyscore(recent, "-inf", now - self.options.idle_s)
                pipe.zremrangebyrank(recent, 0, -_RECENT_LIMIT - 1)
            await pipe.execute()

        await self._call(work)

    async def totals(self) -> dict[str, int]:
        async def work(client: Any) -> tuple[dict[bytes, bytes], int]:
            pipe = client.pipeline(transaction=False)
            pipe.hgetall(self._key("totals", "all"))
            pipe.zcard(self._key("recent", "all"))
            raw, conversations = await pipe.execute()
            return raw, conversations

        raw, conversations = await self._call(work)
        totals = {name.decode(): int(value) for name, value in raw.items()}
        totals["conversations"] = int(conversations)
        return totals

    async def recent(self, limit: int) -> list[dict[str, Any]]:
        async def work(client: Any) -> list[dict[bytes, bytes]]:
            keys = await client.zrevrange(self._key("recent", "all"), 0, limit - 1)
            pipe = client.pipeline(transaction=False)
            for key in keys:
                pipe.hgetall(self._key("fig", key.decode()))
            return [row for row in await pipe.execute() if row]

        now = time.time()
        return [_figures_row(row, now) for row in await self._call(work)]

    def open_ledger(self, guard: Any = None) -> Any:
        """The usage ledger in this server, on this store's client."""
        from .redis_ledger import RedisLedger

        return RedisLedger(self, guard=guard)

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _pool_exhausted(exc: BaseException) -> bool:
    """Whether the client gave up waiting for a free connection of its pool (the server may be
    fine: the pool is too small for the load)."""
    from redis.exceptions import ConnectionError as RedisConnectionError

    text = str(exc)
    return isinstance(exc, RedisConnectionError) and (
        "No connection available" in text or "Too many connections" in text
    )


def _figures_row(raw: Mapping[bytes, bytes], now: float) -> dict[str, Any]:
    """One conversation's stored figures in the shape of the in-process status rows."""
    row = {name.decode(): value.decode() for name, value in raw.items()}
    n = {name: int(row.get(name, 0)) for name in _COUNTED}
    saved = n["tokens_before"] - n["tokens_after"]
    decisions = {
        name.split(":", 1)[1]: int(value)
        for name, value in sorted(row.items())
        if name.startswith("decision:")
    }
    target = row.get("context_target", "")
    return {
        "conversation": row.get("key", ""),
        "api": row.get("api", ""),
        "model": row.get("model", ""),
        "requests": n["requests"],
        "rebuilds": n["rebuilds"],
        "decisions": decisions,
        "last_decision": row.get("last_decision", ""),
        "context_target": int(target) if target.isdigit() else None,
        "target_source": row.get("target_source", ""),
        "tokens_sent": n["tokens_after"],
        "tokens_without_tomc": n["tokens_before"],
        "tokens_saved": saved,
        "saved_share": saved / n["tokens_before"] if n["tokens_before"] else 0.0,
        "gateway_errors": n["gateway_errors"],
        "idle_s": round(now - float(row.get("last_seen", now)), 1),
        "age_s": round(now - float(row.get("created", now)), 1),
    }


def open_conversations(url: StoreURL, factory: SessionFactory) -> Any:
    """Conversations in the Redis or Valkey server of ``url``."""
    store = RedisStateStore(url)  # first: names the missing extra before anything else
    from .shared import SharedConversations
    from .state import restore_state, snapshot_state

    return SharedConversations(store, factory, snapshot_state, restore_state)
