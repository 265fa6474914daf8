"""Joining header values: one rule for the session's extra_headers and the gateway's relay."""

from __future__ import annotations

from types import SimpleNamespace

from tomc._gateway.proxy.relay import forward_headers
from tomc.chat._client import join_headers, with_headers

BETA = "thinking-binding-controls-2026-08-01"


def test_a_value_joins_the_header_of_the_same_name_in_any_case():
    joined = join_headers([("Anthropic-Beta", "a, b"), ("x-app", "cli")], {"anthropic-beta": BETA})
    assert joined == [("Anthropic-Beta", f"a,b,{BETA}"), ("x-app", "cli")]


def test_a_value_already_listed_leaves_the_header_as_it_was():
    headers = [("anthropic-beta", f"a, {BETA}")]
    assert join_headers(headers, {"anthropic-beta": BETA}) == headers


def test_a_missing_header_is_added_from_the_defaults_or_alone():
    assert join_headers([], {"anthropic-beta": BETA}) == [("anthropic-beta", BETA)]
    defaults = {"Anthropic-Beta": "claude-code"}
    joined = join_headers([], {"anthropic-beta": BETA}, defaults)
    assert joined == [("anthropic-beta", f"claude-code,{BETA}")]


def test_the_session_and_the_relay_join_alike():
    client = SimpleNamespace(default_headers={"anthropic-beta": "from-client"})
    body = with_headers(
        {"model": "m", "extra_headers": {"X-Other": "1"}}, {"anthropic-beta": BETA}, client
    )
    assert body["extra_headers"] == {"X-Other": "1", "anthropic-beta": f"from-client,{BETA}"}
    assert with_headers(body, {}, client) is body  # nothing to add: the body as it was
    relayed = forward_headers(
        [("anthropic-beta", "from-client"), ("connection", "keep-alive")], {"anthropic-beta": BETA}
    )
    assert relayed == [("anthropic-beta", f"from-client,{BETA}")]
