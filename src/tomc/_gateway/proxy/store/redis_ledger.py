"""The usage ledger in Redis or Valkey, for gateways that share a session store.

The same figures as the SQLite ledger (:mod:`tomc._gateway.proxy.metering.ledger`), summed
over every process of a team, so any replica's status shows the team's billed input, its direct
estimate, the chart and the upstream errors. Keys, under the store's ``prefix``:

- ``ledger:<conversation>``: a hash of the conversation's sums, its upstream errors
  (``error:<status>``), the gateway's own errors (``gateway_error:<kind>``) and what the next
  direct estimate needs (``last_direct_prompt``, ``last_direct_at``, ``caching_seen``); it
  expires with the store's idle expiry, as the conversation's state does;
- ``ledger-recent:all``: the conversations by their latest request, pruned by the idle expiry
  and to 10,000 entries, as the store's own ``recent`` listing;
- ``ledger-totals:all``: the sums over every conversation ever recorded and over the requests
  outside any conversation, the upstream and the gateway's own errors, the number of
  conversations, the first and the latest request's time;
- ``ledger-minutes:all`` (``r:``, ``b:``, ``d:`` + minute: requests, billed and direct input)
  and ``ledger-minute-index:all``: the chart's series; past 30 days of busy minutes the oldest
  are folded into a base (``r:base``...), so the series stays bounded.

A request's direct estimate depends on its conversation's previous one, wherever it was served.
Estimating is Python (:func:`~tomc._gateway.proxy.metering.ledger.bill`), so an entry is two
round trips: read the previous billing fields, then one script adds everything. The gateway awaits
:meth:`RedisLedger.written` before the conversation's lease is released, and the lease
serializes a conversation's requests, so no other process reads those fields in between (a
request prepared without the lease, after ``wait_s`` ran out, may race; its estimate is then
off by one request).

Failing open: recording runs in a task after the answer; when the store does not answer the
entry is dropped (counted, and logged once per outage) and the store is tried again a second
later. Reading raises, and the status page says the figures could not be read.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..metering.ledger import Billing, LedgerEntry, bill, entry_sums
from ..metering.traffic import SUMS, errors_of, figures, gateway_errors_of, series_of
from .base import StoreUnavailableError
from .shared import OutageGuard

if TYPE_CHECKING:  # made by the store itself (RedisStateStore.open_ledger)
    from .redis import RedisStateStore

__all__ = ["RedisLedger"]

logger = logging.getLogger("tomc.gateway")

#: Entries being written at once at most; past it new ones are dropped (Redis too slow).
_PENDING_LIMIT = 10_000
#: Conversations listed in ``ledger-recent`` at most (the oldest go first).
_RECENT_LIMIT = 10_000
#: Minutes kept one by one in the chart's series (30 days of a busy team).
_MINUTES_LIMIT = 30 * 24 * 60
_FLOATS = ("billed_input", "direct_input")

# KEYS: conversation, totals, recent, minutes, minute index. ARGV: see RedisLedger._args.
# Values are added as the strings Python formatted (exact floats); Lua numbers only compare.
# A request outside any conversation (ARGV[1] empty) counts in the totals only, as the SQLite
# ledger's row keyed "" does: its first time is the totals' ``outside_first_at``.
_RECORD = """
local conv, totals, recent, minutes, index = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local named = ARGV[1] ~= ''
local idle_ms = ARGV[22]
local function add(field, value)
  redis.call('HINCRBY', totals, field, value)
  if named then
    redis.call('HINCRBY', conv, field, value)
  end
end
local function add_float(field, value)
  redis.call('HINCRBYFLOAT', totals, field, value)
  if named then
    redis.call('HINCRBYFLOAT', conv, field, value)
  end
end
if tonumber(ARGV[3]) >= 400 then
  add('error:' .. ARGV[3], 1)
end
if ARGV[27] ~= '' then
  add('gateway_error:' .. ARGV[27], 1)
end
if named then
  redis.call('PEXPIRE', conv, idle_ms)
end
if ARGV[4] == '' then
  return 0
end
local at = tonumber(ARGV[2])
local first
if named then
  first = redis.call('HSETNX', conv, 'first_at', ARGV[2]) == 1
  if first then
    redis.call('HSET', conv, 'api', ARGV[4], 'key', ARGV[1])
    redis.call('HINCRBY', totals, 'conversations', 1)
  end
else
  first = redis.call('HSETNX', totals, 'outside_first_at', ARGV[2]) == 1
end
if first then
  local since = tonumber(redis.call('HGET', totals, 'since') or '')
  if since == nil or at < since then
    redis.call('HSET', totals, 'since', ARGV[2])
  end
end
if named then
  local last = tonumber(redis.call('HGET', conv, 'last_at') or '')
  if last == nil or at > last then
    redis.call('HSET', conv, 'last_at', ARGV[2])
  end
  redis.call('ZADD', recent, redis.call('HGET', conv, 'last_at'), ARGV[1])
  if ARGV[5] ~= '' then
    redis.call('HSET', conv, 'model', ARGV[5])
  end
  if ARGV[21] ~= '' then
    redis.call('HSET', conv, 'context_target', ARGV[21])
  end
end
local all_last = tonumber(redis.call('HGET', totals, 'last') or '')
if all_last == nil or at > all_last then
  redis.call('HSET', totals, 'last', ARGV[2])
end
local counts = {requests = '1', rewritten = ARGV[6], tokens_before = ARGV[7],
  tokens_after = ARGV[8], with_usage = ARGV[9], prompt_tokens = ARGV[10],
  cache_read_tokens = ARGV[11], cache_write_tokens = ARGV[12], output_tokens = ARGV[13],
  thinking_dropped = ARGV[17]}
for name, value in pairs(counts) do
  add(name, value)
end
local amounts = {billed_input = ARGV[14], direct_input = ARGV[15], direct_prompt = ARGV[16]}
for name, value in pairs(amounts) do
  add_float(name, value)
end
if named then
  redis.call('PEXPIRE', conv, idle_ms)
end
redis.call('ZREMRANGEBYSCORE', recent, '-inf', at - tonumber(ARGV[23]))
redis.call('ZREMRANGEBYRANK', recent, 0, -tonumber(ARGV[24]) - 1)
if ARGV[9] ~= '1' then
  return 1
end
if named then
  redis.call('HSET', conv, 'last_direct_prompt', ARGV[18], 'last_direct_at', ARGV[19],
    'caching_seen', ARGV[20])
end
local m = ARGV[25]
redis.call('HINCRBY', minutes, 'r:' .. m, 1)
redis.call('HINCRBYFLOAT', minutes, 'b:' .. m, ARGV[14])
redis.call('HINCRBYFLOAT', minutes, 'd:' .. m, ARGV[15])
if redis.call('ZADD', index, 'NX', m, m) == 1 then
  while redis.call('ZCARD', index) > tonumber(ARGV[26]) do
    local oldest = redis.call('ZPOPMIN', index)[1]
    for _, kind in ipairs({'r', 'b', 'd'}) do
      local value = redis.call('HGET', minutes, kind .. ':' .. oldest)
      if value then
        redis.call('HINCRBYFLOAT', minutes, kind .. ':base', value)
        redis.call('HDEL', minutes, kind .. ':' .. oldest)
      end
    end
  end
end
return 1
"""


class RedisLedger:
    """A :class:`~tomc._gateway.proxy.metering.ledger.Ledger` in the Redis or Valkey server of a
    :class:`~tomc._gateway.proxy.store.redis.RedisStateStore`, on that store's client."""

    shared = True

    def __init__(self, store: RedisStateStore, *, guard: OutageGuard | None = None) -> None:
        self.store = store
        self.dropped = 0  # entries this process could not store
        # The conversations' guard when there are conversations: one outage, one log line.
        self.guard = guard or OutageGuard(
            store.url.shown,
            effect="usage figures are dropped until it answers again",
            recovery="usage figures are recorded again",
        )
        self._script: Any = None
        # The latest entry being written per conversation; a newer one waits for it, so one
        # process stores a conversation's entries in order.
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._in_flight = 0
        # Waiting for a write never takes longer than the store's own timeouts allow.
        self._wait_s = 2 * store.options.timeout_s + 1.0

    def _key(self, kind: str, key: str = "all") -> str:
        return self.store._key(kind, key)

    # ---------------------------------------------------------------- writing

    def record(self, entry: LedgerEntry) -> None:
        """Start storing ``entry`` (a task on the running loop); never raises, never blocks."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._drop("no event loop")
            return
        if self._in_flight >= _PENDING_LIMIT:
            self._drop("too many entries being written")
            return
        key = entry.conversation
        self._in_flight += 1
        task = loop.create_task(self._store(entry, self._pending.get(key)))
        self._pending[key] = task
        task.add_done_callback(lambda done: self._finished(key, done))

    def _finished(self, key: str, task: asyncio.Task[None]) -> None:
        self._in_flight -= 1
        if self._pending.get(key) is task:
            del self._pending[key]

    def _drop(self, why: str) -> None:
        self.dropped += 1
        if self.dropped == 1 or self.dropped % 1000 == 0:
            logger.warning("usage ledger: %d entries dropped (%s)", self.dropped, why)

    async def _store(self, entry: LedgerEntry, previous: asyncio.Task[None] | None) -> None:
        if previous is not None:
            await asyncio.wait({previous}, timeout=self._wait_s)
        if not self.guard.ready(request=False):
            self.dropped += 1  # the outage was logged once when it began
            return
        try:
            await self.store._call(lambda client: self._write(client, entry))
        except StoreUnavailableError as exc:
            self.dropped += 1
            self.guard.failed(exc, request=False)
        except Exception as exc:  # fail open: the figures are lost, the gateway goes on
            self._drop(f"{type(exc).__name__}: {exc}")
        else:
            self.guard.answered()

    async def _write(self, client: Any, entry: LedgerEntry) -> None:
        conversation = self._key("ledger", entry.conversation)
        if entry.api and entry.usage is not None and entry.conversation:
            prompt, at, seen = await client.hmget(
                conversation, "last_direct_prompt", "last_direct_at", "caching_seen"
            )
            billing = bill(entry, _number(prompt), _number(at), seen == b"1")
        else:  # nothing billed: the previous figures stay as they are
            billing = bill(entry, None, None, False)
        if self._script is None:
            self._script = client.register_script(_RECORD)
        keys = [
            conversation,
            self._key("ledger-totals"),
            self._key("ledger-recent"),
            self._key("ledger-minutes"),
            self._key("ledger-minute-index"),
        ]
        await self._script(keys=keys, args=self._args(entry, billing), client=client)

    def _args(self, entry: LedgerEntry, billing: Billing) -> list[Any]:
        options = self.store.options
        return [
            entry.conversation,
            repr(float(entry.at)),
            entry.status if entry.upstream_error else 0,  # counted as the upstream's error
            entry.api,
            entry.model,
            # Floats as the exact text Python gives them (Redis parses, then adds).
            *(repr(float(v)) if isinstance(v, float) else v for v in entry_sums(entry, billing)),
            _text(billing.previous_prompt),
            _text(billing.previous_at),
            int(billing.caching_seen),
            "" if entry.context_target is None else entry.context_target,
            options.idle_ms,
            options.idle_s,
            _RECENT_LIMIT,
            int(entry.at // 60),
            _MINUTES_LIMIT,
            entry.gateway_error,
        ]

    async def written(self, conversation: str) -> None:
        task = self._pending.get(conversation)
        if task is not None:
            await asyncio.wait({task}, timeout=self._wait_s)

    async def _settle(self, timeout_s: float) -> None:
        pending = set(self._pending.values())
        if pending:
            await asyncio.wait(pending, timeout=timeout_s)

    async def aclose(self) -> None:
        """Wait (briefly) for the entries being written; the client is the store's."""
        await self._settle(self._wait_s)

    # ---------------------------------------------------------------- reading

    async def read(self, limit: int) -> dict[str, Any] | None:
        """The team's figures, in the shape of the SQLite ledger's ``traffic()``; ``None``
        when the store does not answer (the status page says they could not be read)."""
        await self._settle(1.0)
        try:
            return await self._read(limit)
        except StoreUnavailableError as exc:
            self.guard.failed(exc, request=False)
            logger.warning("usage ledger not read (%s)", exc)
            return None

    async def _read(self, limit: int) -> dict[str, Any]:

        async def work(client: Any) -> tuple[Any, list[Any], Any]:
            pipe = client.pipeline(transaction=False)
            pipe.hgetall(self._key("ledger-totals"))
            pipe.zrevrange(self._key("ledger-recent"), 0, max(0, limit) - 1)
            pipe.hgetall(self._key("ledger-minutes"))
            totals, keys, minutes = await pipe.execute()
            rows: list[Any] = []
            keys = [key for key in keys if key]  # "": outside any conversation, never listed
            if keys and limit > 0:
                pipe = client.pipeline(transaction=False)
                for key in keys:
                    pipe.hgetall(self._key("ledger", key.decode()))
                rows = [row for row in await pipe.execute() if row]
            return totals, rows, minutes

        raw_totals, raw_rows, raw_minutes = await self.store._call(work)
        totals = _decoded(raw_totals)
        data = {
            "since": _number(totals.get("since")),
            "last": _number(totals.get("last")),
            "totals": {
                **figures(_sums(totals), _errors(totals), _gateway_errors(totals)),
                "conversations": int(totals.get("conversations", 0)),
            },
            "conversations": [_conversation(_decoded(row)) for row in raw_rows],
            "series": _series(_decoded(raw_minutes)),
        }
        data["ledger"] = f"the session store {self.store.url.shown}"
        data["persistent"] = True
        data["shared"] = True
        data["dropped"] = self.dropped
        return data


def _number(raw: bytes | str | None) -> float | None:
    return float(raw) if raw not in (None, b"", "") else None


def _text(value: float | None) -> str:
    return "" if value is None else repr(float(value))


def _decoded(raw: Mapping[bytes, bytes]) -> dict[str, str]:
    return {name.decode(): value.decode() for name, value in raw.items()}


def _sums(row: Mapping[str, str]) -> dict[str, float | int]:
    return {
        name: float(row.get(name, 0)) if name in _FLOATS else int(row.get(name, 0)) for name in SUMS
    }


def _errors(row: Mapping[str, str]) -> dict[str, int]:
    """The ``error:<status>`` fields of a hash, as the SQLite ledger shows its error rows."""
    return errors_of((int(n[6:]), int(v)) for n, v in row.items() if n.startswith("error:"))


def _gateway_errors(row: Mapping[str, str]) -> dict[str, int]:
    """The ``gateway_error:<kind>`` fields of a hash, as the SQLite ledger shows them."""
    prefix = "gateway_error:"
    return gateway_errors_of(
        (n[len(prefix) :], int(v)) for n, v in row.items() if n.startswith(prefix)
    )


def _conversation(row: Mapping[str, str]) -> dict[str, Any]:
    target = row.get("context_target", "")
    return {
        "conversation": row.get("key", ""),
        "api": row.get("api", ""),
        "model": row.get("model", ""),
        "first_at": _number(row.get("first_at")),
        "last_at": _number(row.get("last_at")),
        **figures(_sums(row), _errors(row), _gateway_errors(row)),
        "context_target": int(target) if target.lstrip("-").isdigit() else None,
    }


def _series(minutes: Mapping[str, str]) -> list[dict[str, Any]]:
    rows = sorted(
        (int(name[2:]), int(value), float(minutes.get(f"b:{name[2:]}", 0)),
         float(minutes.get(f"d:{name[2:]}", 0)))
        for name, value in minutes.items()
        if name.startswith("r:") and name != "r:base"
    )  # fmt: skip
    base = (
        int(float(minutes.get("r:base", 0))),
        float(minutes.get("b:base", 0)),
        float(minutes.get("d:base", 0)),
    )
    return series_of(rows, base)
