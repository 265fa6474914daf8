"""Native compaction events: what is recognised, what is ignored, and never an exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tomc.chat import AutomaticChatSession
from tomc.chat.native import NativeState, read_native_event

COMPACTION = {"type": "contextCompaction", "id": "item_9"}


def codex(method: str, item: dict | None = None) -> dict:
    params = {"threadId": "thr_1", "turnId": "turn_3"}
    if item is not None:
        params["item"] = item
    return {"jsonrpc": "2.0", "method": method, "params": params}


@pytest.mark.parametrize(
    ("source", "event", "kind"),
    [
        ("codex", codex("item/started", COMPACTION), "started"),
        ("codex", codex("item/completed", COMPACTION), "completed"),
        ("codex", codex("thread/compacted"), "completed"),
        ("codex", json.dumps(codex("item/completed", COMPACTION)), "completed"),
        ("codex", codex("item/started", {"type": "agentMessage", "id": "m"}), "ignored"),
        ("codex", codex("item/completed"), "ignored"),
        ("codex", codex("thread/tokenUsage/updated"), "ignored"),
        ("codex", {"method": "item/started", "params": "garbage"}, "ignored"),
        ("codex", {"features": {"compaction": {"enabled": True}}}, "ignored"),
        ("claude", {"hook_event_name": "PreCompact", "trigger": "auto"}, "started"),
        ("claude", {"hook_event_name": "PreCompact", "trigger": "manual"}, "started"),
        ("claude", {"hook_event_name": "PostCompact", "compact_summary": "..."}, "completed"),
        ("claude", {"hook_event_name": "SessionStart", "source": "compact"}, "completed"),
        ("claude", {"hook_event_name": "SessionStart", "source": "startup"}, "ignored"),
        ("claude", {"hook_event_name": "PostToolUse"}, "ignored"),
        ("claude", "{not json", "ignored"),
        ("claude", ["PreCompact"], "ignored"),
        ("gemini", {"hook_event_name": "PreCompact"}, "ignored"),
    ],
)
def test_event_classification(source, event, kind):
    assert read_native_event(source, event).kind == kind


@given(
    st.sampled_from(["codex", "claude", "other"]),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
        max_leaves=12,
    ),
)
def test_arbitrary_payloads_never_raise(source, event):
    assert read_native_event(source, event).kind in ("started", "completed", "ignored")


def test_cooldown_counts_logical_requests_then_resumes():
    state = NativeState(cooldown_requests=2)
    assert state.gate() is None
    state.apply(read_native_event("claude", {"hook_event_name": "PreCompact", "trigger": "auto"}))
    assert "in progress" in state.gate() and "in progress" in state.gate()
    state.apply(read_native_event("codex", codex("item/completed", COMPACTION)))
    assert state.gate().endswith("1 of 2")
    assert state.gate().endswith("2 of 2")
    assert state.gate() is None
    zero = NativeState(cooldown_requests=0)
    zero.apply(read_native_event("codex", codex("thread/compacted")))
    assert zero.gate() is None


def test_ignored_events_do_not_change_the_session():
    session = AutomaticChatSession(deployment_context_limit=100_000)
    history = [{"role": "user", "content": "hello"}]
    for event in (codex("thread/tokenUsage/updated"), {"enabled": True}, 42):
        assert session.on_native_event("codex", event).recognized is False
    assert not session.prepare(model="m", messages=history)[1].reason.startswith("native")
