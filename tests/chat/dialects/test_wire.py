"""Each dialect's wire facts (what the gateway asks of a format), the registry, and the
test-only Gemini-like format that proves a new format needs nothing else."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chat.dialects.gemini_like import GeminiLike, from_chat, gemini_path, registered
from dialect_fixtures import chat_agent_request, claude_code_request, codex_request
from tomc import InvalidOptionError
from tomc._gateway.settings import DEFAULT_UPSTREAMS, GatewaySettings
from tomc.chat import AutomaticChatSession
from tomc.chat.dialects import (
    DIALECTS,
    PassThrough,
    Upstream,
    WireUsage,
    dialect_for,
    guess_dialects,
    register_dialect,
    unregister_dialect,
)
from tomc.chat.dialects._wire import whole_prompt_usage
from tomc.testing import wire
from tomc.testing.wire import Reply, Usage

CHAT, MESSAGES, RESPONSES = DIALECTS["chat"], DIALECTS["messages"], DIALECTS["responses"]
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
USAGE = Usage(input_tokens=900, output_tokens=77, cache_write_tokens=100, cache_read_tokens=9000)


@pytest.fixture
def gemini() -> Iterator[GeminiLike]:
    with registered() as dialect:
        yield dialect


def names(dialects: list[Any]) -> list[str]:
    return [dialect.name for dialect in dialects]


# ---------------------------------------------------------------------- the guess


@pytest.mark.parametrize(
    ("body", "guessed"),
    [
        ({"messages": []}, ["chat", "messages"]),
        ({"input": []}, ["responses"]),
        ({"input": "hi"}, ["responses"]),
        ({"input": [], "messages": []}, ["chat", "messages"]),
        ({"model": "m"}, ["chat", "messages"]),
        ({"contents": []}, ["chat", "messages"]),  # unknown until a format claims it
    ],
)
def test_a_body_is_guessed_by_the_keys_its_format_claims(body, guessed):
    assert names(guess_dialects(body)) == guessed
    assert dialect_for(None, body).name == guessed[0]


def test_a_registered_format_claims_its_bodies(gemini):
    assert names(guess_dialects({"contents": []})) == ["gemini"]
    assert dialect_for(None, {"contents": []}) is gemini
    assert names(guess_dialects({"messages": []})) == ["chat", "messages"]


# ---------------------------------------------------------------------- paths and upstreams


@pytest.mark.parametrize(
    ("path", "served_by"),
    [
        ("/v1/chat/completions", "chat"),
        ("/v1/messages", "messages"),
        ("/v1/responses", "responses"),
        ("/v1/messages/count_tokens", None),
        ("/v1/responses/compact", None),
        ("/v1/models", None),
        (gemini_path("gemini-2.5-pro"), "gemini"),
        (gemini_path("gemini-2.5-flash", stream=True), "gemini"),
        ("/v1beta/models/gemini-2.5-pro:countTokens", None),
    ],
)
def test_each_format_serves_its_own_paths(gemini, path, served_by):
    serving = [name for name, dialect in DIALECTS.items() if dialect.serves(path)]
    assert serving == ([served_by] if served_by else [])


def test_paths_no_format_serves_are_owned_by_their_provider(gemini):
    assert MESSAGES.owns("/v1/messages/count_tokens", {})
    assert MESSAGES.owns("/v1/models", {"anthropic-version": "2023-06-01"})
    assert MESSAGES.owns("/v1/models", {"x-api-key": "k"})
    assert not MESSAGES.owns("/v1/models", {"authorization": "Bearer k"})
    assert not CHAT.owns("/v1/models", {}) and not RESPONSES.owns("/v1/responses/compact", {})
    assert gemini.owns("/v1beta/models", {}) and gemini.owns("/x", {"x-goog-api-key": "k"})
    assert RESPONSES.compacts("/v1/responses/compact")
    assert not any(d.compacts("/v1/responses") for d in DIALECTS.values())


def test_upstreams_and_how_a_path_joins_their_base_url():
    openai, chatgpt = CHAT.upstreams
    assert RESPONSES.upstreams == CHAT.upstreams
    assert [CHAT.upstream({}), RESPONSES.upstream({})] == [openai, openai]
    account = {"chatgpt-account-id": "acct"}
    assert [CHAT.upstream(account), RESPONSES.upstream(account)] == [chatgpt, chatgpt]
    (anthropic,) = MESSAGES.upstreams
    assert MESSAGES.upstream(account) is anthropic
    assert openai.join("https://o.example/v1", "/v1/responses") == "https://o.example/v1/responses"
    assert openai.join("https://o.example/v1", "/v1") == "https://o.example/v1"
    assert openai.join("https://o.example/v1", "/v10/x") == "https://o.example/v1/v10/x"
    assert anthropic.join("https://a.example", "/v1/messages") == "https://a.example/v1/messages"
    assert Upstream("k", "https://k.example").join("https://b", "/p") == "https://b/p"


def test_a_registered_formats_upstream_is_a_known_default(gemini):
    assert dict(DEFAULT_UPSTREAMS)["gemini"] == "https://generativelanguage.googleapis.com"
    assert GatewaySettings().upstream("gemini") == "https://generativelanguage.googleapis.com"
    assert GatewaySettings(upstreams={"gemini": "http://127.0.0.1:1/"}).upstream("gemini") == (
        "http://127.0.0.1:1"
    )


def test_without_the_format_its_upstream_kind_is_refused():
    assert set(DEFAULT_UPSTREAMS) == {"anthropic", "openai", "chatgpt"}
    with pytest.raises(InvalidOptionError, match="unknown upstream kind"):
        GatewaySettings(upstreams={"gemini": "http://127.0.0.1:1"})


# ---------------------------------------------------------------------- model and conversation


def test_the_model_is_in_the_body_or_in_the_url(gemini):
    for dialect in (CHAT, MESSAGES, RESPONSES):
        assert dialect.model_of("/v1/anything", {"model": "gpt-x"}) == "gpt-x"
        assert dialect.model_of("/v1/anything", {"model": 7}) is None
    assert gemini.model_of(gemini_path("gemini-2.5-pro"), {"model": "no"}) == "gemini-2.5-pro"
    assert gemini.model_of("/v1beta/models", {}) is None


def test_conversation_hints_are_the_clients_own_names():
    chat = chat_agent_request(2)
    assert CHAT.conversation_hint({}, chat) is None
    assert CHAT.conversation_hint({}, {**chat, "user": "u-1"}) == "chat:u-1"
    assert CHAT.conversation_hint({}, {**chat, "user": "u", "prompt_cache_key": "k"}) == "chat:k"
    codex = {k: v for k, v in codex_request(2).items() if k != "prompt_cache_key"}
    assert RESPONSES.conversation_hint({}, codex) is None
    for header in ("session-id", "session_id", "conversation_id"):
        assert RESPONSES.conversation_hint({header: "t-9"}, codex) == "responses:t-9"
    keyed = {**codex, "prompt_cache_key": "thread-1"}
    assert RESPONSES.conversation_hint({"session_id": "t-9"}, keyed) == "responses:thread-1"
    claude = claude_code_request(2)
    session = {"x-claude-code-session-id": "s-1"}
    assert MESSAGES.conversation_hint(session, claude) == "claude:s-1"
    agent = {**session, "x-claude-code-agent-id": "a-2"}
    assert MESSAGES.conversation_hint(agent, claude) == "claude:s-1:agent:a-2"
    as_json = {**claude, "metadata": {"user_id": '{"session_id": "s-3", "device_id": "d"}'}}
    assert MESSAGES.conversation_hint({}, as_json) == "claude:s-3"
    legacy = {**claude, "metadata": {"user_id": "user_ab_account__session_0f1e2d3c-aaaa"}}
    assert MESSAGES.conversation_hint({}, legacy) == "claude:0f1e2d3c-aaaa"
    assert MESSAGES.conversation_hint({}, {**claude, "metadata": {"user_id": "plain"}}) is None


@pytest.mark.parametrize("api", ["chat", "messages", "responses", "gemini"])
def test_a_conversations_seed_stays_while_it_grows_and_differs_between_conversations(api, gemini):
    builders = {
        "chat": chat_agent_request,
        "messages": lambda turns: claude_code_request(turns, thinking=False),
        "responses": codex_request,
        "gemini": lambda turns: from_chat(chat_agent_request(turns)),
    }
    dialect = DIALECTS[api]
    early, later = builders[api](2), builders[api](5)
    assert dialect.conversation_seed(early) == dialect.conversation_seed(later)
    other = {**early, dialect.items_key: []}  # nothing of the first user turn
    assert dialect.conversation_seed(other) != dialect.conversation_seed(early)


# ---------------------------------------------------------------------- usage


def test_anthropic_usage_in_an_answer_and_in_stream_events():
    dropped = ({"type": "thinking_dropped"}, {"type": "thinking_mismatch_allowed"})
    reply = Reply(usage=USAGE, input_transformations=dropped)
    answer = wire.anthropic_message(BODY, 1, reply, binding_beta=True)
    assert MESSAGES.response_usage(answer) == WireUsage(900, 9000, 100, 77, 1)
    start = {"type": "message_start", "message": answer}
    assert MESSAGES.event_usage(start) == (WireUsage(900, 9000, 100, 77, 1), False)
    delta = {"type": "message_delta", "usage": {"output_tokens": 80}}
    assert MESSAGES.event_usage(delta) == (WireUsage(output_tokens=80), True)
    assert MESSAGES.event_usage({"type": "message_delta", "delta": {}}) == (WireUsage(), False)
    assert MESSAGES.event_usage({"type": "ping"}) is None
    assert MESSAGES.response_usage(["not", "an", "answer"]) is None


def test_openai_usage_in_an_answer_and_in_stream_events():
    answer = wire.response_object(BODY, 1, Reply(usage=USAGE))
    assert RESPONSES.response_usage(answer) == WireUsage(900, 9000, 100, 77)
    for kind in ("response.completed", "response.incomplete", "response.failed"):
        event = {"type": kind, "response": answer}
        assert RESPONSES.event_usage(event) == (WireUsage(900, 9000, 100, 77), True)
    assert RESPONSES.event_usage({"type": "response.created", "response": answer}) is None
    completion = wire.chat_completion(BODY, 1, Reply(usage=USAGE))
    assert CHAT.response_usage(completion) == WireUsage(1000, 9000, 0, 77)
    assert CHAT.event_usage(completion) == (WireUsage(1000, 9000, 0, 77), True)
    assert CHAT.event_usage({"choices": [], "usage": None}) is None
    assert CHAT.event_usage({"usage": {"prompt_tokens": "many"}}) is None


def test_gemini_like_usage_accumulates_until_the_finishing_chunk(gemini):
    partial = {"candidates": [{"index": 0}], "usageMetadata": {"promptTokenCount": 10_000}}
    final = {
        "candidates": [{"index": 0, "finishReason": "STOP"}],
        "usageMetadata": {
            "promptTokenCount": 10_000,
            "cachedContentTokenCount": 9000,
            "candidatesTokenCount": 70,
            "thoughtsTokenCount": 7,
        },
    }
    first, closes = gemini.event_usage(partial)
    assert (first, closes) == (WireUsage(10_000, 0, 0, None), False)
    last, closes = gemini.event_usage(final)
    assert (last, closes) == (WireUsage(1000, 9000, 0, 77), True)
    assert first.then(last) == last and last.then(WireUsage()) == last
    assert gemini.event_usage({"candidates": []}) is None
    assert gemini.prompt_tokens(final) == 10_000


def test_usage_figures_add_up_to_the_prompt():
    assert WireUsage(900, 9000, 100).prompt_tokens == 10_000
    assert WireUsage(cache_read_tokens=5).prompt_tokens is None
    assert WireUsage(10).then(WireUsage(output_tokens=3, thinking_dropped=0)) == WireUsage(
        10, output_tokens=3, thinking_dropped=0
    )
    # Cached parts larger than the prompt are capped; a prompt that is no count is no usage.
    assert whole_prompt_usage(100, 150, 20, 1) == WireUsage(0, 100, 0, 1)
    assert whole_prompt_usage(100, 60, 70) == WireUsage(0, 60, 40, None)
    assert whole_prompt_usage(True) is None and whole_prompt_usage(-1) is None


# ---------------------------------------------------------------------- errors


def test_each_format_answers_errors_in_its_own_shape(gemini):
    assert MESSAGES.error_body(502, "down", "api_error") == {
        "type": "error",
        "error": {"type": "api_error", "message": "down"},
    }
    openai = {"error": {"message": "down", "type": "api_error", "param": None, "code": None}}
    assert CHAT.error_body(502, "down", "api_error") == openai
    assert RESPONSES.error_body(502, "down", "api_error") == openai
    assert gemini.error_body(504, "slow", "timeout_error") == {
        "error": {"code": 504, "message": "slow", "status": "DEADLINE_EXCEEDED"}
    }


# ---------------------------------------------------------------------- the registry


def test_the_registry_refuses_duplicates_and_keeps_the_built_in_formats():
    with pytest.raises(InvalidOptionError, match="already registered"):
        register_dialect(DIALECTS["chat"])
    with pytest.raises(InvalidOptionError, match="needs a name"):
        register_dialect(type("Nameless", (), {})())  # type: ignore[arg-type]
    for name in ("chat", "gemini"):
        with pytest.raises(InvalidOptionError, match="can be removed"):
            unregister_dialect(name)
    assert list(DIALECTS) == ["chat", "messages", "responses"]


def test_a_registered_format_is_a_choice_of_the_session_until_removed():
    with registered():
        assert list(DIALECTS) == ["chat", "messages", "responses", "gemini"]
        session = AutomaticChatSession(api="gemini", deployment_context_limit=100_000)
        prepared = session.prepare_request(from_chat(chat_agent_request(2)))
        assert (prepared.decision.api, prepared.decision.code) == ("gemini", "fits")
    assert list(DIALECTS) == ["chat", "messages", "responses"]
    with pytest.raises(InvalidOptionError, match="'chat', 'messages', 'responses'"):
        AutomaticChatSession(api="gemini")


# ---------------------------------------------------------------------- the test-only format


def test_the_gemini_like_history_reads_into_entries(gemini):
    body = from_chat(chat_agent_request(3))
    entries = [gemini.read(item, index)[0] for index, item in enumerate(body["contents"])]
    assert [entry.kind for entry in entries[:4]] == ["user", "assistant", "tool", "assistant"]
    assert len(entries[1].calls) == 2 and entries[2].outputs[0].call_id == entries[1].calls[0].id
    assert gemini.validate(body["contents"]) == []
    assert gemini.validate(body["contents"][:2] + body["contents"][3:])  # results missing
    picture = {"role": "user", "parts": [{"inlineData": {"mimeType": "image/png"}}]}
    assert gemini.read(picture, 0)[0].blocker == "a inlineData part"
    with pytest.raises(PassThrough):
        gemini.read({"role": "function", "parts": []}, 0)
    assert gemini.output_reserve(body) == 4096
