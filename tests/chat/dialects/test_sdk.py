"""AutomaticChatSession driving the real anthropic and openai SDKs against the fake provider.

Every format (Anthropic Messages, OpenAI Responses, Chat Completions) with sync and async clients,
streaming and not. Each request is also sent by the SDK directly, without the session, and the
two arrivals are compared: only old history may differ. Requests are Claude Code-like and
Codex-like (see ``dialect_fixtures``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import anthropic
import openai
import pytest
from anthropic.lib.streaming import AsyncMessageStream, MessageStream

from dialect_fixtures import (
    CLAUDE_BETAS,
    HISTORY_KEYS,
    async_sdk_clients,
    chat_agent_request,
    claude_code_request,
    codex_request,
    same_content,
    sdk_clients,
    spy_client,
    summarisation_request,
    tight_session,
)
from fake_providers import BINDING_BETA, FakeProvider, ProviderError, Recorded, Usage
from tomc.chat import CODES, AutomaticChatSession, Decision
from tomc.chat.dialects import DIALECTS

MEMORY_MARK = "[TOMC memory of "
# Headers an SDK may vary per request (retries, idempotency); content-length follows the body.
VOLATILE = frozenset({"x-stainless-retry-count", "idempotency-key", "content-length"})
ROOMY = 10**6  # a deployment limit at which every request here fits
NOT_GIVEN = anthropic.NOT_GIVEN


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


@dataclass
class Outcome:
    """What one call returned, read the way a caller would read it."""

    result: Any
    returned_as_is: bool  # the very object the SDK method returned
    events: list[dict[str, Any]] | None  # a stream, read to the end only after it came back
    final: Any  # a Messages stream accumulated by the SDK's own MessageStream
    decision: Decision | None
    record: Recorded


def _client(pair: tuple[Any, Any], api: str) -> Any:
    return pair[0] if api == "messages" else pair[1]


def _method(client: Any, api: str) -> Callable[..., Any]:
    if api == "messages":
        return client.messages.create
    return client.responses.create if api == "responses" else client.chat.completions.create


def send(
    fake: FakeProvider,
    api: str,
    body: Mapping[str, Any],
    *,
    mode: str = "sync",
    session: AutomaticChatSession | None = None,
    accumulate: bool = False,
    **client_options: Any,
) -> Outcome:
    """Send ``body`` with a sync or async SDK client, through ``session`` or directly."""
    stream = bool(body.get("stream"))
    if mode == "sync":
        with sdk_clients(fake, **client_options) as pair:
            client = _client(pair, api)
            if session is None:
                result, same = _method(client, api)(**body), True
            else:
                spy, returned = spy_client(client, api)
                result = session.create(spy, **body)
                same = result is returned[-1]
            decision = session.last_decision if session else None
            final = events = None
            if stream and accumulate:
                with MessageStream(result, output_format=NOT_GIVEN) as accumulated:
                    final = accumulated.get_final_message()
            elif stream:
                events = [event.to_dict() for event in result]
            return Outcome(result, same, events, final, decision, fake.last)

    async def run() -> Outcome:
        async with async_sdk_clients(fake, **client_options) as pair:
            client = _client(pair, api)
            if session is None:
                result, same = await _method(client, api)(**body), True
            else:
                spy, returned = spy_client(client, api)
                result = await session.acreate(spy, **body)
                same = result is returned[-1]
            decision = session.last_decision if session else None
            final = events = None
            if stream and accumulate:
                async with AsyncMessageStream(result, output_format=NOT_GIVEN) as accumulated:
                    final = await accumulated.get_final_message()
            elif stream:
                events = [event.to_dict() async for event in result]
            return Outcome(result, same, events, final, decision, fake.last)

    return asyncio.run(run())


def expected_type(api: str, stream: bool, mode: str) -> type:
    if stream:
        if api == "messages":
            return anthropic.Stream if mode == "sync" else anthropic.AsyncStream
        return openai.Stream if mode == "sync" else openai.AsyncStream
    return {
        "messages": anthropic.types.Message,
        "responses": openai.types.responses.Response,
        "chat": openai.types.chat.ChatCompletion,
    }[api]


def sent_events(record: Recorded) -> list[Any]:
    """What the fake sent, as the SDKs yield it (Anthropic's SDK skips pings; no [DONE])."""
    return [data for name, data in record.events() if name != "ping" and data != "[DONE]"]


def same_headers(a: Recorded, b: Recorded) -> None:
    def kept(record: Recorded) -> dict[str, str]:
        return {k: v for k, v in record.headers.items() if k not in VOLATILE | {"host"}}

    assert kept(a) == kept(b)


def assert_returned_unchanged(outcome: Outcome, api: str, body: Mapping[str, Any], mode: str):
    stream = bool(body.get("stream"))
    assert isinstance(outcome.result, expected_type(api, stream, mode))
    assert outcome.returned_as_is
    if stream:  # read by the caller only: the session did not touch a single event
        assert outcome.events == sent_events(outcome.record)
    else:
        assert outcome.result.to_dict() == outcome.record.json()


def memory_positions(api: str, items: list[Any]) -> list[int]:
    dialect = DIALECTS[api]
    return [
        index
        for index, item in enumerate(items)
        if dialect.read(item, index)[0].text.startswith(MEMORY_MARK)
    ]


def assert_only_old_history_changed(api: str, original: list[Any], sent: list[Any]) -> None:
    """Items before the first memory are the original's prefix; after the last, its suffix;
    nothing else but memories and kept instruction items; original order throughout."""
    memories = memory_positions(api, sent)
    assert memories, "no memory item in a compiled request"
    first, last = memories[0], memories[-1]
    assert sent[:first] == original[:first]
    tail = sent[last + 1 :]
    assert tail and tail == original[len(original) - len(tail) :]
    position = first
    for index in range(first, last):
        if index not in memories:  # an instruction item kept from the compiled region
            position = original.index(sent[index], position) + 1  # raises if absent or moved
    assert len(sent) < len(original)
    assert DIALECTS[api].validate(sent) == []


# Responses accepts instructions as input items too (a developer message, say).
INSTRUCTION_ITEMS = [
    {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "You are Codex. Keep changes minimal."}],
    }
]

MODES = [
    pytest.param("sync", False, id="sync"),
    pytest.param("sync", True, id="sync-stream"),
    pytest.param("async", False, id="async"),
    pytest.param("async", True, id="async-stream"),
]

SHORT = {
    "messages-system-blocks": ("messages", lambda: claude_code_request(2, system="blocks")),
    "messages-system-string": ("messages", lambda: claude_code_request(2, system="string")),
    "responses-items": ("responses", lambda: codex_request(2)),
    "responses-string": (
        "responses",
        lambda: {"model": "gpt-5.3-codex", "instructions": "Be brief.", "input": "Where is it?"},
    ),
    "responses-no-instructions": (
        "responses",
        lambda: {k: v for k, v in codex_request(2).items() if k != "instructions"},
    ),
    "responses-instruction-items": (
        "responses",
        lambda: {**codex_request(2), "instructions": INSTRUCTION_ITEMS},
    ),
    "chat": ("chat", lambda: chat_agent_request(2)),
}


@pytest.mark.parametrize(("mode", "stream"), MODES)
@pytest.mark.parametrize("case", sorted(SHORT))
def test_a_request_that_fits_arrives_byte_identical(fake, case, mode, stream):
    api, build = SHORT[case]
    body = {**build(), **({"stream": True} if stream else {})}
    direct = send(fake, api, body, mode=mode)
    session = AutomaticChatSession(deployment_context_limit=ROOMY)
    wrapped = send(fake, api, body, mode=mode, session=session)
    assert wrapped.decision.code == "fits"
    assert wrapped.record.raw == direct.record.raw
    same_headers(wrapped.record, direct.record)
    assert_returned_unchanged(wrapped, api, body, mode)


LONG = {
    "messages-system-blocks": (
        "messages",
        lambda: claude_code_request(12, thinking=False, tail="tool_result"),
    ),
    "messages-system-string": (
        "messages",
        lambda: claude_code_request(12, thinking=False, system="string"),
    ),
    "responses-compaction-inside": (
        "responses",
        lambda: codex_request(12, compacted_turns=3, tail="tool_output"),
    ),
    "responses-no-instructions": (
        "responses",
        lambda: {k: v for k, v in codex_request(12).items() if k != "instructions"},
    ),
    "responses-instruction-items": (
        "responses",
        lambda: {**codex_request(12), "instructions": INSTRUCTION_ITEMS},
    ),
    "chat": ("chat", lambda: chat_agent_request(12)),
}


@pytest.mark.parametrize(("mode", "stream"), MODES)
@pytest.mark.parametrize("case", sorted(LONG))
def test_a_long_tool_session_is_compiled_and_only_old_history_changes(fake, case, mode, stream):
    api, build = LONG[case]
    body = {**build(), **({"stream": True} if stream else {})}
    key = HISTORY_KEYS[api]
    direct = send(fake, api, body, mode=mode)
    wrapped = send(fake, api, body, mode=mode, session=tight_session(api, body))
    decision = wrapped.decision
    assert (decision.action, decision.code, decision.api) == ("compiled", "compiled", api)
    assert decision.tokens_after < decision.tokens_before
    sent, original = wrapped.record.body, direct.record.body
    assert {k: v for k, v in sent.items() if k != key} == {
        k: v for k, v in original.items() if k != key
    }
    assert list(sent) == list(original)  # same keys, same order
    same_headers(wrapped.record, direct.record)
    assert_only_old_history_changed(api, original[key], sent[key])
    assert wrapped.record.status == 200  # the fake applies the provider's own pairing rules
    assert_returned_unchanged(wrapped, api, body, mode)


def test_a_compaction_item_and_everything_before_it_stay_in_place(fake):
    body = codex_request(12, compacted_turns=3)
    wrapped = send(fake, "responses", body, session=tight_session("responses", body))
    assert wrapped.decision.code == "compiled"
    sent = wrapped.record.body["input"]
    at = next(i for i, item in enumerate(body["input"]) if item.get("type") == "compaction")
    assert sent[: at + 1] == body["input"][: at + 1]
    assert min(memory_positions("responses", sent)) > at
    kept = [item for item in sent if item.get("type") == "reasoning"]
    assert kept and all(item in body["input"] for item in kept)  # verbatim, never flattened


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_messages_stream_accumulates_in_the_sdks_message_stream(fake, mode):
    fake.configure(kind="thinking_tool_call")
    body = claude_code_request(12, thinking=False, stream=True)
    wrapped = send(
        fake, "messages", body, mode=mode, session=tight_session("messages", body), accumulate=True
    )
    assert wrapped.decision.code == "compiled"
    whole = send(fake, "messages", {**body, "stream": False}).result
    final = wrapped.final
    assert isinstance(final, anthropic.types.Message)
    for field in ("content", "stop_reason", "usage", "model", "role"):
        assert same_content(final.to_dict()[field]) == same_content(whole.to_dict()[field])
    assert [block.type for block in final.content] == ["thinking", "tool_use"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_responses_stream_ends_with_the_completed_response(fake, mode):
    fake.configure(kind="thinking_tool_call")
    body = codex_request(12, stream=True)
    wrapped = send(fake, "responses", body, mode=mode, session=tight_session("responses", body))
    assert wrapped.decision.code == "compiled"
    assert wrapped.events[0]["type"] == "response.created"
    completed = wrapped.events[-1]
    assert completed["type"] == "response.completed"
    output = completed["response"]["output"]
    assert [item["type"] for item in output] == ["reasoning", "function_call"]
    assert output[0]["encrypted_content"].startswith("gAAAA")  # include was forwarded


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize(
    ("api", "build", "usage", "hint"),
    [
        (
            "messages",
            lambda: claude_code_request(2, thinking=False),
            Usage(input_tokens=900, cache_write_tokens=1_100, cache_read_tokens=40_000),
            42_000,  # Anthropic: input + cache creation + cache read
        ),
        (
            "responses",
            lambda: codex_request(2),
            Usage(input_tokens=5_000, cache_read_tokens=20_000),
            25_000,  # Responses: input_tokens, cached reads included
        ),
        ("chat", lambda: chat_agent_request(2), Usage(input_tokens=3_210), 3_210),
    ],
)
def test_usage_of_a_response_is_the_next_decisions_context_hint(
    fake, api, build, usage, hint, mode
):
    fake.configure(usage=usage)
    body = build()
    session = AutomaticChatSession(deployment_context_limit=ROOMY)
    first = send(fake, api, body, mode=mode, session=session).decision
    assert first.hint_source == "estimate"
    second = send(fake, api, body, mode=mode, session=session).decision
    assert (second.context_hint, second.hint_source) == (hint, "usage")
    send(fake, api, {**body, "stream": True}, mode=mode, session=session)
    after_stream = send(fake, api, body, mode=mode, session=session).decision
    assert after_stream.hint_source == "estimate"  # a stream is never read by the session


def test_usage_observed_from_a_messages_stream_counts_the_cached_prompt(fake):
    fake.configure(
        usage=Usage(input_tokens=900, cache_write_tokens=1_100, cache_read_tokens=40_000)
    )
    body = claude_code_request(2, thinking=False, stream=True)
    session = AutomaticChatSession(deployment_context_limit=ROOMY)
    final = send(fake, "messages", body, session=session, accumulate=True).final
    session.observe_usage(final.usage)  # what a streaming caller is told to do
    decision = send(fake, "messages", body, session=session).decision
    assert (decision.context_hint, decision.hint_source) == (42_000, "usage")


def _passes_through(fake: FakeProvider, api: str, body: dict[str, Any], session, code: str):
    direct = send(fake, api, body)
    wrapped = send(fake, api, body, session=session)
    assert (wrapped.decision.action, wrapped.decision.code) == ("passthrough", code)
    assert wrapped.record.raw == direct.record.raw
    same_headers(wrapped.record, direct.record)
    return wrapped


def test_previous_response_id_carries_server_history_and_passes_through(fake):
    body = {**codex_request(12, tail="tool_output"), "previous_response_id": "resp_0123"}
    _passes_through(fake, "responses", body, tight_session("responses", body), "server_history")


def test_the_agents_own_compaction_requests_pass_through_then_cool_down(fake):
    body = codex_request(12)
    trigger = {**body, "input": [*body["input"], {"type": "compaction_trigger"}]}
    session = tight_session("responses", body, native_cooldown_requests=1)
    answer = _passes_through(fake, "responses", trigger, session, "agent_compaction")
    assert [item.type for item in answer.result.output] == ["compaction"]
    assert send(fake, "responses", body, session=session).decision.code == "native_cooldown"
    assert send(fake, "responses", body, session=session).decision.code == "compiled"

    summary = summarisation_request(12)
    session = tight_session("messages", summary, native_cooldown_requests=1)
    _passes_through(fake, "messages", summary, session, "agent_compaction")
    follow_up = claude_code_request(12, thinking=False)
    assert send(fake, "messages", follow_up, session=session).decision.code == "native_cooldown"


def test_every_code_a_decision_carries_is_listed_in_codes(fake):
    summary = summarisation_request(6)
    session = AutomaticChatSession(deployment_context_limit=ROOMY)
    code = send(fake, "messages", summary, session=session).decision.code
    assert code in CODES


# ---------------------------------------------------------------------- signed thinking


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_signed_thinking_in_the_raw_tail_passes_through_when_asked(fake, mode):
    body = {
        **claude_code_request(12, tail="tool_result"),
        "extra_headers": {"anthropic-beta": CLAUDE_BETAS},
    }
    direct = send(fake, "messages", body, mode=mode)
    session = tight_session("messages", body, thinking_prefix="passthrough")
    wrapped = send(fake, "messages", body, mode=mode, session=session)
    assert (wrapped.decision.action, wrapped.decision.code) == ("passthrough", "thinking_bound")
    assert "drop_block" in wrapped.decision.reason
    assert wrapped.record.raw == direct.record.raw
    assert wrapped.record.headers["anthropic-beta"] == CLAUDE_BETAS
    same_headers(wrapped.record, direct.record)


def test_a_thinking_bound_pass_through_counts_no_rebuild_and_reports_no_memory(fake):
    body = claude_code_request(12, tail="tool_result")
    session = tight_session("messages", body, thinking_prefix="passthrough")
    decision = send(fake, "messages", body, session=session).decision
    assert decision.code == "thinking_bound"
    assert (session.rebuilds, decision.rebuilds) == (0, 0)
    assert (decision.memory_tokens, decision.compiled_messages) == (None, 0)


def test_a_callers_own_block_binding_is_respected(fake):
    body = claude_code_request(12, tail="tool_result")
    body["thinking"] = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "error"}}
    body["extra_headers"] = {"anthropic-beta": f"{CLAUDE_BETAS},{BINDING_BETA}"}
    direct = send(fake, "messages", body)
    wrapped = send(fake, "messages", body, session=tight_session("messages", body))
    assert wrapped.decision.code == "thinking_bound"
    assert wrapped.record.raw == direct.record.raw
    body["thinking"]["block_binding"]["prefix_mismatch_behavior"] = "drop_block"
    wrapped = send(fake, "messages", body, session=tight_session("messages", body))
    assert wrapped.decision.code == "compiled"
    assert wrapped.record.body["thinking"] == body["thinking"]
    assert wrapped.record.headers["anthropic-beta"].split(",").count(BINDING_BETA) == 1


@pytest.mark.parametrize(("mode", "stream"), MODES)
@pytest.mark.parametrize("betas", [None, CLAUDE_BETAS], ids=["no-betas", "caller-betas"])
def test_drop_block_by_default_sets_the_binding_and_merges_the_beta_header(
    fake, mode, stream, betas
):
    body = claude_code_request(12, tail="image", stream=stream)
    if betas:
        body["extra_headers"] = {"anthropic-beta": betas}
    direct = send(fake, "messages", body, mode=mode)
    session = tight_session("messages", body)
    wrapped = send(fake, "messages", body, mode=mode, session=session)
    assert wrapped.decision.code == "compiled"
    sent = wrapped.record.body
    assert sent["thinking"] == {
        "type": "adaptive",
        "block_binding": {"prefix_mismatch_behavior": "drop_block"},
    }
    rest = {k: v for k, v in sent.items() if k not in ("messages", "thinking")}
    assert rest == {
        k: v for k, v in direct.record.body.items() if k not in ("messages", "thinking")
    }
    expected = f"{betas},{BINDING_BETA}" if betas else BINDING_BETA
    assert wrapped.record.headers["anthropic-beta"] == expected
    original = direct.record.body["messages"]
    assert_only_old_history_changed("messages", original, sent["messages"])
    latest = max(i for i, m in enumerate(original) if m["role"] == "assistant")
    assert original[latest]["content"][0]["type"] == "thinking"
    assert original[latest] in sent["messages"]  # the latest thinking, untouched
    assert sent["messages"][-1]["content"][0]["content"][0]["type"] == "image"  # kept verbatim
    assert wrapped.record.status == 200  # the fake refuses block_binding without the beta
    assert_returned_unchanged(wrapped, "messages", body, mode)


def test_drop_block_keeps_betas_set_as_the_clients_default_headers(fake):
    body = claude_code_request(12, tail="tool_result")
    session = tight_session("messages", body, thinking_prefix="drop_block")
    wrapped = send(
        fake, "messages", body, session=session, default_headers={"anthropic-beta": CLAUDE_BETAS}
    )
    assert wrapped.decision.code == "compiled"
    assert wrapped.record.headers["anthropic-beta"] == f"{CLAUDE_BETAS},{BINDING_BETA}"


def test_drop_block_keeps_betas_whatever_the_header_names_case(fake):
    body = {
        **claude_code_request(12, tail="tool_result"),
        "extra_headers": {"Anthropic-Beta": CLAUDE_BETAS},
    }
    session = tight_session("messages", body, thinking_prefix="drop_block")
    wrapped = send(fake, "messages", body, session=session)
    assert wrapped.decision.code == "compiled"
    assert wrapped.record.headers["anthropic-beta"] == f"{CLAUDE_BETAS},{BINDING_BETA}"


def test_thinking_only_inside_the_compiled_region_is_dropped_not_bound(fake):
    body = claude_code_request(12, tail="tool_result")
    for message in body["messages"][-8:]:  # the turns that stay raw have no thinking
        if message["role"] == "assistant":
            message["content"] = [b for b in message["content"] if b["type"] != "thinking"]
    wrapped = send(fake, "messages", body, session=tight_session("messages", body))
    assert wrapped.decision.code == "compiled"
    sent = wrapped.record.body["messages"]
    assert not any(
        block.get("type") == "thinking"
        for message in sent
        if isinstance(message["content"], list)
        for block in message["content"]
    )
    assert "block_binding" not in wrapped.record.body.get("thinking", {})


# ---------------------------------------------------------------------- provider errors


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_provider_errors_reach_the_caller_as_the_sdks_own_exceptions(fake, mode):
    fake.configure(error=ProviderError(529, "Overloaded"))
    body = claude_code_request(12, thinking=False, stream=True)
    session = tight_session("messages", body)
    with pytest.raises(anthropic.OverloadedError) as caught:
        send(fake, "messages", body, mode=mode, session=session)
    assert caught.value.body["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    assert session.decisions[-1].code == "compiled"  # decided and sent; the provider refused
    assert fake.last.body["messages"] != body["messages"]

    fake.configure(error=ProviderError(429, "Rate limit reached", code="rate_limit_exceeded"))
    body = codex_request(2)
    with pytest.raises(openai.RateLimitError) as caught:
        send(fake, "responses", body, mode=mode, session=AutomaticChatSession())
    assert caught.value.code == "rate_limit_exceeded"
