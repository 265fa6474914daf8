"""``--session-store`` values: the kinds found, the URL and its options, the clear errors."""

from __future__ import annotations

import asyncio
import builtins
from functools import partial

import pytest

from tomc._core.errors import GatewayError, InvalidOptionError
from tomc._gateway.proxy.store import open_conversations, store_kinds, store_url
from tomc._gateway.proxy.store.memory import LocalConversations
from tomc._gateway.proxy.store.shared import OutageGuard, VersionCache
from tomc.chat import AutomaticChatSession


def test_each_kind_module_names_its_schemes():
    kinds = store_kinds()
    assert kinds["memory"].__name__.endswith(".memory")
    assert {kinds[s].__name__.rsplit(".", 1)[1] for s in ("redis", "rediss", "valkey")} == {"redis"}


def test_the_default_is_this_process_memory():
    assert store_url(None).scheme == "memory" and store_url("memory").shown == "memory"
    store = open_conversations(None, AutomaticChatSession)
    assert isinstance(store, LocalConversations) and not store.shared


def test_a_redis_url_with_options_and_its_password_hidden():
    url = store_url("redis://user:s3cret@cache.internal:6380/2?lease_s=5&cache=8&prefix=team:")
    assert (url.scheme, url.host, url.port, url.path) == ("redis", "cache.internal", 6380, "/2")
    assert (url.options.lease_s, url.options.cache, url.options.prefix) == (5.0, 8, "team:")
    assert url.options.wait_s == 10.0 and url.options.lease_ms == 5000
    assert "s3cret" not in url.shown and url.shown == "redis://user:***@cache.internal:6380/2"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("postgres://db/1", "unknown kind postgres"),
        ("cache.internal:6379", "unknown kind"),
        ("redis:///0", "names no host"),
        ("redis://h:99999/0", "is not a URL"),
        ("redis://h/0?lease=3", "option 'lease' is unknown"),
        ("redis://h/0?cache=many", "cache='many' is not valid"),
        ("redis://h/0?lease_s=0", "lease_s must be > 0"),
        ("redis://h/0?lease_s=60&idle_s=30", "idle_s must be >= lease_s"),
    ],
)
def test_a_bad_store_url_says_what_is_wrong(text, says):
    with pytest.raises(InvalidOptionError, match=says):
        store_url(text)


def test_without_the_client_the_error_names_the_team_extra(monkeypatch):
    real_import = builtins.__import__

    def no_redis(name, *args, **kwargs):
        if name == "redis" or name.startswith("redis."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_redis)
    with pytest.raises(GatewayError, match=r"tomc\[team\]") as caught:
        open_conversations("redis://127.0.0.1:6379/0", AutomaticChatSession)
    assert "pip install -e" in str(caught.value)


def test_the_version_cache_says_whether_a_session_holds_the_saved_version_and_stays_bounded():
    cache = VersionCache(2)
    one, two, three = (AutomaticChatSession() for _ in range(3))
    cache.put("a", 1, one)
    # Saved since by another process: the older session comes out (its caches still count
    # the items it saw) marked stale, so the caller loads the newer state into it.
    assert cache.take("a", 2) == (one, False)
    assert cache.take("a", 1) == (None, False)  # taken out: nobody else here can use it
    cache.put("a", 3, one)
    cache.put("b", 1, two)
    cache.put("c", 1, three)  # "a" was least recently used
    assert len(cache) == 2 and cache.take("a", 3) == (None, False)
    assert cache.take("c", 1) == (three, True) and len(cache) == 1
    assert (cache.hits, cache.misses) == (1, 3)
    assert len(VersionCache(0)) == 0


def test_an_outage_is_logged_once_and_retried_after_a_pause(caplog):
    now = [100.0]
    guard = OutageGuard("redis://h:6379/0", retry_s=1.0, clock=lambda: now[0])
    assert guard.ready()
    with caplog.at_level("WARNING", logger="tomc.gateway"):
        guard.failed(ConnectionError("refused"))
        assert not guard.ready()  # within the pause: pass through without trying
        now[0] += 1.5
        assert guard.ready()
        guard.failed(ConnectionError("refused"))  # still down: no second line
        now[0] += 1.5
        assert guard.ready()
        guard.answered()
        guard.answered()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "unavailable" in lines[0] and "pass through unchanged" in lines[0]
    assert "answers again after 3.0 s" in lines[1]
    assert guard.outages == 1 and guard.passed_through == 3 and not guard.down


def test_memory_checkout_hands_out_the_live_session():
    store = open_conversations("memory", partial(AutomaticChatSession, min_recent_messages=0))

    async def scenario() -> None:
        first = await store.checkout("k", "chat")
        second = await store.checkout("k", "chat")
        assert first.conversation is second.conversation  # one live object in one process
        await first.finish()
        await first.finish()  # idempotent
        status = await store.status()
        assert [c["conversation"] for c in status["conversations"]] == ["k"]

    asyncio.run(scenario())
