"""The Redis store against a real ``redis-server`` on loopback: leases, versioned state, idle
expiry, summed figures, and failing open while the server is down."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
import redis

from redis_server import RedisServer
from tomc._gateway.proxy.store import store_url
from tomc._gateway.proxy.store.redis import RedisStateStore
from tomc._gateway.proxy.store.shared import SharedConversations
from tomc._gateway.proxy.store.state import restore_state, snapshot_state
from tomc.chat import AutomaticChatSession


def run(work: Callable[[RedisStateStore], Awaitable[Any]], url: str) -> Any:
    async def main() -> Any:
        store = RedisStateStore(store_url(url))
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(main())


def test_a_lease_is_exclusive_until_released_and_only_its_holder_frees_it(redis_url):
    async def work(store: RedisStateStore) -> None:
        first = await store.acquire("c1")
        assert first is not None and first.version == 0
        started = time.monotonic()
        assert await store.acquire("c1") is None  # held: waited wait_s, then gave up
        assert 0.2 <= time.monotonic() - started < 2.0
        assert await store.acquire("c2") is not None  # other conversations are free
        impostor = type(first)("c1", "not-the-token", 0)
        await store.release(impostor)  # compare-and-delete: not the holder, nothing freed
        assert not await store.renew(impostor)
        assert await store.acquire("c1") is None
        await store.release(first)
        assert await store.acquire("c1") is not None

    run(work, redis_url + "&wait_s=0.3")


def test_saving_bumps_the_version_releases_and_needs_the_lease(redis_url):
    async def work(store: RedisStateStore) -> None:
        lease = await store.acquire("c")
        assert await store.save(lease, b"state one") == 1
        assert await store.load("c") == type(await store.load("c"))(1, b"state one")
        again = await store.acquire("c")  # released by the save
        assert again.version == 1
        assert await store.save(lease, b"stale writer") is None  # an old lease writes nothing
        assert await store.save(again, b"state two") == 2
        assert (await store.load("c")).data == b"state two"
        unchanged = await store.acquire("c")
        assert await store.save(unchanged, None) == 2  # nothing new: released, same version
        assert await store.version("c") == 2 and await store.load("missing") is None

    run(work, redis_url)


def test_an_expired_lease_can_be_taken_over_and_then_the_old_holder_cannot_save(redis_url):
    async def work(store: RedisStateStore) -> None:
        slow = await store.acquire("c")
        await asyncio.sleep(0.35)  # lease_s=0.3 ran out without renewal
        fast = await store.acquire("c")
        assert fast is not None
        assert await store.save(fast, b"fast") == 1
        assert await store.save(slow, b"slow") is None
        assert (await store.load("c")).data == b"fast"
        # Expired and nobody saved since: the late holder's save is still the next version.
        late = await store.acquire("c")
        await asyncio.sleep(0.35)
        assert await store.save(late, b"late") == 2

    run(work, redis_url + "&lease_s=0.3&wait_s=0")


def test_renewal_keeps_a_long_request_s_lease(redis_url):
    async def work(store: RedisStateStore) -> None:
        lease = await store.acquire("c")
        for _ in range(4):
            await asyncio.sleep(0.15)
            assert await store.renew(lease)
        assert await store.acquire("c") is None  # 0.6 s later, still held
        assert await store.save(lease, b"x") == 1

    run(work, redis_url + "&lease_s=0.3&wait_s=0")


def test_idle_state_expires_in_the_store(redis_server, redis_url):
    async def work(store: RedisStateStore) -> None:
        lease = await store.acquire("c")
        await store.save(lease, b"x")
        await store.count({"requests": 1}, "c", {"api": "chat"})

    run(work, redis_url + "&lease_s=1&idle_s=1")
    prefix = redis_url.split("prefix=")[1]
    client = redis.Redis(port=redis_server.port)
    ttls = {key.decode(): client.pttl(key) for key in client.keys(prefix + "*")}
    assert 0 < ttls[f"{prefix}state:c"] <= 1000 and 0 < ttls[f"{prefix}fig:c"] <= 1000
    time.sleep(1.2)
    assert client.exists(f"{prefix}state:c", f"{prefix}fig:c") == 0


def test_figures_are_summed_over_processes(redis_url):
    async def work(store: RedisStateStore) -> tuple[dict, list]:
        await store.count(Counter(requests=1, tokens_before=900, tokens_after=300), "a", {})
        other = RedisStateStore(store_url(redis_url))  # another process's client
        await other.count(
            Counter({"requests": 2, "tokens_before": 100, "decision:fits": 2}),
            "b",
            {"api": "chat", "model": "gpt-4o"},
        )
        await other.count(Counter(passthrough_paths=3), "", {})
        await other.close()
        return await store.totals(), await store.recent(10)

    totals, recent = run(work, redis_url)
    assert totals == {
        "requests": 3,
        "tokens_before": 1000,
        "tokens_after": 300,
        "decision:fits": 2,
        "passthrough_paths": 3,
        "conversations": 2,
    }
    assert [r["conversation"] for r in recent] == ["b", "a"]
    assert recent[0]["decisions"] == {"fits": 2} and recent[0]["model"] == "gpt-4o"
    assert recent[1]["tokens_saved"] == 600 and recent[1]["saved_share"] == 600 / 900


def _codec() -> tuple[Any, Any]:
    return snapshot_state, restore_state


def _set_rebuilds(session: AutomaticChatSession, rebuilds: int) -> None:
    session.state = replace(session.state, rebuilds=rebuilds)


def test_shared_conversations_carry_state_between_processes_and_cache_by_version(redis_url):
    async def work(_: RedisStateStore) -> None:
        one, two = (
            SharedConversations(
                RedisStateStore(store_url(redis_url)), AutomaticChatSession, *_codec()
            )
            for _ in range(2)
        )
        first = await one.checkout("k", "chat")
        session = first.conversation.session
        _set_rebuilds(session, 1)
        await first.finish()
        second = await two.checkout("k", "chat")  # another process: loads version 1
        assert second.conversation.session.rebuilds == 1
        _set_rebuilds(second.conversation.session, 2)
        await second.finish()
        # Its cached copy is stale: the newer state is loaded into it (its item counts kept).
        third = await one.checkout("k", "chat")
        assert third.conversation.session.rebuilds == 2 and one.cache.misses == 1
        assert third.conversation.session is session
        await third.finish()
        fourth = await one.checkout("k", "chat")  # nothing saved elsewhere: the cached object
        assert fourth.conversation.session is session
        await fourth.finish()
        status = await two.status()
        assert status["conversations"][0]["rebuilds"] == 2
        assert status["session_store"]["available"]
        await one.close()
        await two.close()

    run(work, redis_url)


def test_a_store_that_goes_down_is_passed_through_then_used_again(tmp_path, caplog):
    server = RedisServer(tmp_path / "redis").start()
    try:
        shared = SharedConversations(
            RedisStateStore(store_url(server.url + "?timeout_s=0.5")),
            AutomaticChatSession,
            *_codec(),
        )
        shared.guard._retry_s = 0.2

        async def work() -> None:
            checkout = await shared.checkout("k", "chat")
            assert checkout.conversation is not None
            await checkout.finish()
            server.stop()
            down = await shared.checkout("k", "chat")
            assert down.conversation is None  # passes through unchanged
            again = await shared.checkout("k", "chat")
            assert again.conversation is None  # within the pause: not even tried
            server.start()  # same port, empty: the conversation starts over
            await asyncio.sleep(0.25)
            back = await shared.checkout("k", "chat")
            assert back.conversation is not None
            await back.finish()
            await shared.close()

        with caplog.at_level("WARNING", logger="tomc.gateway"):
            asyncio.run(work())
    finally:
        server.stop()
    lines = [r.getMessage() for r in caplog.records if "session store" in r.getMessage()]
    assert len(lines) == 2, lines
    assert "unavailable" in lines[0] and "answers again" in lines[1]
    assert shared.guard.outages == 1 and shared.guard.passed_through == 2


def test_an_unreadable_saved_state_starts_the_conversation_over(redis_url, caplog):
    async def work(store: RedisStateStore) -> None:
        lease = await store.acquire("k")
        await store.save(lease, b'{"version": 999}')  # another TOMC's layout
        shared = SharedConversations(store, AutomaticChatSession, *_codec())
        with caplog.at_level("WARNING", logger="tomc.gateway"):
            checkout = await shared.checkout("k", "chat")
        assert checkout.conversation is not None
        assert checkout.conversation.session.state.requests == 0
        await checkout.finish()  # the fresh state replaces the unreadable one
        assert (await store.load("k")).version == 2

    run(work, redis_url)
    assert "saved state not loaded (SessionStateError" in caplog.text


def test_the_lease_is_kept_while_a_slow_snapshot_is_saved(redis_url):
    """A snapshot slower than the lease (a big memory on a busy machine): the lease is renewed
    until the save, so another process waits for the new state instead of preparing the next
    request from the previous one."""
    url = redis_url + "&lease_s=0.6&wait_s=5"

    def slow_snapshot(session: AutomaticChatSession) -> bytes:
        time.sleep(1.5)
        return snapshot_state(session)

    async def work(_: RedisStateStore) -> None:
        one = SharedConversations(
            RedisStateStore(store_url(url)), AutomaticChatSession, slow_snapshot, restore_state
        )
        two = SharedConversations(RedisStateStore(store_url(url)), AutomaticChatSession, *_codec())
        first = await one.checkout("k", "chat")
        _set_rebuilds(first.conversation.session, 3)
        saving = asyncio.ensure_future(first.finish())
        await asyncio.sleep(0.1)  # the snapshot has started; the lease would lapse at 0.6 s
        second = await two.checkout("k", "chat")  # waits for the lease, then loads version 1
        await saving
        assert second.conversation.session.rebuilds == 3
        await second.finish()
        assert (await two.store.load("k")).version == 2
        await one.close()
        await two.close()

    run(work, url)


# ---------------------------------------------------------------------- the connection pool


def _store_clients(url: str) -> int:
    """Connections the gateway's clients hold open to the server now."""
    with redis.Redis.from_url(url.split("?", 1)[0]) as admin:
        return sum(c.get("name") == "tomc-gateway" for c in admin.client_list())


@pytest.mark.parametrize("options", ["&connections=4", ""], ids=["pool-of-4", "default-pool"])
def test_a_burst_of_requests_beyond_the_pool_waits_for_connections_and_never_fails_open(
    redis_url, caplog, options
):
    """The team benchmark's burst: 200 requests of 200 conversations at once on one process,
    each leasing its conversation, saving it and counting its figures. A pool smaller than
    the burst makes commands wait for a connection; none fails, so no request passes through."""
    url = redis_url + options
    before = _store_clients(url)

    async def work(store: RedisStateStore) -> tuple[list[bool], int, dict[str, Any]]:
        shared = SharedConversations(store, AutomaticChatSession, *_codec())

        async def request(n: int) -> bool:
            checkout = await shared.checkout(f"burst-{n}", "chat")
            leased = checkout.conversation is not None
            if checkout.conversation is not None:
                checkout.conversation.requests += 1
            await checkout.finish()
            return leased

        try:
            with caplog.at_level("WARNING", logger="tomc.gateway"):
                leased = await asyncio.gather(*(request(n) for n in range(200)))
            opened = _store_clients(url) - before
            status = await shared.status()
        finally:
            await shared.close()
        assert shared.store.pool_exhausted == 0
        return leased, opened, status

    leased, opened, status = run(work, url)
    assert all(leased)  # every request prepared: nothing passed through
    assert status["session_store"]["outages"] == 0 and status["requests"] == 200
    assert opened <= (4 if options else 64)  # the pool's size bounds the connections
    assert "Too many connections" not in caplog.text and "unavailable" not in caplog.text


def test_a_pool_too_small_for_the_load_says_so_once_and_fails_open(redis_url, caplog):
    """One connection, held by two slow commands in turn (3 s) while requests wait for it at
    most 2 s: they pass through unchanged, and one log line says the pool is too small."""
    url = redis_url + "&connections=1&wait_s=0&timeout_s=2"

    async def work(store: RedisStateStore) -> list[bool]:
        shared = SharedConversations(store, AutomaticChatSession, *_codec())
        slow = [
            asyncio.ensure_future(store._call(lambda c: c.blpop(["tomc-test-nothing"], 1.5)))
            for _ in range(2)
        ]
        await asyncio.sleep(0.1)  # both hold or wait for the only connection first
        with caplog.at_level("WARNING", logger="tomc.gateway"):
            checkouts = await asyncio.gather(*(shared.checkout(f"k{n}", "chat") for n in range(5)))
        await asyncio.gather(*slow)
        assert store.pool_exhausted == 5
        return [checkout.conversation is None for checkout in checkouts]

    assert all(run(work, url))  # passed through unchanged
    lines = [r.getMessage() for r in caplog.records if "session store" in r.getMessage()]
    assert len(lines) == 1, lines  # one line for the outage, not one per request
    assert "the pool is too small for this load" in lines[0] and "connections=" in lines[0]
    assert "Too many connections" not in caplog.text
