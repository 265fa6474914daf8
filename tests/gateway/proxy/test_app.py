"""The gateway over loopback: the real SDKs talk to it, it talks to a fake upstream.

Checks what users of similar proxies reported going wrong: headers allow-listed away, buffered
streams, rewritten prefixes on requests that fit, upstream errors wrapped, connections leaked,
credentials in logs, and a failure inside the proxy that loses the request.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from dialect_fixtures import (
    chat_agent_request,
    claude_code_request,
    codex_request,
    request_tokens,
    summarisation_request,
    window_for,
)
from fake_providers import FakeProvider, ProviderError, Reply, Usage
from tomc._gateway.agents.limits import claude_code_limit
from tomc._gateway.proxy import options as gateway_options
from tomc._gateway.proxy.app import Gateway, create_gateway_app, new_session
from tomc._gateway.proxy.options import COMPILE_DEADLINE_S, DEADLINE_ENV, compile_deadline
from tomc._gateway.proxy.store.memory import MemorySessionStore
from tomc._gateway.settings import GatewaySettings, save_settings
from tomc._http.server import AppServer
from tomc.chat import AutomaticChatSession, SessionOptions, _memory
from tomc.chat.dialects import DIALECTS

SECRET = "sk-ant-secret-4242"
OPENAI_SECRET = "sk-openai-secret-4242"


@contextmanager
def gateway_on(fake: FakeProvider, **settings_fields: Any) -> Iterator[tuple[str, Gateway]]:
    """A gateway app whose upstreams are the fake, served on a free loopback port."""
    settings = GatewaySettings(
        upstreams={
            "anthropic": fake.anthropic_url,
            "openai": fake.base_url,
            "chatgpt": fake.chatgpt_url,
        },
        **settings_fields,
    )
    gateway = Gateway(settings, timeout=httpx2.Timeout(10.0, read=2.0))
    app = create_gateway_app(settings, gateway=gateway)
    with AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server:
        yield server.url.rstrip("/"), gateway


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def claude_client(base: str, **options: Any) -> anthropic.Anthropic:
    options.setdefault("timeout", 30.0)  # also spares the SDK its refusal of large max_tokens
    return anthropic.Anthropic(
        api_key=SECRET,
        base_url=base,
        max_retries=0,
        http_client=httpx2.Client(trust_env=False),
        **options,
    )


def openai_client(base: str, **options: Any) -> openai.OpenAI:
    """An OpenAI client on ``base`` (a gateway root, or the fake's root)."""
    return openai.OpenAI(
        api_key=OPENAI_SECRET,
        base_url=f"{base}/v1",
        max_retries=0,
        http_client=httpx2.Client(trust_env=False),
        **options,
    )


CLAUDE_HEADERS = {
    "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
    "x-app": "cli",
    "x-claude-code-session-id": "3f1c0f52-8d8e-4a59-9f0b-5b7c2d1e9a10",
}


def test_a_request_that_fits_arrives_byte_identical_with_every_header(fake):
    body = claude_code_request(4, thinking=True, tail="tool_result")
    client_direct = claude_client(fake.anthropic_url, default_headers=CLAUDE_HEADERS)
    client_direct.messages.create(**body, extra_query={"beta": "true"})
    direct = fake.last
    with gateway_on(fake) as (base, gateway):
        client = claude_client(base, default_headers=CLAUDE_HEADERS)
        answer = client.messages.create(**body, extra_query={"beta": "true"})
    via = fake.last
    assert isinstance(answer, anthropic.types.Message)
    assert via.raw == direct.raw
    assert via.path == "/v1/messages" and via.query == "beta=true"
    hop = {"host", "content-length", "connection", "accept-encoding"}
    assert {k: v for k, v in via.headers.items() if k not in hop} == {
        k: v for k, v in direct.headers.items() if k not in hop
    }
    assert SECRET in via.headers.get("x-api-key", "") + via.headers.get("authorization", "")
    conversation = gateway.status()["conversations"][0]
    assert conversation["conversation"].startswith("claude:3f1c0f52")
    assert conversation["decisions"] == {"fits": 1}


def test_streams_are_relayed_as_they_arrive_and_byte_for_byte(fake):
    fake.configure(event_delay_s=0.15, text="one two three four five six", chunk_size=4)
    body = {**claude_code_request(2, thinking=False), "stream": True}
    with gateway_on(fake) as (base, _):
        arrivals = []
        chunks = []
        with (
            httpx2.Client(trust_env=False) as http,
            http.stream(
                "POST",
                f"{base}/v1/messages",
                json=body,
                headers={"x-api-key": SECRET, "anthropic-version": "2023-06-01"},
            ) as response,
        ):
            assert response.status_code == 200
            for chunk in response.iter_raw():
                arrivals.append(time.monotonic())
                chunks.append(chunk)
    sent = fake.last
    assert b"".join(chunks) == b"".join(sent.sent)
    assert len(sent.sent) > 8
    # The first event reached the client long before the upstream sent its last one.
    assert arrivals[0] < sent.sent_at[-1] - 0.5
    assert response.headers["content-type"].startswith("text/event-stream")


def test_an_over_window_conversation_is_compiled_and_stays_valid(fake):
    body = chat_agent_request(14)
    limit = window_for("chat", body) - 4096  # a prompt target: no output reservation
    with gateway_on(fake, context_target=limit) as (base, gateway):
        client = openai_client(base)
        client.chat.completions.create(**body)
        first = fake.last.body["messages"]
        client.chat.completions.create(**body)
        second = fake.last.body["messages"]
    assert len(first) < len(body["messages"])
    assert DIALECTS["chat"].validate(first) == []
    assert first == second  # the frozen memory is reused: the prefix stays cached
    decisions = gateway.status()["conversations"][0]["decisions"]
    assert decisions == {"compiled": 1, "reused": 1}
    shown = gateway.status()["conversations"][0]  # TOMC's own count, named as such
    assert shown["tomc_tokens_before"] > shown["tomc_tokens_after"] > 0


def test_codex_chatgpt_sign_in_goes_to_the_chatgpt_endpoint(fake):
    body = codex_request(3, stream=True)
    headers = {"ChatGPT-Account-ID": "acct-123", "session_id": "thread-9"}
    with gateway_on(fake) as (base, gateway):
        client = openai_client(base, default_headers=headers)
        events = list(client.responses.create(**body))
        assert events[-1].type == "response.completed"
        assert fake.last.path == "/backend-api/codex/responses"
        assert fake.last.headers["chatgpt-account-id"] == "acct-123"
        client.responses.compact(model=body["model"], input=body["input"])
        assert fake.last.path == "/backend-api/codex/responses/compact"
        api_key_client = openai_client(base)
        api_key_client.responses.create(**{**body, "stream": False})
        assert fake.last.path == "/v1/responses"
        assert fake.last.headers["authorization"] == f"Bearer {OPENAI_SECRET}"
    keys = [c["conversation"] for c in gateway.status()["conversations"]]
    assert any(key.startswith("responses:") for key in keys)


def test_other_paths_pass_through_untouched(fake):
    body = claude_code_request(2, thinking=False)
    with gateway_on(fake) as (base, gateway):
        client = claude_client(base)
        counted = client.messages.count_tokens(model=body["model"], messages=body["messages"])
        assert counted.input_tokens > 0
        assert fake.last.path == "/v1/messages/count_tokens"
        models = openai_client(base).models.list()
        assert [m.id for m in models.data]
        assert fake.last.path == "/v1/models"
    assert gateway.status()["passthrough_paths"] == 2
    assert gateway.status()["conversations"] == []


def test_upstream_errors_come_back_as_they_are(fake):
    fake.configure(error=ProviderError(529, "Overloaded", "overloaded_error"))
    body = claude_code_request(2, thinking=False)
    with gateway_on(fake) as (base, _):
        with pytest.raises(anthropic.APIStatusError) as raised:
            claude_client(base).messages.create(**body)
        direct_body = fake.last.json()
    assert raised.value.status_code == 529
    assert raised.value.body == direct_body  # the provider's own error JSON, unwrapped


def test_an_unreachable_upstream_gets_an_error_in_the_clients_shape(fake):
    body = claude_code_request(2, thinking=False)
    settings = GatewaySettings(upstreams={"anthropic": "http://127.0.0.1:9"})
    app = create_gateway_app(settings)
    server = AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on")
    with server, pytest.raises(anthropic.APIStatusError) as raised:
        claude_client(server.url.rstrip("/")).messages.create(**body)
    assert raised.value.status_code == 502
    assert raised.value.body["type"] == "error"
    assert "could not reach the upstream" in raised.value.body["error"]["message"]


def test_a_stalled_upstream_times_out_and_a_broken_stream_is_passed_on(fake):
    body = claude_code_request(2, thinking=False)
    with gateway_on(fake) as (base, _):
        fake.configure(stall=True)
        with pytest.raises(anthropic.APIStatusError) as raised:
            claude_client(base).messages.create(**body)
        assert raised.value.status_code == 504
        fake.configure(stall=False, disconnect_after=3)
        with pytest.raises((anthropic.APIConnectionError, httpx2.RemoteProtocolError)):
            list(claude_client(base).messages.create(**body, stream=True))


def test_a_client_that_leaves_mid_stream_closes_the_upstream_stream(fake):
    fake.configure(event_delay_s=0.1, text="x" * 200, chunk_size=5)  # about 5 s of events
    body = {**claude_code_request(2, thinking=False), "stream": True}
    with gateway_on(fake) as (base, _):
        with (
            httpx2.Client(trust_env=False) as http,
            http.stream(
                "POST",
                f"{base}/v1/messages",
                json=body,
                headers={"x-api-key": SECRET, "anthropic-version": "2023-06-01"},
            ) as response,
        ):
            next(response.iter_raw())
        time.sleep(0.6)  # the gateway notices and closes its upstream stream
        stopped_at = len(fake.last.sent)
        time.sleep(0.6)
        # An upstream stream left open would keep sending into the void until complete.
        assert len(fake.last.sent) == stopped_at and not fake.last.complete


def test_a_rebuild_past_the_deadline_goes_out_safe_and_is_counted(fake, monkeypatch):
    build, release = _memory.build_region_memory, threading.Event()

    def slow(*args: Any, **kwargs: Any) -> Any:
        release.wait(10)  # a compile made slow on purpose
        return build(*args, **kwargs)

    deadline = SessionOptions(min_recent_messages=0, compile_deadline_s=0.3)
    monkeypatch.setattr(gateway_options, "SESSION_OPTIONS", deadline)
    monkeypatch.setattr("tomc.chat._rebuild.build_region_memory", slow)
    body = chat_agent_request(14)
    limit = window_for("chat", body) - 4096
    with gateway_on(fake, context_target=limit) as (base, gateway):
        client = openai_client(base)
        client.chat.completions.create(**body)
        assert b"(safe compaction)" in fake.last.raw  # in time, within the window
        release.set()
        for thread in threading.enumerate():
            if thread.name == "tomc-rebuild":
                thread.join(30)
        client.chat.completions.create(**body)  # the late rebuild's memory, reused
        assert b"(safe compaction)" not in fake.last.raw and b"[TOMC memory" in fake.last.raw
    conversation = gateway.status()["conversations"][0]
    assert conversation["decisions"] == {"reused": 1, "safe_compaction": 1}


def test_the_gateway_deadline_reads_its_environment(caplog):
    assert compile_deadline({}) == COMPILE_DEADLINE_S == 2.0
    assert compile_deadline({DEADLINE_ENV: "2.5"}) == 2.5
    assert compile_deadline({DEADLINE_ENV: "off"}) is None
    with caplog.at_level(logging.WARNING):
        assert compile_deadline({DEADLINE_ENV: "soon" * 1000}) == COMPILE_DEADLINE_S
    assert DEADLINE_ENV in caplog.text and len(caplog.text) < 400


def test_a_fault_inside_tomc_forwards_the_original_request(fake, monkeypatch):
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("kernel bug")

    body = chat_agent_request(14)
    openai_client(fake.root_url).chat.completions.create(**body)
    original = fake.last.raw
    limit = window_for("chat", body) - 4096  # a prompt target: no output reservation
    with gateway_on(fake, context_target=limit) as (base, gateway):
        client = openai_client(base)
        monkeypatch.setattr("tomc.chat._rebuild.build_region_memory", explode)
        client.chat.completions.create(**body)  # the compiler fails: the safe compaction
        assert b"(safe compaction)" in fake.last.raw and len(fake.last.raw) < len(original)
        monkeypatch.setattr(AutomaticChatSession, "prepare_request", explode)
        client.chat.completions.create(**body)  # the session itself fails: the gateway does
        assert fake.last.raw == original
    conversation = gateway.status()["conversations"][0]
    assert conversation["decisions"] == {"safe_compaction": 1, "gateway_error": 1}
    assert conversation["gateway_errors"] == 1


def test_the_agents_own_compaction_passes_through_and_cools_down(fake):
    summary = summarisation_request(12)
    follow_up = claude_code_request(12, thinking=False)
    limit = window_for("messages", follow_up) - 32000  # a prompt target: no max_tokens
    with gateway_on(fake, context_target=limit) as (base, gateway):
        client = claude_client(base, default_headers=CLAUDE_HEADERS)
        client.messages.create(**summary)
        assert fake.last.raw == json.dumps(summary, separators=(",", ":")).encode() or (
            json.loads(fake.last.raw) == summary
        )
        client.messages.create(**follow_up)
    codes = gateway.status()["conversations"][0]["decisions"]
    assert codes == {"agent_compaction": 1, "native_cooldown": 1}


def test_usage_from_the_stream_feeds_the_session(fake):
    fake.configure(usage=Usage(input_tokens=900, cache_write_tokens=100, cache_read_tokens=9000))
    body = {**claude_code_request(2, thinking=False), "stream": True}
    with gateway_on(fake) as (base, gateway):
        client = claude_client(base, default_headers=CLAUDE_HEADERS)
        list(client.messages.create(**body))
        client.messages.create(**{**body, "stream": False})
    conversation = gateway.store.conversations()[0]
    decision = conversation.session.decisions[-1]
    assert (decision.context_hint, decision.hint_source) == (10_000, "usage")


def test_status_shows_figures_never_text_or_credentials(fake, caplog):
    body = chat_agent_request(14)
    limit = window_for("chat", body) - 4096  # a prompt target: no output reservation
    with caplog.at_level(logging.DEBUG), gateway_on(fake, context_target=limit) as (base, _):
        openai_client(base).chat.completions.create(**body)
        with httpx2.Client(trust_env=False) as http:
            status = http.get(f"{base}/status.json").text
            page = http.get(f"{base}/status").text
            health = http.get(f"{base}/healthz").json()
    assert health["service"] == "tomc-gateway"
    some_text = body["messages"][1]["content"][:40]
    # The gateway's logs, not the test client's: an openai SDK logs its own request at DEBUG
    # (2.x with the messages; litellm's pin brings that version into the Windows runtime).
    logged = "\n".join(
        r.getMessage() for r in caplog.records if not r.name.startswith(("openai", "anthropic"))
    )
    for shown in (status, page, logged):
        assert OPENAI_SECRET not in shown
        assert some_text not in shown
    assert json.loads(status)["conversations"][0]["decisions"] == {"compiled": 1}


def test_a_foreign_host_name_is_refused(fake):
    with gateway_on(fake) as (base, _), httpx2.Client(trust_env=False) as http:
        response = http.post(f"{base}/v1/messages", headers={"host": "evil.example"}, json={})
    assert response.status_code == 421
    assert fake.requests == []


def test_conversations_are_kept_apart_and_bounded(fake):
    store_limit = 3
    settings = GatewaySettings(upstreams={"anthropic": fake.anthropic_url})
    gateway = Gateway(settings, store=MemorySessionStore(new_session, max_sessions=store_limit))
    app = create_gateway_app(settings, gateway=gateway)
    with AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server:
        base = server.url.rstrip("/")
        for number in range(5):
            headers = {"x-claude-code-session-id": f"session-{number}"}
            claude_client(base, default_headers=headers).messages.create(
                **claude_code_request(2, thinking=False)
            )
    keys = [c["conversation"] for c in gateway.status()["conversations"]]
    assert len(keys) == store_limit
    assert keys[0].startswith("claude:session-4") and gateway.store.evicted == 2


def test_reply_kinds_reach_the_sdk_as_its_own_objects(fake):
    fake.configure(kind="thinking_tool_call")
    body = claude_code_request(2)
    with gateway_on(fake) as (base, _):
        message = claude_client(base).messages.create(**body)
    assert [block.type for block in message.content] == ["thinking", "tool_use"]
    assert isinstance(message.content[1], anthropic.types.ToolUseBlock)
    assert Reply().kind == "text"  # the fixture's default was changed for this test only


def test_tomc_headers_are_read_and_removed_before_forwarding(fake):
    body = chat_agent_request(14)
    target = int(request_tokens("chat", body) * 0.6)
    with gateway_on(fake) as (base, gateway):
        client = openai_client(base)
        client.chat.completions.create(**body)
        direct_headers = dict(fake.last.headers)
        extra = {"x-tomc-context-target": str(target), "x-tomc-thinking-prefix": "drop_block"}
        client.chat.completions.create(**body, extra_headers=extra)
        via = fake.last
    assert not any(name.lower().startswith("x-tomc-") for name in via.headers)
    hop = {"content-length"}
    assert {k: v for k, v in via.headers.items() if k not in hop} == {
        k: v for k, v in direct_headers.items() if k not in hop
    }
    assert len(via.body["messages"]) < len(body["messages"])
    conversation = gateway.status()["conversations"][0]
    assert conversation["context_target"] == target
    assert conversation["target_source"] == "tomc run option"


def test_an_agent_default_header_loses_to_the_settings_and_off_turns_targets_off(fake):
    body = chat_agent_request(14)
    small = int(request_tokens("chat", body) * 0.6)
    agent_default = {"x-tomc-context-target": f"{small}; source=agent"}
    with gateway_on(fake, context_target="off") as (base, gateway):
        openai_client(base).chat.completions.create(**body, extra_headers=agent_default)
    assert fake.last.body == body
    assert gateway.status()["conversations"][0]["context_target"] is None
    assert gateway.status()["context_target"] == "off"


def test_a_settings_change_applies_to_a_running_conversation(fake, tmp_path):
    body = chat_agent_request(14)
    upstreams = {"anthropic": fake.anthropic_url, "openai": fake.base_url}
    settings = GatewaySettings(upstreams=upstreams)
    save_settings(settings, tmp_path)
    gateway = Gateway(settings, timeout=httpx2.Timeout(10.0, read=2.0), home=tmp_path)
    app = create_gateway_app(settings, gateway=gateway)
    with AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server:
        client = openai_client(server.url.rstrip("/"))
        client.chat.completions.create(**body)
        assert fake.last.body == body  # gpt-4o's default target (0.6 of its window) fits
        target = int(request_tokens("chat", body) * 0.6)
        time.sleep(1.1)  # the file is checked at most once a second
        save_settings(replace(settings, context_target=target), tmp_path)
        client.chat.completions.create(**body)
    assert len(fake.last.body["messages"]) < len(body["messages"])
    (conversation,) = gateway.status()["conversations"]
    assert conversation["requests"] == 2 and conversation["context_target"] == target
    assert gateway.status()["context_target"] == target


def test_with_no_settings_a_claude_code_request_gets_the_agents_default_target(fake):
    small = {**claude_code_request(40, thinking=False), "model": "claude-haiku-4-5"}
    large = {**claude_code_request(120, thinking=False), "model": "claude-haiku-4-5"}
    default = claude_code_limit("claude-haiku-4-5").target
    assert request_tokens("messages", small) < default < request_tokens("messages", large)
    with gateway_on(fake) as (base, gateway):
        client = claude_client(base, default_headers=CLAUDE_HEADERS)
        client.messages.create(**small, extra_query={"beta": "true"})
        direct = claude_client(fake.anthropic_url, default_headers=CLAUDE_HEADERS)
        sent_small = fake.last.raw
        direct.messages.create(**small, extra_query={"beta": "true"})
        assert sent_small == fake.last.raw  # under the target: byte-identical
        client.messages.create(**large, extra_query={"beta": "true"})
        sent = fake.last.body
    assert request_tokens("messages", sent) <= default
    decisions = gateway.status()["conversations"][0]
    assert decisions["context_target"] == default
    assert decisions["target_source"].startswith("claude default")


def test_a_browsers_own_requests_are_answered_here_never_forwarded_nor_counted(fake, tmp_path):
    settings = GatewaySettings(upstreams={"openai": fake.base_url, "anthropic": fake.anthropic_url})
    gateway = Gateway(settings, home=tmp_path)  # with a usage ledger
    app = create_gateway_app(settings, gateway=gateway)
    with (
        AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server,
        httpx2.Client(trust_env=False) as http,
    ):
        base = server.url.rstrip("/")
        page = http.get(f"{base}/status")  # what a browser opens, then it asks for the rest
        asked = {
            path: http.get(f"{base}{path}")
            for path in (
                "/favicon.ico",
                "/apple-touch-icon.png",
                "/apple-touch-icon-precomposed.png",
                "/apple-touch-icon-180x180.png",
                "/robots.txt",
                "/.well-known/appspecific/com.chrome.devtools.json",
            )
        }
        head = http.head(f"{base}/favicon.ico")
        status = http.get(f"{base}/status.json").json()
    assert page.status_code == 200
    assert {path: answer.status_code for path, answer in asked.items()} == {
        "/favicon.ico": 204,
        "/apple-touch-icon.png": 204,
        "/apple-touch-icon-precomposed.png": 204,
        "/apple-touch-icon-180x180.png": 204,
        "/robots.txt": 200,
        "/.well-known/appspecific/com.chrome.devtools.json": 404,
    }
    assert "max-age" in asked["/favicon.ico"].headers["cache-control"]  # asked once a day
    assert asked["/robots.txt"].text == "User-agent: *\nDisallow: /\n"
    assert head.status_code == 204
    assert fake.requests == []  # nothing went to the provider
    assert (status["requests"], status["passthrough_paths"]) == (0, 0)
    totals = status["traffic"]["totals"]
    assert totals["requests"] == totals["upstream_error_count"] == totals["gateway_errors"] == 0
