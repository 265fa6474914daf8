"""The usage ledger in Redis against a real ``redis-server`` on loopback, with the SQLite ledger
as the oracle: the same entries give the same figures, also when several processes share a
conversation, and a store that is down never fails or blocks the recording."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway_helpers import LEDGER_T0 as T0
from gateway_helpers import ledger_entry as entry
from redis_server import RedisServer
from tomc._gateway.proxy.metering.ledger import TOMC_FAILED, LedgerEntry, UsageLedger
from tomc._gateway.proxy.metering.usage import ANTHROPIC, OPENAI, ProviderUsage
from tomc._gateway.proxy.store import store_url
from tomc._gateway.proxy.store.redis import RedisStateStore
from tomc._gateway.proxy.store.redis_ledger import RedisLedger

#: What is by nature each kind's own (where the figures are kept, what this process dropped).
PER_BACKEND = ("ledger", "persistent", "shared", "dropped", "problem")


def oracle(entries: Sequence[LedgerEntry], limit: int = 20) -> dict[str, Any]:
    """The SQLite ledger's figures of ``entries`` (in memory)."""
    ledger = UsageLedger()
    for one in entries:
        ledger.record(one)
    assert ledger.flush(10)
    return comparable(ledger.traffic(limit=limit))


def comparable(traffic: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in traffic.items() if name not in PER_BACKEND}


def assert_same(actual: Any, expected: Any, where: str = "traffic") -> None:
    """Equal, floats within the last rounded digit (Redis sums floats in long double)."""
    if isinstance(expected, dict):
        assert isinstance(actual, dict) and actual.keys() == expected.keys(), where
        for name in expected:
            assert_same(actual[name], expected[name], f"{where}.{name}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), where
        for n, (a, e) in enumerate(zip(actual, expected, strict=True)):
            assert_same(a, e, f"{where}[{n}]")
    elif isinstance(expected, float) and not isinstance(actual, bool):
        assert actual == pytest.approx(expected, abs=0.11), where
    else:
        assert actual == expected, where


def in_redis(
    url: str, work: Callable[[list[RedisLedger]], Awaitable[Any]], processes: int = 1
) -> Any:
    """Run ``work`` with ``processes`` ledgers, each on its own store client ("process")."""

    async def main() -> Any:
        stores = [RedisStateStore(store_url(url)) for _ in range(processes)]
        try:
            return await work([store.open_ledger() for store in stores])
        finally:
            for store in stores:
                await store.close()

    return asyncio.run(main())


def feed(entries: Sequence[LedgerEntry], limit: int = 20) -> Callable[..., Awaitable[Any]]:
    """Record ``entries`` round robin over the ledgers, each awaited as the gateway does before
    the conversation's lease goes; then read from the first."""

    async def work(ledgers: list[RedisLedger]) -> dict[str, Any]:
        for n, one in enumerate(entries):
            ledger = ledgers[n % len(ledgers)]
            ledger.record(one)
            await ledger.written(one.conversation)
        traffic = await ledgers[0].read(limit)
        assert traffic is not None
        assert all(ledger.dropped == 0 for ledger in ledgers)
        return traffic

    return work


def growing_conversation(key: str = "claude:one|claude-opus-4-8") -> list[LedgerEntry]:
    """A conversation that TOMC rewrites from its third request on, reading back the cache,
    one request a minute: each direct estimate depends on the one before."""
    entries = []
    for n in range(8):
        prompt = 10_000 + 4_000 * n
        rewritten = n >= 2
        sent = prompt // 2 if rewritten else prompt
        usage = ProviderUsage(
            ANTHROPIC, sent, cache_read_tokens=sent - 1_000, cache_write_tokens=1_000,
            output_tokens=200,
        )  # fmt: skip
        entries.append(
            entry(
                at=T0 + 60 * n, conversation=key, action="reused" if rewritten else "passthrough",
                code="reused" if rewritten else "fits", tokens_before=prompt, tokens_after=sent,
                usage=usage, context_target=20_000,
            )
        )  # fmt: skip
    return entries


# ---------------------------------------------------------------------- against the oracle


def test_the_figures_match_the_sqlite_ledger_for_the_same_entries(redis_url):
    entries = [
        *growing_conversation(),
        entry(api="", conversation="", status=404, usage=None, at=T0 + 10),  # a bad path
        entry(
            status=429,
            usage=None,
            action=None,
            code=None,
            tokens_before=0,
            tokens_after=0,
            at=T0 + 500,
        ),
        entry(
            api="chat",
            conversation="chat:dev|gpt-4o",
            model="gpt-4o",
            at=T0 + 30,
            usage=ProviderUsage(OPENAI, 3000, cache_read_tokens=2048, output_tokens=9),
            context_target=None,
        ),
    ]
    traffic = in_redis(redis_url, feed(entries))
    expected = oracle(entries)
    assert expected["totals"]["billed_saved"] > 0  # the scenario exercises the estimate
    assert expected["totals"]["upstream_errors"] == {"404": 1, "429": 1}
    assert_same(comparable(traffic), expected)
    assert traffic["shared"] and traffic["ledger"].startswith("the session store redis://")


def test_the_direct_estimate_follows_the_conversation_across_processes(redis_url):
    """Two processes serve alternate requests of one conversation: each estimate must start
    from the previous one, served by the other process."""
    entries = growing_conversation()
    traffic = in_redis(redis_url, feed(entries), processes=2)
    expected = oracle(entries)
    ((row,),) = (traffic["conversations"],)
    assert row["direct_input"] == pytest.approx(expected["totals"]["direct_input"], abs=0.11)
    assert row["billed_input"] == pytest.approx(expected["totals"]["billed_input"], abs=0.11)
    # Without the previous prompt every estimate would count the whole prompt as written:
    alone = oracle([entries[0], entries[3]])  # a request whose predecessor is missing
    paired = oracle(entries[2:4])
    assert alone["totals"]["direct_input"] != paired["totals"]["direct_input"]
    assert_same(comparable(traffic), expected)


def test_rows_are_limited_latest_first_and_the_totals_count_every_conversation(redis_url):
    entries = [entry(conversation=f"c{n}", at=T0 + n, context_target=1000 + n) for n in range(6)]
    traffic = in_redis(redis_url, feed(entries, limit=3))
    assert [c["conversation"] for c in traffic["conversations"]] == ["c5", "c4", "c3"]
    assert traffic["totals"]["conversations"] == 6
    assert_same(comparable(traffic), oracle(entries, limit=3))


#: The gateway's own errors an entry may carry: none, TOMC failed (the upstream answered), or
#: the gateway answered itself.
_GATEWAY_ERRORS = ("", "", "", TOMC_FAILED, "unreachable", "closed", "timeout", "internal")


@st.composite
def entry_sequences(draw: st.DrawFn) -> list[LedgerEntry]:
    """Requests of a few conversations in three formats, strictly later one after another
    (sometimes past the cache's lifetime), some refused upstream, some rewritten, some the
    gateway's own errors (TOMC failing, or no upstream answer at all)."""
    at = T0
    entries = []
    for _ in range(draw(st.integers(1, 14))):
        at += draw(st.sampled_from([1, 7, 61, 301, 900]))
        api = draw(st.sampled_from(["messages", "chat", "responses", ""]))
        status = draw(st.sampled_from([200, 200, 200, 429, 500]))
        failed = draw(st.sampled_from(_GATEWAY_ERRORS))
        answered = failed in ("", TOMC_FAILED)  # else the gateway answered itself
        if not answered:
            status = 504 if failed == "timeout" else 502
        if api == "":
            status = max(status, 404)
            entries.append(
                LedgerEntry(at=at, api="", conversation="", status=status, gateway_error=failed)
            )
            continue
        before = draw(st.integers(1, 60_000))
        action = draw(st.sampled_from([None, "passthrough", "compiled", "reused"]))
        if failed == TOMC_FAILED:
            action = None  # no decision
        after = draw(st.integers(1, before)) if action in ("compiled", "reused") else before
        usage = None
        if status < 400:
            prompt = draw(st.integers(0, 80_000))
            read = draw(st.integers(0, prompt))
            write = draw(st.integers(0, prompt - read))
            billing = ANTHROPIC if api == "messages" else OPENAI
            usage = ProviderUsage(
                billing, prompt, read, write if billing == ANTHROPIC else 0,
                draw(st.none() | st.integers(0, 999)), draw(st.none() | st.integers(0, 3)),
            )  # fmt: skip
        entries.append(
            LedgerEntry(
                at=at, api=api, conversation=draw(st.sampled_from(["a", "b", "c", ""])),
                status=status, model=draw(st.sampled_from(["", "m1", "m2"])), action=action,
                code=action, tokens_before=before if action else 0,
                tokens_after=after if action else 0, usage=usage,
                context_target=draw(st.none() | st.integers(1000, 200_000)),
                gateway_error=failed,
            )
        )  # fmt: skip
    return entries


@given(entries=entry_sequences(), processes=st.integers(1, 3))
def test_any_sequence_of_entries_gives_the_figures_of_the_sqlite_ledger(
    redis_server: RedisServer, entries: list[LedgerEntry], processes: int
):
    url = f"{redis_server.url}?prefix=prop-{uuid.uuid4().hex[:12]}:"
    traffic = in_redis(url, feed(entries), processes=processes)
    assert_same(comparable(traffic), oracle(entries))


def test_gateway_errors_and_requests_outside_a_conversation_match_the_sqlite_ledger(redis_url):
    key = "claude:one|claude-opus-4-8"
    entries = [
        entry(conversation=key),
        LedgerEntry.of_gateway_error("messages", key, 502, "unreachable", "claude-opus-4-8"),
        LedgerEntry.of_gateway_error("messages", key, 502, "closed"),
        LedgerEntry.of_gateway_error("", "", 502, "unreachable"),  # a path only forwarded
        LedgerEntry.of_gateway_error("chat", "", 502, "internal"),
        # A body TOMC could not read: counted in the totals, in no conversation.
        entry(conversation="", at=T0 + 5, action=None, code=None, tokens_before=0,
              tokens_after=0),
        entry(conversation="", at=T0 + 6, status=400, usage=None, action=None, code=None),
    ]  # fmt: skip
    traffic = in_redis(redis_url, feed(entries))
    expected = oracle(entries)
    totals = expected["totals"]
    assert totals["gateway_errors"] == 4
    assert totals["gateway_error_kinds"] == {"closed": 1, "internal": 1, "unreachable": 2}
    assert totals["upstream_errors"] == {"400": 1}  # the gateway's 502s are not the upstream's
    assert (totals["requests"], totals["conversations"]) == (6, 1)
    (row,) = expected["conversations"]
    assert row["conversation"] == key and row["gateway_errors"] == 2 and row["requests"] == 3
    assert_same(comparable(traffic), expected)


# ---------------------------------------------------------------------- failing open


def test_a_store_that_is_down_drops_the_figures_and_says_they_are_unavailable(tmp_path, caplog):
    server = RedisServer(tmp_path / "redis")  # a free port, never started: nothing answers
    url = f"{server.url}?timeout_s=0.5"

    async def work(ledgers: list[RedisLedger]) -> tuple[float, float, Any]:
        (ledger,) = ledgers
        started = time.monotonic()
        for n in range(50):
            ledger.record(entry(at=T0 + n))  # never raises; returns at once
        recorded = time.monotonic() - started
        await ledger.written(entry().conversation)
        waited = time.monotonic() - started
        return recorded, waited, (await ledger.read(20), ledger.dropped, ledger.guard.down)

    recorded, waited, (traffic, dropped, down) = in_redis(url, work)
    assert recorded < 0.5 and waited < 5
    assert traffic is None  # unavailable, not zeros
    assert dropped == 50 and down
    outages = [r for r in caplog.records if "usage figures are dropped" in r.getMessage()]
    assert len(outages) == 1  # one log line for the outage, not one per entry


def test_figures_are_recorded_again_once_the_store_answers(tmp_path):
    server = RedisServer(tmp_path / "redis")
    url = f"{server.url}?timeout_s=0.5"

    async def work(ledgers: list[RedisLedger]) -> dict[str, Any] | None:
        (ledger,) = ledgers
        ledger.record(entry(conversation="lost"))
        await ledger.written("lost")
        assert ledger.guard.down and ledger.dropped == 1
        server.start()
        try:
            await asyncio.sleep(1.1)  # the store is tried again a second after a failure
            ledger.record(entry(conversation="kept"))
            await ledger.written("kept")
            return await ledger.read(20)
        finally:
            server.stop()

    traffic = in_redis(url, work)
    assert traffic is not None
    assert [c["conversation"] for c in traffic["conversations"]] == ["kept"]
    assert traffic["dropped"] == 1 and traffic["totals"]["requests"] == 1
