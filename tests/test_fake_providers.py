"""The fake provider speaks each wire format as the official SDKs read it, and records exactly.

These tests hold the fake to the real formats, so that tests built on it (the session's SDK
tests, the gateway's) test against something the SDKs themselves accept: its streams accumulate,
through the SDKs' own stream helpers, into the same objects as its non-streaming answers.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import anthropic
import httpx2
import openai
import pytest

from dialect_fixtures import same_content, sdk_clients
from fake_providers import BINDING_BETA, FakeProvider, ProviderError, Reply, Usage

USER = [{"role": "user", "content": "Where is the retry cap set?"}]
KINDS = ("text", "tool_call", "thinking_tool_call")


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as server:
        yield server


@pytest.fixture
def clients(fake: FakeProvider) -> Iterator[tuple[anthropic.Anthropic, openai.OpenAI]]:
    with sdk_clients(fake) as pair:
        yield pair


def _messages(client: anthropic.Anthropic, **options) -> anthropic.types.Message:
    return client.messages.create(model="claude-opus-4-8", max_tokens=64, messages=USER, **options)


def _responses(client: openai.OpenAI, **options):
    return client.responses.create(
        model="gpt-5.3-codex", input="Where is the retry cap set?", **options
    )


def test_every_route_answers_under_both_prefixes(fake, clients):
    claude, gpt = clients
    assert _messages(claude).content[0].text == fake.reply.text
    assert fake.last.target == "/v1/messages"
    beta = claude.beta.messages.create(  # Claude Code's path: /v1/messages?beta=true
        model="claude-opus-4-8",
        max_tokens=64,
        messages=USER,
        betas=["effort-2025-11-24"],
        extra_query={"beta": "true"},
    )
    assert beta.content[0].text == fake.reply.text
    assert (fake.last.path, fake.last.query) == ("/v1/messages", "beta=true")
    assert fake.last.headers["anthropic-beta"] == "effort-2025-11-24"
    counted = claude.messages.count_tokens(model="claude-opus-4-8", messages=USER)
    assert counted.input_tokens == fake.reply.usage.prompt_tokens
    listed = claude.models.list()
    assert [m.id for m in listed.data] == ["claude-opus-4-8", "claude-sonnet-4-6"]
    for base_url in (fake.base_url, fake.chatgpt_url):
        prefix = base_url.removeprefix(fake.root_url)
        client = gpt.with_options(base_url=base_url)
        chat = client.chat.completions.create(model="gpt-4o", messages=USER)
        assert chat.choices[0].message.content == fake.reply.text
        assert fake.last.path == f"{prefix}/chat/completions"
        response = _responses(client)
        assert isinstance(response, openai.types.responses.Response)
        assert response.output_text == fake.reply.text
        assert fake.last.path == f"{prefix}/responses"
        compacted = client.responses.compact(model="gpt-5.3-codex", input=USER)
        assert fake.last.path == f"{prefix}/responses/compact"
        assert [item.type for item in compacted.output] == ["message", "compaction"]
        assert compacted.output[-1].encrypted_content.startswith("gAAAAA")
        assert [m.id for m in client.models.list()] == ["gpt-5.3-codex", "gpt-4o"]
        assert fake.last.path == f"{prefix}/models"


def test_a_compaction_trigger_gets_exactly_one_compaction_item(fake, clients):
    _, gpt = clients
    items = [*USER, {"type": "compaction_trigger"}]
    whole = gpt.responses.create(model="gpt-5.3-codex", input=items)
    assert [item.type for item in whole.output] == ["compaction"]
    events = list(gpt.responses.create(model="gpt-5.3-codex", input=items, stream=True))
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [item.type for item in done] == ["compaction"] and done[0].encrypted_content
    assert events[-1].type == "response.completed"
    assert events[-1].response.output[0].encrypted_content == done[0].encrypted_content


def test_unknown_paths_get_a_404_in_the_openai_shape(fake, clients):
    _, gpt = clients
    with pytest.raises(openai.NotFoundError) as caught:
        gpt.get("/files/file-1", cast_to=object)
    assert caught.value.body["type"] == "invalid_request_error"
    assert fake.last.path == "/v1/files/file-1" and fake.last.status == 404


@pytest.mark.parametrize("kind", KINDS)
def test_anthropic_stream_accumulates_to_the_non_streaming_message(fake, clients, kind):
    claude, _ = clients
    fake.configure(kind=kind, text="Reading the retry module now.", chunk_size=3)
    whole = _messages(claude)
    with claude.messages.stream(model="claude-opus-4-8", max_tokens=64, messages=USER) as stream:
        final = stream.get_final_message()  # the SDK's own accumulator, from the deltas
    assert same_content(final.to_dict()["content"]) == same_content(whole.to_dict()["content"])
    assert (final.stop_reason, final.usage.output_tokens) == (whole.stop_reason, 56)
    names = [name for name, _ in fake.last.events()]
    assert names[0] == "message_start" and names[-2:] == ["message_delta", "message_stop"]
    assert "ping" in names
    events = fake.last.events()
    deltas = [d["delta"]["type"] for name, d in events if name == "content_block_delta"]
    if kind == "thinking_tool_call":
        sent = [d["delta"].get("signature") for _, d in fake.last.events() if "delta" in d]
        assert final.content[0].type == "thinking" and final.content[0].signature in sent
        assert deltas.index("signature_delta") < deltas.index("input_json_delta")
        assert [block.type for block in whole.content] == ["thinking", "tool_use"]
    if kind != "text":
        assert final.content[-1].input == {"file_path": "src/app.py"}
        assert deltas.count("input_json_delta") > 2  # the input arrives in fragments


@pytest.mark.parametrize("kind", KINDS)
def test_responses_stream_accumulates_to_the_non_streaming_response(fake, clients, kind):
    _, gpt = clients
    fake.configure(kind=kind, chunk_size=4)
    include = ["reasoning.encrypted_content"]
    whole = _responses(gpt, include=include)
    with gpt.responses.stream(
        model="gpt-5.3-codex", input="Where is the retry cap set?", include=include
    ) as stream:
        final = stream.get_final_response()
    assert same_content([item.to_dict() for item in final.output]) == same_content(
        [item.to_dict() for item in whole.output]
    )
    assert final.output[-1].id == fake.last.events()[-1][1]["response"]["output"][-1]["id"]
    events = fake.last.events()
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    assert events[0][0] == "response.created" and events[-1][0] == "response.completed"
    assert all(name == data["type"] for name, data in events)
    assert b"[DONE]" not in b"".join(fake.last.sent)  # Responses streams end without it
    if kind == "thinking_tool_call":
        reasoning = whole.output[0]
        assert reasoning.type == "reasoning" and reasoning.encrypted_content.startswith("gAAAA")
        assert _responses(gpt).output[0].encrypted_content is None  # only when included
    if kind != "text":
        call = whole.output[-1]
        assert (call.type, json.loads(call.arguments)) == (
            "function_call",
            {"file_path": "src/app.py"},
        )


@pytest.mark.parametrize("kind", KINDS)
def test_chat_stream_accumulates_to_the_non_streaming_completion(fake, clients, kind):
    _, gpt = clients
    fake.configure(kind=kind, chunk_size=2)
    whole = gpt.chat.completions.create(model="gpt-4o", messages=USER)
    with gpt.chat.completions.stream(model="gpt-4o", messages=USER) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content == whole.choices[0].message.content
    calls = [c.function.to_dict() for c in final.choices[0].message.tool_calls or ()]
    expected = [c.function.to_dict() for c in whole.choices[0].message.tool_calls or ()]
    assert [{**c, "parsed_arguments": None} for c in expected] == calls
    assert (len(calls) == 1) is (kind != "text")
    assert final.choices[0].finish_reason == whole.choices[0].finish_reason
    assert fake.last.sent[-1] == b"data: [DONE]\n\n"


def test_usage_is_reported_in_each_providers_own_terms(fake, clients):
    claude, gpt = clients
    fake.configure(
        usage=Usage(
            input_tokens=100,
            output_tokens=7,
            cache_write_tokens=20,
            cache_read_tokens=3000,
            reasoning_tokens=5,
        )
    )
    usage = _messages(claude).usage
    assert (usage.input_tokens, usage.cache_creation_input_tokens) == (100, 20)
    assert (usage.cache_read_input_tokens, usage.output_tokens) == (3000, 7)
    usage = _responses(gpt).usage
    assert (usage.input_tokens, usage.input_tokens_details.cached_tokens) == (3120, 3000)
    assert usage.output_tokens_details.reasoning_tokens == 5
    usage = gpt.chat.completions.create(model="gpt-4o", messages=USER).usage
    assert (usage.prompt_tokens, usage.prompt_tokens_details.cached_tokens) == (3120, 3000)
    stream = claude.messages.create(
        model="claude-opus-4-8", max_tokens=64, messages=USER, stream=True
    )
    events = list(stream)
    assert events[0].message.usage.cache_read_input_tokens == 3000
    assert events[-2].usage.output_tokens == 7  # message_delta: cumulative counts


def test_errors_use_each_providers_error_json(fake, clients):
    claude, gpt = clients
    fake.configure(error=ProviderError(529, "Overloaded"))
    with pytest.raises(anthropic.OverloadedError) as caught:
        _messages(claude, stream=True)
    assert caught.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
        "request_id": caught.value.body["request_id"],
    }
    assert fake.last.response_headers["request-id"] == caught.value.body["request_id"]
    fake.configure(error=ProviderError(429, "Rate limit reached", code="rate_limit_exceeded"))
    with pytest.raises(openai.RateLimitError) as caught:
        _responses(gpt, stream=True)
    assert caught.value.body == {
        "message": "Rate limit reached",
        "type": "rate_limit_exceeded",
        "param": None,
        "code": "rate_limit_exceeded",
    }
    assert json.loads(fake.last.sent[0]) == {"error": caught.value.body}
    with pytest.raises(anthropic.RateLimitError) as caught:
        _messages(claude)
    assert caught.value.body["error"]["type"] == "rate_limit_error"


def test_a_mid_stream_error_arrives_as_each_providers_error_event(fake, clients):
    claude, gpt = clients
    fake.configure(mid_stream_error=ProviderError(529, "Overloaded"), mid_stream_error_after=2)
    received = []
    with pytest.raises(anthropic.APIStatusError, match="overloaded_error"):
        for event in _messages(claude, stream=True):
            received.append(event.type)
    assert received == ["message_start", "content_block_start"]
    assert fake.last.status == 200 and fake.last.complete
    assert fake.last.events()[-1] == (
        "error",
        {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
    )
    events = list(_responses(gpt, stream=True))
    assert [e.type for e in events] == ["response.created", "response.in_progress", "error"]
    assert (events[-1].code, events[-1].message) == ("server_error", "Overloaded")
    with pytest.raises(openai.APIError, match="Overloaded"):
        list(gpt.chat.completions.create(model="gpt-4o", messages=USER, stream=True))


def test_events_leave_one_by_one_with_the_configured_delay(fake, clients):
    claude, _ = clients
    fake.configure(event_delay_s=0.05, text="one two three", chunk_size=4)
    stream = _messages(claude, stream=True)
    arrived = [time.monotonic() for _ in stream]
    record = fake.last
    gaps = [b - a for a, b in zip(record.sent_at, record.sent_at[1:], strict=False)]
    assert min(gaps) >= 0.045
    assert arrived[0] < record.sent_at[-1]  # the first event was read before the last was sent
    assert record.complete


@pytest.mark.parametrize("api", ["messages", "responses", "chat"])
def test_a_disconnect_after_n_events_breaks_the_stream(fake, clients, api):
    claude, gpt = clients
    fake.configure(disconnect_after=3)
    received = []
    with pytest.raises((anthropic.APIConnectionError, openai.APIConnectionError, httpx2.HTTPError)):
        if api == "messages":
            stream = _messages(claude, stream=True)
        elif api == "responses":
            stream = _responses(gpt, stream=True)
        else:
            stream = gpt.chat.completions.create(model="gpt-4o", messages=USER, stream=True)
        for event in stream:
            received.append(event)
    record = fake.last
    assert len(record.sent) == 3 and not record.complete
    assert len(received) == (2 if api == "messages" else 3)  # Anthropic's SDK skips the ping


def test_a_stall_times_out_the_client_and_the_fake_notices(fake):
    fake.configure(stall=True)
    with sdk_clients(fake, timeout=0.3) as (claude, gpt):
        with pytest.raises(anthropic.APITimeoutError):
            _messages(claude)
        with pytest.raises(openai.APITimeoutError):
            _responses(gpt)
    deadline = time.monotonic() + 5
    while not all(r.client_disconnected for r in fake.requests) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [r.client_disconnected for r in fake.requests] == [True, True]
    assert [r.status for r in fake.requests] == [None, None]  # nothing was ever sent


def test_a_stall_mid_stream_times_out_the_reader(fake):
    fake.configure(stall_after=2)
    with sdk_clients(fake, timeout=0.3) as (_, gpt):
        stream = _responses(gpt, stream=True)
        received = []
        with pytest.raises(openai.APITimeoutError):
            for event in stream:
                received.append(event.type)
    assert received == ["response.created", "response.in_progress"]


def test_the_providers_rules_are_enforced_with_their_wording(fake, clients):
    claude, gpt = clients
    thinking = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
    with pytest.raises(anthropic.BadRequestError, match="Extra inputs are not permitted"):
        _messages(claude, thinking=thinking)
    accepted = _messages(claude, thinking=thinking, extra_headers={"anthropic-beta": BINDING_BETA})
    assert accepted.to_dict()["input_transformations"] == []
    orphan = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1"}]},
    ]
    with pytest.raises(anthropic.BadRequestError, match="unexpected `tool_use_id`"):
        claude.messages.create(model="claude-opus-4-8", max_tokens=8, messages=orphan)
    unanswered = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_2", "name": "Read", "input": {}}],
        },
        {"role": "user", "content": "and?"},
    ]
    with pytest.raises(anthropic.BadRequestError, match="toolu_2"):
        claude.messages.create(model="claude-opus-4-8", max_tokens=8, messages=unanswered)
    output = [{"type": "function_call_output", "call_id": "call_9", "output": "x"}]
    with pytest.raises(openai.BadRequestError, match=r"No tool call found .* call_9"):
        gpt.responses.create(model="gpt-5.3-codex", input=output)
    calls = [
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_7", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": "hi"},
    ]
    with pytest.raises(openai.BadRequestError, match="call_7"):
        gpt.chat.completions.create(model="gpt-4o", messages=calls)
    fake.validate = False
    assert gpt.chat.completions.create(model="gpt-4o", messages=calls).choices


def test_requests_and_answers_are_recorded_byte_for_byte(fake):
    raw = (
        b'{"model": "gpt-4o",  "stream": true,\n'
        b' "messages": [{"role": "user", "content": "\\u00e9"}]}'
    )
    with httpx2.Client(trust_env=False) as http:
        with http.stream(
            "POST",
            fake.base_url + "/chat/completions?trace=1",
            content=raw,
            headers=[("Content-Type", "application/json"), ("X-Tag", "a"), ("X-Tag", "b")],
        ) as response:
            received = b"".join(response.iter_raw())
        record = fake.last
        assert record.raw == raw and record.body["messages"][0]["content"] == "\u00e9"
        assert (record.method, record.path, record.query) == (
            "POST",
            "/v1/chat/completions",
            "trace=1",
        )
        assert record.headers["x-tag"] == "a, b" and ("x-tag", "b") in record.raw_headers
        assert received == b"".join(record.sent)
        assert record.streamed and record.response_headers["content-type"].startswith("text/event")
        answer = http.post(fake.base_url + "/responses", json={"model": "m", "input": "hi"})
        assert answer.content == fake.last.sent[0] and fake.last.json() == answer.json()


def test_scripted_replies_are_used_in_order_then_the_default(fake, clients):
    claude, _ = clients
    fake.script(Reply(text="first"), Reply(error=ProviderError(500, "boom")))
    assert _messages(claude).content[0].text == "first"
    with pytest.raises(anthropic.InternalServerError):
        _messages(claude)
    assert _messages(claude).content[0].text == fake.reply.text
    assert [r.status for r in fake.requests] == [200, 500, 200]
