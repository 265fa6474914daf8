"""Native compaction events: what is recognised, what is ignored, and never an exception."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tomc.chat import AutomaticChatSession
from tomc.chat._native import NativeState, read_native_event

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


class Gate:
    """The counters with the session's limits, as the session calls them."""

    def __init__(self, cooldown_requests: int, pause_limit: int = 8) -> None:
        self.state = NativeState()
        self.limits = (cooldown_requests, pause_limit)

    def apply(self, event):
        return self.state.apply(event, self.limits[0])

    def gate(self):
        return self.state.gate(*self.limits)


def test_cooldown_counts_logical_requests_then_resumes():
    state = Gate(cooldown_requests=2)
    assert state.gate() is None
    state.apply(read_native_event("claude", {"hook_event_name": "PreCompact", "trigger": "auto"}))
    assert state.gate()[0] == "native_pause" and state.gate()[0] == "native_pause"
    state.apply(read_native_event("codex", codex("item/completed", COMPACTION)))
    assert state.gate() == (
        "native_cooldown",
        "native compaction completed (codex); cooldown request 1 of 2",
    )
    assert state.gate()[1].endswith("2 of 2")
    assert state.gate() is None
    zero = Gate(cooldown_requests=0)
    zero.apply(read_native_event("codex", codex("thread/compacted")))
    assert zero.gate() is None


def test_a_compaction_that_never_completes_pauses_a_bounded_number_of_requests():
    state = Gate(cooldown_requests=2, pause_limit=3)
    state.apply(read_native_event("claude", {"hook_event_name": "PreCompact", "trigger": "auto"}))
    codes = [gate[0] if gate else None for gate in (state.gate() for _ in range(5))]
    assert codes == ["native_pause", "native_pause", "native_pause", None, None]


def test_a_repeated_completion_does_not_restart_the_cooldown():
    state = Gate(cooldown_requests=2)
    state.apply(read_native_event("codex", codex("item/started", COMPACTION)))
    assert state.apply(read_native_event("codex", codex("item/completed", COMPACTION)))
    # The deprecated notification for the same compaction arrives right after.
    assert not state.apply(read_native_event("codex", codex("thread/compacted")))
    assert state.gate()[0] == "native_cooldown"
    assert not state.apply(read_native_event("claude", {"hook_event_name": "PostCompact"}))
    assert state.gate()[0] == "native_cooldown"
    assert state.gate() is None
    # A later, separate compaction does start a new cooldown.
    assert state.apply(read_native_event("claude", {"hook_event_name": "PostCompact"}))
    assert state.gate()[0] == "native_cooldown"


def test_backoff_thresholds_rearm_after_a_completed_compaction():
    history = [{"role": "user", "content": "word " * 600}]
    session = AutomaticChatSession(deployment_context_limit=1000, output_reserve=0)
    assert session.prepare(model="m", messages=history)[1].code == "backoff"
    assert session.prepare(model="m", messages=history)[1].code == "fits"
    session.on_native_event("claude", {"hook_event_name": "PostCompact"})
    session = session  # the same conversation, compacted by its host
    codes = [session.prepare(model="m", messages=history)[1].code for _ in range(3)]
    assert codes == ["native_cooldown", "native_cooldown", "backoff"]


def test_ignored_events_do_not_change_the_session():
    session = AutomaticChatSession(deployment_context_limit=100_000)
    history = [{"role": "user", "content": "hello"}]
    for event in (codex("thread/tokenUsage/updated"), {"enabled": True}, 42):
        assert session.on_native_event("codex", event).recognized is False
    assert not session.prepare(model="m", messages=history)[1].reason.startswith("native")
