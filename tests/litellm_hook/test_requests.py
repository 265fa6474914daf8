"""Reading LiteLLM's hook arguments in TOMC's terms (no LiteLLM needed): call types, the client's
body and headers, a rewritten body applied back, per-key settings, and reported usage."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tomc._core.errors import InvalidOptionError
from tomc._litellm.requests import (
    apply_body,
    client_body,
    client_headers,
    dialect_of,
    key_settings,
    metadata_of,
    usage_of,
)
from tomc.chat.dialects import DIALECTS


def test_the_three_routes_map_to_their_wire_formats_and_nothing_else_does():
    assert dialect_of("acompletion") is DIALECTS["chat"]
    assert dialect_of("anthropic_messages") is DIALECTS["messages"]
    assert dialect_of("aresponses") is DIALECTS["responses"]
    assert dialect_of("aembedding") is None and dialect_of("moderation") is None


def litellm_data(**fields):
    """``data`` as LiteLLM hands it to a pre-call hook on the Anthropic route."""
    body = {"model": "claude-opus-4-8", "max_tokens": 64, "messages": [], **fields}
    return {
        **body,
        "litellm_call_id": "call-1",
        "litellm_metadata": {"user_api_key_hash": "abc"},
        "proxy_server_request": {
            "headers": {"X-Claude-Code-Session-Id": "s-1", "content-type": "application/json"},
            "body": {**body, "metadata": {"user_id": "u-1"}},
        },
    }


def test_the_body_is_the_clients_fields_as_litellm_will_send_them():
    data = litellm_data(messages=[{"role": "user", "content": "hi"}])
    data["messages"] = [{"role": "user", "content": "changed by an earlier hook"}]
    body = client_body(data, DIALECTS["messages"])
    assert body["messages"] == data["messages"]  # what goes out, not what came in
    assert body["metadata"] == {"user_id": "u-1"}  # the client's own field, which names it
    assert "litellm_call_id" not in body and "proxy_server_request" not in body
    assert client_headers(data)["x-claude-code-session-id"] == "s-1"
    with pytest.raises(ValueError, match="no messages list"):
        client_body({"model": "m"}, DIALECTS["messages"])


def test_a_rewritten_body_replaces_what_changed_and_only_that():
    data = litellm_data(messages=[{"role": "user", "content": "old"}], temperature=0.2)
    view = client_body(data, DIALECTS["messages"])
    sent = {**view, "messages": [{"role": "user", "content": "new"}], "system": "added"}
    del sent["temperature"]
    apply_body(data, view, sent)
    assert data["messages"] == [{"role": "user", "content": "new"}] and data["system"] == "added"
    assert "temperature" not in data
    assert data["litellm_call_id"] == "call-1" and "proxy_server_request" in data


def test_metadata_goes_where_litellm_logs_it():
    anthropic_route = litellm_data()
    metadata_of(anthropic_route)["tomc"] = {"decision": "compiled"}
    assert anthropic_route["litellm_metadata"]["tomc"] == {"decision": "compiled"}
    chat_route = {"messages": [], "metadata": {"user_api_key_hash": "abc"}}
    metadata_of(chat_route)["tomc"] = 1
    assert chat_route["metadata"]["tomc"] == 1
    assert metadata_of({}) == {}


def test_a_key_setting_wins_over_its_teams_and_a_bad_one_is_named():
    key = {"tomc": {"context_target": "off"}}
    team = {"tomc": {"context_target": 60_000}}
    assert key_settings(key, team).target == "off"
    assert key_settings({}, team).target == 60_000
    assert key_settings(None, team).source == "litellm team metadata (60000)"
    assert key_settings({"other": 1}, None).target is None
    with pytest.raises(InvalidOptionError):
        key_settings({"tomc": {"context_target": "lots"}}, None)


def test_usage_is_read_from_litellms_openai_shaped_figures():
    messages = DIALECTS["messages"]
    anthropic_like = SimpleNamespace(
        usage=SimpleNamespace(
            prompt_tokens=12_000,
            completion_tokens=50,
            cache_read_input_tokens=9_000,
            cache_creation_input_tokens=2_000,
            prompt_tokens_details=None,
        )
    )
    usage = usage_of(anthropic_like, messages)
    assert usage is not None and usage.billing == "anthropic"
    assert (usage.prompt_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (
        12_000,
        9_000,
        2_000,
    )
    details = {"cached_tokens": 4_096}
    openai_like = {"usage": {"prompt_tokens": 5_000, "prompt_tokens_details": details}}
    usage = usage_of(openai_like, DIALECTS["chat"])
    assert usage is not None and (usage.billing, usage.cache_read_tokens) == ("openai", 4_096)
    assert usage_of({"usage": {"prompt_tokens": 0}}, messages) is None
    assert usage_of(None, messages) is None


def test_the_hook_module_imports_wherever_litellm_is_installed() -> None:
    """What a proxy's config names (``callbacks: tomc.litellm.hook``) loads: run by the Windows
    suite, whose runtime has litellm; the LiteLLM proxy tests cover it on Linux."""
    custom_logger = pytest.importorskip("litellm.integrations.custom_logger")
    import tomc.litellm

    assert isinstance(tomc.litellm.hook, custom_logger.CustomLogger)
    assert isinstance(tomc.litellm.hook, tomc.litellm.TomcHook)
