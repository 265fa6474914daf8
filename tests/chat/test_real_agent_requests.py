"""The session on what the real agents send (captured from Claude Code 2.1.197 and Codex 0.171
against the loopback fake upstream; tests/chat/fixtures/real_agents/): injected context is kept in
place and is never the task, the agents' own compaction requests pass through, signed thinking
takes the documented route, and the newest memory block carries Anthropic's cache breakpoint."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tomc.chat import AutomaticChatSession
from tomc.chat._memory import CONTINUED_PREFIX
from tomc.chat.dialects import DIALECTS
from tomc.chat.dialects._anthropic_messages import BINDING_BETA, MAX_BREAKPOINTS, _breakpoints

FIXTURES = Path(__file__).parent / "fixtures" / "real_agents"


def fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text("utf-8"))["body"]


def entries(api: str, body: dict[str, Any]) -> list[Any]:
    dialect = DIALECTS[api]
    return [dialect.read(item, i)[0] for i, item in enumerate(dialect.items(body))]


def test_claude_codes_first_message_is_pinned_and_its_task_is_the_users_text():
    body = fixture("claude_first_request")
    first, system = entries("messages", body)[:2]
    assert first.kind == "user" and first.pinned and first.kept
    assert "<system-reminder>" not in first.text
    assert first.text.startswith("There are 24 log files")
    # The agent and skills list Claude Code sends as messages[1] is an instruction, not a blocker.
    assert system.kind == "instruction" and system.blocker is None


def test_codex_context_items_are_instructions_and_the_task_is_the_users():
    body = fixture("codex_first_request")
    read = entries("responses", body)
    kinds = [entry.kind for entry in read]
    assert kinds[-1] == "user" and not read[-1].pinned
    assert all(kind == "instruction" for kind in kinds[:-1])  # tools, developer, environment


@pytest.mark.parametrize(("api", "name"), [("messages", "claude"), ("responses", "codex")])
def test_the_agents_own_compaction_request_passes_through(api, name):
    body = fixture(f"{name}_compaction_request")
    sent = AutomaticChatSession(context_target=2_000).prepare_request(body, api=api)
    assert sent.decision.code == "agent_compaction"
    assert sent.body is body


def test_codex_after_its_own_compaction_keeps_the_summary_in_place():
    body = fixture("codex_after_compaction")
    summary = [e for e in entries("responses", body) if e.kind == "instruction"]
    assert summary  # the handoff summary is the agent's context, never the task


# ---------------------------------------------------------------- compaction of a real session


def grown(body: dict[str, Any], api: str, copies: int) -> dict[str, Any]:
    """The session's finished tool steps repeated ``copies`` times (fresh call ids), so a small
    target forces compaction; the last step and everything after it stay as they are."""
    body = copy.deepcopy(body)
    key = "messages" if api == "messages" else "input"
    items = body[key]
    calls = [
        i
        for i, item in enumerate(items)
        if (api == "messages" and item.get("role") == "assistant")
        or (api == "responses" and item.get("type") in ("function_call", "custom_tool_call"))
    ]
    start, end = calls[0], calls[-1]
    middle = []
    for n in range(copies):
        text = (
            json.dumps(items[start:end])
            .replace('"toolu_', f'"toolu_{n}x')
            .replace('"call_', f'"call_{n}x')
        )
        middle += json.loads(text)
    body[key] = items[:start] + middle + items[end:]
    return body


def test_claude_code_mid_session_is_compacted_with_its_context_in_place():
    body = grown(fixture("claude_mid_session"), "messages", 3)
    session = AutomaticChatSession(context_target=20_000, backoff_thresholds=())
    sent = session.prepare_request(body, api="messages")
    assert sent.decision.code == "compiled", sent.decision.reason
    assert sent.decision.tokens_after <= 20_000
    messages = sent.body["messages"]
    assert messages[0] == body["messages"][0]  # the task with its reminders, verbatim
    assert messages[1] == body["messages"][1]  # the mid-conversation system message, in place
    assert sent.body["system"] == body["system"] and sent.body["tools"] == body["tools"]
    # Thinking in the raw tail: the documented route, with the beta joined by the caller.
    assert sent.body["thinking"]["block_binding"] == {"prefix_mismatch_behavior": "drop_block"}
    assert sent.headers == {"anthropic-beta": BINDING_BETA}
    # Claude Code uses three breakpoints; the newest memory block takes the fourth.
    marks = _breakpoints(sent.body)
    assert len(marks) == MAX_BREAKPOINTS
    memory = [m for m in messages if m not in body["messages"]]
    assert memory[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert DIALECTS["messages"].validate(messages) == []


def test_codex_mid_session_is_compacted_with_its_context_in_place():
    body = grown(fixture("codex_mid_session"), "responses", 3)
    session = AutomaticChatSession(context_target=12_000, backoff_thresholds=())
    sent = session.prepare_request(body, api="responses")
    assert sent.decision.code == "compiled", sent.decision.reason
    assert sent.decision.tokens_after <= 12_000
    before = [i for i in body["input"] if i.get("role") in ("developer", "user")][:6]
    assert sent.body["input"][: len(before)] == before  # tools, developer items, context, task
    assert "cache_control" not in json.dumps(sent.body)
    assert DIALECTS["responses"].validate(sent.body["input"]) == []


def test_appends_keep_every_block_already_sent_and_move_the_breakpoint():
    base = fixture("claude_mid_session")
    session = AutomaticChatSession(context_target=26_000, backoff_thresholds=())
    sent_before: list[Any] = []
    kinds = []
    for copies in range(2, 9):
        sent = session.prepare_request(grown(base, "messages", copies), api="messages")
        if sent.decision.code != "compiled":
            continue
        kinds.append(sent.decision.rebuild)
        memory = [m for m in sent.body["messages"] if is_memory(m)]
        if sent.decision.rebuild == "append":
            # The blocks sent before are the same text; only the newest carries the breakpoint.
            texts = [m["content"][0]["text"] for m in memory]
            assert texts[:-1] == [m["content"][0]["text"] for m in sent_before]
            assert all("cache_control" not in m["content"][-1] for m in memory[:-1])
            assert "cache_control" in memory[-1]["content"][-1]
        sent_before = memory
    assert "append" in kinds


def is_memory(message: dict[str, Any]) -> bool:
    content = message["content"]
    text = content[0].get("text", "") if isinstance(content, list) and content else ""
    return text.startswith(("[TOMC memory", CONTINUED_PREFIX))


def test_no_breakpoint_when_the_agent_does_not_cache_or_has_no_slot():
    body = grown(fixture("claude_mid_session"), "messages", 3)
    plain = json.loads(json.dumps(body).replace('"cache_control": {"type": "ephemeral"}', '"x": 1'))
    plain = json.loads(json.dumps(plain).replace(', "x": 1', "").replace('"x": 1, ', ""))
    sent = AutomaticChatSession(context_target=20_000, backoff_thresholds=()).prepare_request(
        plain, api="messages"
    )
    assert sent.decision.code == "compiled" and _breakpoints(sent.body) == []


@pytest.mark.parametrize(
    ("thinking", "code"),
    [(None, "compiled"), ({"type": "disabled"}, "thinking_bound")],
    ids=["absent", "disabled"],
)
def test_signed_thinking_without_a_thinking_parameter_gets_adaptive(thinking, code):
    body = grown(fixture("claude_mid_session"), "messages", 3)
    body.pop("thinking", None)
    if thinking is not None:
        body["thinking"] = thinking
    session = AutomaticChatSession(context_target=20_000, backoff_thresholds=())
    sent = session.prepare_request(body, api="messages")
    assert sent.decision.code == code
    if code == "compiled":
        # Its history carries signed thinking, so its model thinks by default: "adaptive"
        # changes nothing else, and the stale blocks are dropped instead of refused.
        assert sent.body["thinking"] == {
            "type": "adaptive",
            "block_binding": {"prefix_mismatch_behavior": "drop_block"},
        }
    else:
        assert sent.body is body
