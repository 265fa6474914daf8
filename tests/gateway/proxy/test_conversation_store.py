"""The conversation store: LRU eviction, idle expiry, order, threads, and a state-only store."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import pytest

from dialect_fixtures import claude_code_request, request_tokens
from fake_providers import FakeProvider
from tomc._gateway.proxy.app import Gateway, create_gateway_app, new_session
from tomc._gateway.proxy.conversation import ConversationRecord
from tomc._gateway.proxy.store.memory import MemorySessionStore
from tomc._gateway.settings import GatewaySettings
from tomc._http.server import AppServer
from tomc.chat import AutomaticChatSession, ConversationState


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def store(**options: Any) -> tuple[MemorySessionStore, list[AutomaticChatSession]]:
    """A store whose factory records the sessions it made."""
    made: list[AutomaticChatSession] = []

    def factory() -> AutomaticChatSession:
        made.append(new_session())
        return made[-1]

    return MemorySessionStore(factory, **options), made


def keys(records: list[ConversationRecord]) -> list[str]:
    return [record.key for record in records]


def test_a_conversation_keeps_its_record_and_session():
    sessions, made = store()
    first = sessions.get("a", "chat")
    again = sessions.get("a", "messages")  # the key decides; the api is the first one's
    assert again is first and again.session is made[0] and len(made) == 1
    assert (first.key, first.api) == ("a", "chat")


def test_the_least_recently_used_conversation_goes_first():
    sessions, made = store(max_sessions=2)
    sessions.get("a", "chat")
    sessions.get("b", "chat")
    sessions.get("a", "chat")  # a is now the most recent
    sessions.get("c", "chat")
    assert keys(sessions.conversations()) == ["c", "a"]
    assert sessions.evicted == 1 and len(sessions) == 2
    assert sessions.get("b", "chat").session is made[-1] and len(made) == 4  # b starts anew


def test_conversations_are_listed_most_recent_first():
    sessions, _ = store()
    for key in ("a", "b", "c", "b", "a"):
        sessions.get(key, "chat")
    assert keys(sessions.conversations()) == ["a", "b", "c"]
    assert keys(list(sessions)) == ["a", "b", "c"]


def test_idle_conversations_expire_by_the_clock():
    clock = Clock()
    sessions, _ = store(idle_s=60, clock=clock)
    sessions.get("a", "chat")
    clock.now += 30
    sessions.get("b", "chat")
    clock.now += 30  # a idle for exactly 60 s: still kept
    assert keys(sessions.conversations()) == ["b", "a"]
    clock.now += 1
    assert keys(sessions.conversations()) == ["b"] and sessions.evicted == 1
    record = sessions.get("b", "chat")
    assert record.last_seen == clock.now and record.created == clock.now - 31
    clock.now += 61
    assert sessions.conversations() == [] and sessions.evicted == 2


def test_a_store_needs_room_and_a_positive_idle_time():
    with pytest.raises(ValueError):
        MemorySessionStore(new_session, max_sessions=0)
    with pytest.raises(ValueError):
        MemorySessionStore(new_session, idle_s=0)


def test_many_threads_share_one_store():
    sessions, made = store(max_sessions=16)
    seen: list[tuple[str, str]] = []
    lock = threading.Lock()

    def work(worker: int) -> None:
        for step in range(200):
            key = f"k{(worker * 7 + step) % 40}"
            record = sessions.get(key, "chat")
            sessions.save(record)
            with lock:
                seen.append((key, record.key))

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 1600 and all(asked == got for asked, got in seen)
    assert len(sessions) <= 16 and len(made) == len(sessions) + sessions.evicted
    listed = keys(sessions.conversations())
    assert len(listed) == len(set(listed)) == len(sessions)


class StateOnlyStore:
    """A store that keeps each conversation's state only as JSON text (as a store shared between
    processes would) beside its figures: every request gets a new session made from the
    gateway's shared options, with the saved state loaded."""

    def __init__(self) -> None:
        self.saved: dict[str, str] = {}
        self.records: dict[str, ConversationRecord] = {}
        self.loads = 0

    def get(self, key: str, api: str) -> ConversationRecord:
        session = new_session()
        if key in self.saved:
            session.state = ConversationState.from_json(self.saved[key])
            self.loads += 1
        record = self.records.get(key)
        if record is None:
            record = self.records[key] = ConversationRecord(key, api, session, 0.0, 0.0)
        record.session = session
        return record

    def save(self, record: ConversationRecord) -> None:
        self.saved[record.key] = record.session.state.to_json()

    def conversations(self) -> list[ConversationRecord]:
        return list(self.records.values())


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def sent_through(fake: FakeProvider, store: Any, bodies: list[dict[str, Any]]) -> list[bytes]:
    """What the provider received for ``bodies`` sent through a gateway with ``store``."""
    target = request_tokens("messages", bodies[0]) * 3 // 4
    settings = GatewaySettings(upstreams={"anthropic": fake.anthropic_url}, context_target=target)
    gateway = Gateway(settings, store=store)
    app = create_gateway_app(settings, gateway=gateway)
    start = len(fake.requests)
    with (
        AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server,
        httpx2.Client(trust_env=False) as http,
    ):
        client = anthropic.Anthropic(
            api_key="sk-test",
            base_url=server.url.rstrip("/"),
            max_retries=0,
            http_client=http,
            timeout=30.0,  # spares the SDK its refusal of large max_tokens
        )
        for body in bodies:
            client.messages.create(**body)
    return [request.raw for request in fake.requests[start:]]


def test_a_store_that_keeps_only_state_json_sends_the_same_bytes(fake):
    """The gateway saves after each change, so a conversation kept only as its state's JSON
    (and a session made from the shared options per request) decides as the in-process one."""
    bodies = [claude_code_request(turns, thinking=False) for turns in range(6, 14)]
    state_only = StateOnlyStore()
    direct = sent_through(fake, MemorySessionStore(new_session), bodies)
    through_json = sent_through(fake, state_only, bodies)
    assert through_json == direct
    assert state_only.loads == len(bodies) - 1
    (record,) = state_only.records.values()
    assert record.requests == len(bodies)
    assert record.codes["compiled"] >= 1 and record.codes["reused"] >= 1  # memory kept as JSON
    assert ConversationState.from_json(state_only.saved[record.key]).requests == len(bodies)
