"""Several real ``tomc gateway serve`` processes on one real ``redis-server``, against one
process with the in-memory store: the same bytes upstream, whichever process serves which
request, through a ``kill -9``, concurrent requests, an outage of the store, and many
conversations.

One scenario: a coding agent's Chat Completions conversation growing request by request past a
context target, so that the gateway compiles a memory, reuses it, and rebuilds it as the
conversation grows; the fake provider's usage is fed back after every answer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import httpx2
import pytest
import redis

from dialect_fixtures import chat_agent_request
from fake_providers import FakeProvider
from gateway_helpers import free_port
from redis_server import RedisServer
from team_gateways import GatewayProcess, team_gateways
from tomc.chat._state import ConversationState
from tomc.testing.wire import Reply

TARGET = 20_000
#: How the scenario's conversation is keyed by the gateway (``user``, then the model).
KEY = "chat:dev-7|gpt-4o"


def conversation_bodies(count: int = 12) -> list[dict[str, Any]]:
    """``count`` requests of one growing conversation (about 23K to 46K tokens): each resends
    the previous history plus the agent's next steps, ending where the agent would send (after
    a user message, or after the last result of a step's tool calls)."""
    full = chat_agent_request(26)
    messages = full["messages"]
    cuts = [
        i
        for i in range(2, len(messages) + 1)
        if messages[i - 1]["role"] == "user"
        or (
            messages[i - 1]["role"] == "tool"
            and (i == len(messages) or messages[i]["role"] != "tool")
        )
    ]
    return [{**full, "messages": messages[:cut], "user": "dev-7"} for cut in cuts[-3 * count :: 3]]


def send(http: httpx2.Client, base: str, body: dict[str, Any]) -> httpx2.Response:
    return http.post(
        f"{base}/v1/chat/completions", json=body, headers={"authorization": "Bearer sk-dev-7"}
    )


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def upstreams(fake: FakeProvider) -> dict[str, str]:
    return {"openai": fake.base_url, "anthropic": fake.anthropic_url}


def run_conversation(
    fake: FakeProvider, gateways: Sequence[GatewayProcess], bodies: Sequence[dict[str, Any]]
) -> tuple[list[bytes], dict[str, Any]]:
    """Send ``bodies`` in order, round robin over ``gateways``; the upstream bodies and the
    summed status."""
    start = len(fake.requests)
    with httpx2.Client(trust_env=False, timeout=60) as http:
        for n, body in enumerate(bodies):
            assert send(http, gateways[n % len(gateways)].url, body).status_code == 200
    status = gateways[0].status()
    return [r.raw for r in fake.requests[start:]], status


@pytest.fixture
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The scenario through one process with the in-memory store (what a team must match)."""
    folder = tmp_path_factory.mktemp("one-process")
    with FakeProvider() as fake:
        args = ("--context-target", str(TARGET))
        with team_gateways(folder, upstreams(fake), "memory", count=1, args=args) as (one,):
            bodies, status = run_conversation(fake, [one], conversation_bodies())
            traffic = settled_traffic(one, len(bodies))
    (conversation,) = status["conversations"]
    return {"bodies": bodies, "conversation": conversation, "traffic": traffic}


def settled_traffic(gateway: GatewayProcess, requests: int) -> dict[str, Any]:
    """``gateway``'s usage ledger figures once they hold ``requests`` requests (each is
    recorded just after its answer, possibly by another process)."""
    deadline = time.monotonic() + 20
    while True:
        traffic = gateway.status()["traffic"]
        if traffic is not None and traffic["totals"]["requests"] >= requests:
            return traffic
        assert time.monotonic() < deadline, f"the ledger holds {traffic and traffic['totals']}"
        time.sleep(0.05)


def store_args() -> tuple[str, ...]:
    return ("--context-target", str(TARGET))


def test_the_reference_conversation_compiles_reuses_and_rebuilds(reference):
    decisions = reference["conversation"]["decisions"]
    assert decisions.get("compiled", 0) >= 1 and decisions.get("reused", 0) >= 3
    assert reference["conversation"]["rebuilds"] >= 2
    assert len(reference["bodies"]) == 12


def test_round_robin_over_three_processes_sends_the_bytes_of_one(
    tmp_path, fake, redis_url, reference
):
    with team_gateways(tmp_path, upstreams(fake), redis_url, args=store_args()) as gateways:
        bodies, status = run_conversation(fake, gateways, conversation_bodies())
        served = [g.status()["this_process"]["requests"] for g in gateways]
    assert served == [4, 4, 4]
    assert bodies == reference["bodies"]  # byte for byte
    (conversation,) = status["conversations"]
    assert conversation["rebuilds"] == reference["conversation"]["rebuilds"]
    assert conversation["decisions"] == reference["conversation"]["decisions"]
    for name in ("tomc_tokens_before", "tomc_tokens_after"):
        assert conversation[name] == reference["conversation"][name], name
    assert status["requests"] == 12


def test_every_process_shows_the_team_usage_ledger_with_the_estimate_of_one(
    tmp_path, fake, redis_url, reference
):
    """Round robin over three processes: each one's status shows the whole team's billed and
    estimated direct input, the same as one process's SQLite ledger for the same requests
    (each request's direct estimate starts from the previous one, served elsewhere)."""
    expected = reference["traffic"]["totals"]
    # Rewritten requests: their direct estimate is the scaled prompt, part of it cached by
    # the previous request's direct prompt (OpenAI, within the cache's lifetime).
    assert expected["rewritten"] >= 4 and expected["direct_input"] != expected["billed_input"]
    with team_gateways(tmp_path, upstreams(fake), redis_url, args=store_args()) as gateways:
        run_conversation(fake, gateways, conversation_bodies())
        shown = [settled_traffic(g, 12) for g in gateways]
        homes = [g.home for g in gateways]
    for traffic in shown:
        totals = traffic["totals"]
        assert traffic["shared"] and "session store" in traffic["ledger"]
        assert (totals["requests"], totals["rewritten"]) == (12, expected["rewritten"])
        assert totals["requests_with_usage"] == expected["requests_with_usage"] == 12
        for name in ("billed_input", "direct_input", "billed_saved"):
            assert totals[name] == pytest.approx(expected[name], abs=0.11), name
        (row,) = traffic["conversations"]
        assert row["conversation"] == KEY and row["direct_input"] == totals["direct_input"]
        assert traffic["series"][-1]["requests"] == 12
    assert shown[0]["totals"] == shown[1]["totals"] == shown[2]["totals"]
    # The figures live in the store: no process wrote a ledger file of its own.
    assert not any((home / "gateway" / "usage.sqlite3").exists() for home in homes)


def test_kill_9_mid_request_the_others_go_on_with_the_same_memory(
    tmp_path, fake, redis_url, reference
):
    bodies = conversation_bodies()
    url = redis_url + "&lease_s=1.5&wait_s=5"
    with team_gateways(tmp_path, upstreams(fake), url, args=store_args()) as gateways:
        a, b, c = gateways
        sent, _ = run_conversation(fake, [a, b, c], bodies[:7])
        assert sent == reference["bodies"][:7]
        # Request 8 reaches b, which leases the conversation and forwards it; the provider
        # stalls, and b is killed before it answers or saves.
        fake.script(Reply(stall=True))
        before = len(fake.requests)
        failed: list[BaseException] = []

        def doomed() -> None:
            try:
                with httpx2.Client(trust_env=False, timeout=60) as http:
                    send(http, b.url, bodies[7])
            except httpx2.HTTPError as exc:
                failed.append(exc)

        thread = threading.Thread(target=doomed)
        thread.start()
        deadline = time.monotonic() + 30
        while len(fake.requests) == before and time.monotonic() < deadline:
            time.sleep(0.02)
        b.kill()
        thread.join(30)
        assert failed, "the client of the killed process should have lost its connection"
        # The agent retries the same request, on another process; the lease b held expires.
        started = time.monotonic()
        rest, status = run_conversation(fake, [c, a], bodies[7:])
        waited = time.monotonic() - started
    assert rest == reference["bodies"][7:]  # same frozen memory, same bytes
    assert waited < 15
    (conversation,) = status["conversations"]
    assert conversation["rebuilds"] == reference["conversation"]["rebuilds"]


def _saved_state(redis_url: str, key: str) -> tuple[int, ConversationState]:
    base, prefix = redis_url.split("?prefix=")
    client = redis.Redis.from_url(base)
    version, data = client.hmget(f"{prefix}state:{key}", "v", "d")
    client.close()
    if version is None:  # nothing saved yet
        return 0, ConversationState()
    return int(version), ConversationState.from_json(data.decode())


def _state_at(redis_url: str, key: str, version: int) -> tuple[int, ConversationState]:
    """The saved state once it reaches ``version`` (a process saves after its answer is out,
    so a client can be done first), and that no later save followed within half a second."""
    deadline = time.monotonic() + 20
    saved, state = _saved_state(redis_url, key)
    while saved < version and time.monotonic() < deadline:
        time.sleep(0.05)
        saved, state = _saved_state(redis_url, key)
    time.sleep(0.5)
    assert _saved_state(redis_url, key)[0] == saved
    return saved, state


@pytest.mark.parametrize("wait_s", [10.0, 0.2])
def test_one_conversation_on_two_processes_at_once_never_tears_its_state(
    tmp_path, fake, redis_url, wait_s
):
    bodies = conversation_bodies()
    url = f"{redis_url}&wait_s={wait_s}"
    with team_gateways(tmp_path, upstreams(fake), url, count=2, args=store_args()) as gateways:
        run_conversation(fake, gateways, bodies[:4])
        version, state = _state_at(redis_url, KEY, 4)
        assert version == 4 and state.requests == 4
        # Both processes get the same next request at once; the provider takes a while.
        fake.configure(event_delay_s=0.3)
        results: list[int] = []

        def one(gateway: GatewayProcess) -> None:
            with httpx2.Client(trust_env=False, timeout=60) as http:
                body = {**bodies[4], "stream": True}
                results.append(send(http, gateway.url, body).status_code)

        threads = [threading.Thread(target=one, args=(g,)) for g in gateways]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        after, state = _state_at(redis_url, KEY, 6 if wait_s > 1 else 5)
    assert results == [200, 200]
    if wait_s > 1:  # the second waited for the first's lease, then saved after it
        assert after == 6 and state.requests == 6
    else:  # the second gave up waiting: prepared from the saved state, saved nothing
        assert after == 5 and state.requests == 5
    assert state.frozen is not None


def test_a_store_outage_passes_requests_through_then_recovers(tmp_path, fake):
    server = RedisServer(tmp_path / "redis").start()
    bodies = conversation_bodies()
    try:
        with team_gateways(tmp_path, upstreams(fake), server.url, args=store_args()) as gateways:
            first, _ = run_conversation(fake, gateways, bodies[:6])
            assert first[-1] != _raw(bodies[5])  # over the target: rewritten
            server.stop()
            down, _ = run_conversation(fake, gateways, bodies[6:9])
            server.start()  # same port, empty
            time.sleep(1.2)  # the retry pause after a failure
            back, status = run_conversation(fake, gateways, bodies[9:])
            logs = [g.log_text() for g in gateways]
    finally:
        server.stop()
    assert down == [_raw(body) for body in bodies[6:9]]  # unchanged, byte for byte
    assert all(raw != _raw(body) for raw, body in zip(back, bodies[9:], strict=True))
    assert status["session_store"]["available"]
    for log in logs:
        assert log.count("unavailable") <= 1 and log.count("answers again after") <= 1
    assert sum(log.count("unavailable") for log in logs) == 3  # each process, once
    assert sum(log.count("answers again after") for log in logs) >= 1


def _raw(body: dict[str, Any]) -> bytes:
    """The bytes httpx2 sends for ``json=body``."""
    return httpx2.Request("POST", "http://x", json=body).content


def test_ten_thousand_conversations_in_the_store_each_process_stays_bounded(
    tmp_path, fake, redis_url, redis_server
):
    body = conversation_bodies()[-1]
    url = redis_url + "&cache=16"
    with team_gateways(tmp_path, upstreams(fake), url, args=store_args()) as gateways:
        # One real conversation's state, stored under 10,000 conversation keys.
        run_conversation(fake, gateways[:1], [body])
        _, state = _state_at(redis_url, KEY, 1)
        base, prefix = redis_url.split("?prefix=")
        client = redis.Redis.from_url(base)
        blob = state.to_json()
        pipe = client.pipeline(transaction=False)
        for n in range(10_000):
            pipe.hset(f"{prefix}state:chat:dev-{n}|gpt-4o", mapping={"v": 1, "d": blob})
        pipe.execute()
        assert len(client.keys(f"{prefix}state:*")) >= 10_000
        client.close()
        with httpx2.Client(trust_env=False, timeout=60) as http:

            def conversations(numbers: range) -> None:
                for n in numbers:
                    gateway = gateways[n % 3]
                    answer = send(http, gateway.url, {**body, "user": f"dev-{n}"})
                    assert answer.status_code == 200

            conversations(range(60))  # every process warm, its cache full
            rss_before = [g.rss_kb() for g in gateways]
            conversations(range(60, 360))
        stores = [g.status()["session_store"] for g in gateways]
        grown_mb = [(g.rss_kb() - kb) / 1024 for g, kb in zip(gateways, rss_before, strict=True)]
    assert [s["cached_here"] for s in stores] == [16, 16, 16]
    assert max(grown_mb) < 24, grown_mb  # 100 more conversations each, no more memory


def test_workers_share_one_port_and_one_killed_is_replaced(tmp_path, fake, redis_url):
    import os
    import signal

    bodies = conversation_bodies()
    args = ("--workers", "3", *store_args())
    with team_gateways(tmp_path, upstreams(fake), redis_url, count=1, args=args) as (gateway,):
        pids = set()
        for _ in range(40):
            with httpx2.Client(trust_env=False, timeout=30) as http:  # a new connection each
                pids.add(http.get(f"{gateway.url}/status.json").json()["this_process"]["pid"])
        assert len(pids) >= 2
        os.kill(pids.pop(), signal.SIGKILL)
        sent, status = run_conversation(fake, [gateway], bodies[:4])
    assert len(sent) == 4 and status["requests"] == 4


def test_the_gateways_own_502s_are_counted_for_the_team(tmp_path, redis_url):
    """Two processes on Redis whose upstream nobody listens on: each request gets a 502 naming
    the URL tried, and every process's status counts them, per conversation and in total."""
    upstream = f"http://127.0.0.1:{free_port()}"
    body = conversation_bodies(1)[0]
    auth = {"authorization": "Bearer sk-dev-7"}
    nowhere = {"openai": f"{upstream}/v1", "anthropic": upstream}
    with team_gateways(tmp_path, nowhere, redis_url, count=2) as gateways:
        with httpx2.Client(trust_env=False, timeout=60) as http:
            answers = [send(http, gateway.url, body) for gateway in gateways]
            models = http.get(f"{gateways[0].url}/v1/models", headers=auth)
        deadline = time.monotonic() + 20
        while True:  # each process records its own, just after its answer
            status = gateways[1].status()
            traffic = status["traffic"]
            if traffic and traffic["totals"]["gateway_errors"] >= 3 and status["conversations"]:
                break
            assert time.monotonic() < deadline, traffic
            time.sleep(0.05)
    for answer in [*answers, models]:
        assert answer.status_code == 502
        assert answer.json()["error"]["message"].startswith(
            f"the gateway could not reach the upstream {upstream}/v1/"
        )
    totals = traffic["totals"]
    assert totals["gateway_error_kinds"] == {"unreachable": 3}
    assert totals["upstream_error_count"] == 0 and totals["requests"] == 2
    (row,) = traffic["conversations"]
    assert (row["conversation"], row["gateway_errors"], row["requests"]) == (KEY, 2, 2)
    (live,) = status["conversations"]  # the store's figures, summed over both processes
    assert (live["conversation"], live["gateway_errors"]) == (KEY, 2)
