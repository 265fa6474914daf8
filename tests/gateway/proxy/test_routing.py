"""Routing a request to its upstream and format, and keying the conversation it belongs to."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from chat.dialects.gemini_like import GeminiLike, from_chat, gemini_path, registered
from dialect_fixtures import chat_agent_request, claude_code_request, codex_request
from tomc._gateway.proxy.routing import (
    api_for_path,
    compaction_api,
    conversation_key,
    request_view,
    route_request,
    wire_body,
)
from tomc._gateway.settings import GatewaySettings

UPSTREAMS = {
    "anthropic": "https://a.example",
    "openai": "https://o.example/v1",
    "chatgpt": "https://c.example/backend-api/codex/",
}
SETTINGS = GatewaySettings(upstreams=UPSTREAMS)
ACCOUNT = {"chatgpt-account-id": "acct-1"}


@pytest.fixture
def gemini() -> Iterator[GeminiLike]:
    with registered() as dialect:
        yield dialect


# ---------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("path", "query", "headers", "route"),
    [
        ("/v1/messages", "beta=true", {}, ("anthropic", "https://a.example/v1/messages?beta=true")),
        ("/v1/messages/count_tokens", "", {}, ("anthropic", "https://a.example/v1/messages/count_tokens")),
        ("/v1/models", "", {"anthropic-version": "1"}, ("anthropic", "https://a.example/v1/models")),
        ("/v1/models", "", {"x-api-key": "k"}, ("anthropic", "https://a.example/v1/models")),
        ("/v1/models", "", {}, ("openai", "https://o.example/v1/models")),
        ("/v1/chat/completions", "", {"x-api-key": "k"}, ("openai", "https://o.example/v1/chat/completions")),
        ("/v1/responses", "", {}, ("openai", "https://o.example/v1/responses")),
        ("/v1/responses", "", ACCOUNT, ("chatgpt", "https://c.example/backend-api/codex/responses")),
        ("/v1/responses/compact", "", ACCOUNT, ("chatgpt", "https://c.example/backend-api/codex/responses/compact")),
        ("/v1/chat/completions", "", ACCOUNT, ("chatgpt", "https://c.example/backend-api/codex/chat/completions")),
        ("/v1", "", {}, ("openai", "https://o.example/v1")),
        ("/models", "a=1", {}, ("openai", "https://o.example/v1/models?a=1")),
    ],
)  # fmt: skip
def test_each_path_goes_to_its_formats_upstream(path, query, headers, route):
    found = route_request(path, query, headers, SETTINGS)
    assert (found.kind, found.url) == route
    assert found.api == api_for_path(path)


def test_only_the_formats_own_paths_are_rewritten():
    assert [api_for_path(p) for p in ("/v1/messages", "/v1/responses", "/v1/chat/completions")] == [
        "messages",
        "responses",
        "chat",
    ]
    for path in ("/v1/messages/count_tokens", "/v1/responses/compact", "/v1/models", "/"):
        assert api_for_path(path) is None
    assert compaction_api("/v1/responses/compact") == "responses"
    assert compaction_api("/v1/responses") is None


def test_a_registered_format_routes_by_its_own_paths(gemini):
    settings = GatewaySettings(upstreams={**UPSTREAMS, "gemini": "https://g.example"})
    path = gemini_path("gemini-2.5-pro", stream=True)
    found = route_request(path, "alt=sse", {"x-goog-api-key": "k"}, settings)
    assert (found.kind, found.url, found.api) == (
        "gemini",
        f"https://g.example{path}?alt=sse",
        "gemini",
    )
    listed = route_request("/v1beta/models", "", {}, settings)
    assert (listed.kind, listed.api) == ("gemini", None)
    assert route_request("/v1/models", "", {}, settings).kind == "openai"


# ---------------------------------------------------------------------- the model's place


def test_the_session_sees_the_model_the_url_names_and_the_upstream_never_does(gemini):
    body = from_chat(chat_agent_request(2))
    path = gemini_path("gemini-2.5-pro")
    view = request_view("gemini", path, body)
    assert view["model"] == "gemini-2.5-pro" and "model" not in body
    rewritten = {**view, "contents": view["contents"][-2:]}
    assert wire_body(body, view, rewritten) == {**body, "contents": body["contents"][-2:]}
    chat = chat_agent_request(2)
    assert request_view("chat", "/v1/chat/completions", chat) is chat
    assert wire_body(chat, chat, {**chat, "n": 1}) == {**chat, "n": 1}


# ---------------------------------------------------------------------- conversation keys


def key(api: str, body: dict[str, Any], **headers: str) -> str:
    return conversation_key(api, {k.replace("_", "-"): v for k, v in headers.items()}, body)


def unnamed(body: dict[str, Any], field: str) -> dict[str, Any]:
    """``body`` without the field its client names the conversation in."""
    return {k: v for k, v in body.items() if k != field}


def test_a_growing_conversation_keeps_its_key():
    assert key("chat", chat_agent_request(3)) == key("chat", chat_agent_request(9))
    early, later = (unnamed(claude_code_request(n, thinking=False), "metadata") for n in (2, 8))
    assert key("messages", early) == key("messages", later)
    assert key("messages", early).startswith("messages:")
    plain = [unnamed(codex_request(n), "prompt_cache_key") for n in (2, 6)]
    assert key("responses", plain[0]) == key("responses", plain[1])


def test_different_conversations_get_different_keys():
    chat = chat_agent_request(3)
    other_task = {**chat, "messages": [chat["messages"][0], {"role": "user", "content": "Other."}]}
    other_system = {
        **chat,
        "messages": [{"role": "system", "content": "Else."}, *chat["messages"][1:]],
    }
    keys = {key("chat", body) for body in (chat, other_task, other_system)}
    keys.add(key("chat", {**chat, "model": "gpt-4o-mini"}))  # a side request to a small model
    assert len(keys) == 4
    claude = claude_code_request(3, thinking=False)
    sessions = {key("messages", claude, x_claude_code_session_id=s) for s in ("s-1", "s-2")}
    sessions.add(
        key("messages", claude, x_claude_code_session_id="s-1", x_claude_code_agent_id="a")
    )
    assert len(sessions) == 3


def test_the_clients_own_names_are_honoured():
    claude = claude_code_request(3, thinking=False)
    other = claude_code_request(6, thinking=False, tail="tool_result")
    other["messages"][0] = {"role": "user", "content": "An unrelated first turn."}
    model = claude["model"]
    assert key("messages", claude, x_claude_code_session_id="s-1") == f"claude:s-1|{model}"
    assert key("messages", other, x_claude_code_session_id="s-1") == f"claude:s-1|{model}"
    in_metadata = {**other, "metadata": {"user_id": '{"session_id": "s-1"}'}}
    assert key("messages", in_metadata) == f"claude:s-1|{model}"
    codex = codex_request(3)
    assert key("responses", codex, session_id="ignored") == (
        f"responses:{codex['prompt_cache_key']}|{codex['model']}"
    )
    no_key = unnamed(codex, "prompt_cache_key")
    assert key("responses", no_key, session_id="t-9") == f"responses:t-9|{codex['model']}"
    chat = chat_agent_request(3)
    assert key("chat", {**chat, "user": "u-7"}) == f"chat:u-7|{chat['model']}"


def test_a_registered_formats_conversation_is_keyed_by_its_seed_and_url_model(gemini):
    path = gemini_path("gemini-2.5-pro")
    early, later = (request_view("gemini", path, from_chat(chat_agent_request(n))) for n in (2, 7))
    assert key("gemini", early) == key("gemini", later)
    assert key("gemini", early).startswith("gemini:") and key("gemini", early).endswith(
        "|gemini-2.5-pro"
    )
    flash = request_view(
        "gemini", gemini_path("gemini-2.5-flash"), from_chat(chat_agent_request(2))
    )
    assert key("gemini", flash) != key("gemini", early)
