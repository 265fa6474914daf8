"""The providers' own context management, as a request asks for it: TOMC keeps the request under
the size at which the provider would compact or clear (so the same turns are never compacted
twice), passes every field through, and keeps the provider's compaction items byte-identical."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dialect_fixtures import claude_code_request, codex_request, request_tokens
from tomc.chat import AutomaticChatSession
from tomc.chat.dialects import DIALECTS
from tomc.chat.dialects._provider_context import CEILING_SHARE

MESSAGES, RESPONSES = DIALECTS["messages"], DIALECTS["responses"]


def edits(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"edits": list(entries)}


def input_tokens(value: int) -> dict[str, Any]:
    return {"type": "input_tokens", "value": value}


@pytest.mark.parametrize(
    "management, ceiling",
    [
        (edits({"type": "clear_thinking_20251015", "keep": "all"}), None),
        (edits({"type": "compact_20260112"}), 142_500),
        (edits({"type": "compact_20260112", "trigger": input_tokens(60_000)}), 57_000),
        (edits({"type": "clear_tool_uses_20250919"}), 95_000),
        (edits({"type": "clear_tool_uses_20250919", "trigger": input_tokens(80_000)}), 76_000),
        (edits({"type": "clear_tool_uses_20250919", "trigger": {"type": "tool_uses"}}), None),
        (
            edits(
                {"type": "clear_tool_uses_20250919", "trigger": input_tokens(80_000)},
                {"type": "compact_20260112", "trigger": input_tokens(70_000)},
            ),
            66_500,
        ),
        ({"edits": "not a list"}, None),
        (None, None),
    ],
)
def test_an_anthropic_edit_sets_the_ceiling_its_trigger_implies(management, ceiling):
    request = {"model": "claude-opus-4-8", "messages": []}
    if management is not None:
        request["context_management"] = management
    assert MESSAGES.provider_ceiling(request) == ceiling


@given(st.lists(st.integers(min_value=1, max_value=2_000_000), min_size=1, max_size=4))
def test_a_responses_ceiling_is_under_its_smallest_threshold(thresholds):
    management = [{"type": "compaction", "compact_threshold": t} for t in thresholds]
    ceiling = RESPONSES.provider_ceiling({"input": [], "context_management": management})
    assert ceiling is not None and ceiling <= min(thresholds) * CEILING_SHARE
    assert ceiling > min(thresholds) * CEILING_SHARE - 1
    assert RESPONSES.provider_ceiling({"input": [], "truncation": "auto"}) is None


def prepared(api: str, body: dict[str, Any], **options: Any) -> tuple[dict[str, Any], Any]:
    original = copy.deepcopy(body)
    result = AutomaticChatSession().prepare_request(body, api=api, **options)
    assert body == original  # the caller's request is never changed in place
    return result.body, result.decision


@pytest.mark.parametrize(
    "edit",
    [
        {"type": "compact_20260112", "trigger": input_tokens(50_000)},
        {"type": "clear_tool_uses_20250919", "trigger": input_tokens(50_000)},
    ],
)
def test_a_claude_request_is_kept_under_the_providers_trigger(edit):
    body = {**claude_code_request(45, thinking=False), "context_management": edits(edit)}
    assert request_tokens("messages", body) > 50_000
    sent, decision = prepared("messages", body)
    assert decision.context_target == int(50_000 * CEILING_SHARE)
    assert request_tokens("messages", sent) <= 50_000 * CEILING_SHARE
    assert sent["context_management"] == body["context_management"]  # goes out as it came


def test_clearing_thinking_changes_nothing_tomc_does():
    body = claude_code_request(45, thinking=True)
    managed = {**body, "context_management": edits({"type": "clear_thinking_20251015"})}
    plain_sent, plain = prepared("messages", body, context_target=40_000)
    sent, decision = prepared("messages", managed, context_target=40_000)
    assert decision.code == plain.code and decision.context_target == 40_000
    assert sent["messages"] == plain_sent["messages"]
    assert sent["context_management"] == managed["context_management"]


def test_a_claude_compaction_block_is_kept_and_nothing_before_it_is_compiled():
    body = claude_code_request(45, thinking=False)
    messages = body["messages"]
    summary = {"type": "compaction", "content": "Summary of the work so far: retries capped at 5."}
    # An answer of the server's compaction begins with its summary block, then the answer.
    at = next(
        i
        for i, m in enumerate(messages)
        if i > 4 and m["role"] == "assistant" and "tool_use" not in str(m["content"])
    )
    kept = messages[at]["content"]
    blocks = [{"type": "text", "text": kept}] if isinstance(kept, str) else kept
    messages[at] = {"role": "assistant", "content": [summary, *blocks]}
    trigger = input_tokens(50_000)
    body["context_management"] = edits({"type": "compact_20260112", "trigger": trigger})
    sent, decision = prepared("messages", body)
    assert decision.action != "passthrough" and request_tokens("messages", sent) <= 47_500
    index = sent["messages"].index(messages[at])
    assert sent["messages"][: index + 1] == messages[: at + 1]  # up to the summary: untouched


def test_a_responses_request_is_kept_under_its_compaction_threshold():
    body = {
        **codex_request(40),
        "context_management": [{"type": "compaction", "compact_threshold": 50_000}],
        "truncation": "auto",
    }
    sent, decision = prepared("responses", body)
    assert decision.context_target == int(50_000 * CEILING_SHARE)
    assert request_tokens("responses", sent) <= 50_000 * CEILING_SHARE
    assert sent["context_management"] == body["context_management"]
    assert sent["truncation"] == "auto"


def test_the_agents_own_compaction_trigger_goes_out_as_it_came():
    body = codex_request(40)
    body["input"] = [*body["input"], {"type": "compaction_trigger"}]
    result = AutomaticChatSession().prepare_request(body, api="responses", context_target=20_000)
    assert result.body is body and result.decision.code == "agent_compaction"
