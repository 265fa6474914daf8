"""ConversationState: a session that loads a saved state decides as the one that saved it."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks import request_overhead
from benchmarks.dialect_convert import RequestConverter
from chat_fixtures import agent_history
from chat_strategies import TEXT, agent_loops
from tomc import TomcError
from tomc.chat import AutomaticChatSession, ConversationState, SessionOptions, SessionStateError
from tomc.chat._native import NativeEvent

MODEL = "state-test-model"


def decided(prepared: Any) -> tuple[str, dict[str, str], dict[str, Any]]:
    """What a prepared request sends and decides, without its measured latency."""
    decision = asdict(prepared.decision)
    decision.pop("compile_latency_s")
    decision.pop("prepare_s")
    body = json.dumps(prepared.body, ensure_ascii=False)
    return body, dict(prepared.headers), decision


def without_latency(state: ConversationState) -> dict[str, Any]:
    data = json.loads(state.to_json())
    for segment in (data["frozen"] or {}).get("segments", ()):
        segment.pop("latency_s")
    return data


@st.composite
def scripts(draw) -> tuple[SessionOptions, str, list[dict], list[tuple[Any, ...]]]:
    """Options, a wire format, an agent's history and what happens to the conversation: requests
    of growing (sometimes shorter or edited) histories, usage reports, native events."""
    if draw(st.booleans()):
        history, window = draw(agent_loops()), draw(st.integers(700, 2500))
    else:  # big tool outputs: rebuilds append blocks before they merge
        history = [request_overhead.SYSTEM, request_overhead.TASK]
        for step in range(draw(st.integers(10, 60))):
            history += request_overhead.agent_step(step, lines=draw(st.integers(5, 30)))
        window = draw(st.integers(3000, 16000))
    profile: dict[str, Any] = {"context_window": window}
    if draw(st.booleans()):
        profile["encoding"] = "o200k_base"  # exact counts; otherwise o200k x margin, learned
    options = SessionOptions(
        model_profiles={MODEL: profile},
        output_reserve=256,
        refresh_policy=draw(st.sampled_from(["stable", "stable", "cadence"])),
        refresh_every=draw(st.integers(1, 3)),
        keep_recent_messages=draw(st.integers(0, 6)),
        min_recent_messages=draw(st.none() | st.integers(0, 6)),
        growth_headroom=draw(st.sampled_from([0.0, 0.1, 0.25, 0.5])),
        stable_growth_tokens=draw(st.none() | st.integers(200, 3000)),
        native_cooldown_requests=draw(st.integers(0, 2)),
        native_pause_limit=draw(st.integers(1, 3)),
        backoff_thresholds=draw(st.sampled_from([(), (0.5, 0.9), (0.3,)])),
    )
    length = min(len(history), draw(st.integers(3, 12)))
    steps: list[tuple[Any, ...]] = []
    for _ in range(draw(st.integers(1, 20))):
        kind = draw(st.sampled_from(["request"] * 6 + ["usage", "native", "edit", "shorter"]))
        if kind == "usage":
            steps.append(("usage", draw(st.floats(0.5, 1.8))))
        elif kind == "native":
            source = draw(st.sampled_from(["codex", "claude", "agent"]))
            steps.append(("native", source, draw(st.sampled_from(["started", "completed"]))))
        elif kind == "edit":
            steps.append(("edit", draw(st.integers(0, length - 1)), draw(TEXT)))
        else:
            grow = -draw(st.integers(1, 3)) if kind == "shorter" else draw(st.integers(0, 6))
            length = max(1, min(len(history), length + grow))
            while length < len(history) and history[length]["role"] == "tool":
                length += 1  # a request holds whole tool groups
            per_call = draw(st.sampled_from([{}, {}, {"budget_tokens": 400}, {"task": "x"}]))
            steps.append(("request", length, per_call))
    return options, draw(st.sampled_from(["chat", "messages", "responses"])), history, steps


NATIVE = {
    ("codex", "started"): {
        "method": "item/started",
        "params": {"item": {"type": "contextCompaction"}},
    },
    ("codex", "completed"): {"method": "thread/compacted"},
    ("claude", "started"): {"hook_event_name": "PreCompact", "trigger": "auto"},
    ("claude", "completed"): {"hook_event_name": "PostCompact"},
}


def feed_native(session: AutomaticChatSession, source: str, kind: str) -> None:
    if source == "agent":
        session.note_compaction("the agent compacted")
    else:
        session.on_native_event(source, NATIVE[(source, kind)])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scripts())
def test_a_state_saved_after_every_request_decides_the_same(script):
    options, dialect, history, steps = script
    history = list(history)
    converter = RequestConverter(dialect)
    kept = AutomaticChatSession(options=options)
    reloaded = AutomaticChatSession(options=options)
    for number, step in enumerate(steps):
        if step[0] == "request":
            _, length, per_call = step
            body = converter.body({"model": MODEL, "max_tokens": 256, "messages": history[:length]})
            # The time is part of a request's input (the cache account): some steps come after
            # the cache has expired.
            now = 1_000.0 + 100.0 * number + (600.0 if number % 5 == 4 else 0.0)
            first = kept.prepare_request(body, api=dialect, now=now, **per_call)
            second = reloaded.prepare_request(body, api=dialect, now=now, **per_call)
            assert decided(second) == decided(first)
            # The saved state goes through JSON text into a new session: no cache survives.
            text = reloaded.state.to_json()
            reloaded = AutomaticChatSession(options=options)
            reloaded.state = ConversationState.from_json(text)
            assert reloaded.state.to_json() == text
        elif step[0] == "usage":
            last = kept.decisions[-1].tokens_after if kept.decisions else 1000
            kept.observe_usage(int(last * step[1]))
            reloaded.observe_usage(int(last * step[1]))
        elif step[0] == "native":
            feed_native(kept, step[1], step[2])
            feed_native(reloaded, step[1], step[2])
        elif step[0] == "edit":
            # A new object, as a caller that rewrites a message would send.
            history[step[1]] = {**history[step[1]], "content": step[2]}
        assert without_latency(reloaded.state) == without_latency(kept.state)


def test_a_state_holds_what_the_session_learned():
    options = SessionOptions(
        model_profiles={MODEL: {"context_window": 3000}}, output_reserve=256, backoff_thresholds=()
    )
    session = AutomaticChatSession(options=options)
    history = agent_history(12)
    prepared = session.prepare_request({"model": MODEL, "messages": history}, api="chat")
    assert prepared.decision.code == "compiled"
    session.observe_usage(prepared.decision.tokens_after * 2)  # the estimate ran low
    session.on_native_event("claude", {"hook_event_name": "PreCompact"})
    state = session.state
    assert (state.requests, state.rebuilds) == (1, 1)
    assert state.frozen is not None and state.frozen.dialect == "chat"
    assert state.margins[""] == 2.0 and state.usage_hint == prepared.decision.tokens_after * 2
    assert state.native.in_progress == NativeEvent("claude", "started", "PreCompact (?)")
    assert state.last_sent == (prepared.decision.tokens_after, "")
    text = state.to_json()
    data = json.loads(text)
    assert data["version"] == 1 and list(data) == sorted(data)
    assert data["margins"] == {"": "0x1.0000000000000p+1"}  # floats as exact hex strings
    assert text.isascii() and ConversationState.from_json(text).to_json() == text
    # A snapshot: later requests do not change it; loading a state copies it.
    session.prepare_request({"model": MODEL, "messages": history}, api="chat")
    assert state.requests == 1 and session.state.requests == 2
    other = AutomaticChatSession(options=options)
    other.state = state
    state.requests = 99
    assert other.state.requests == 1


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("not json", "not JSON"),
        ("[]", "must be a JSON object"),
        ('{"version": 2}', "version 2"),
        ('{"version": 1}', "conversation state has no '"),
    ],
)
def test_a_bad_blob_is_refused_with_its_reason(text, complaint):
    with pytest.raises(SessionStateError, match=complaint) as caught:
        ConversationState.from_json(text)
    assert isinstance(caught.value, TomcError)


def test_a_malformed_field_is_named():
    data = json.loads(ConversationState(requests=3).to_json())
    data["native"]["cooldown_left"] = "two"
    with pytest.raises(SessionStateError, match="native: 'cooldown_left' must be int"):
        ConversationState.from_json(json.dumps(data))
    data = json.loads(ConversationState().to_json())
    data["margins"] = {"": 1.5}
    with pytest.raises(SessionStateError, match="margins"):
        ConversationState.from_json(json.dumps(data))


def test_a_frozen_memory_must_stand_for_the_history_it_covers():
    options = SessionOptions(model_profiles={MODEL: {"context_window": 3000}}, output_reserve=256)
    session = AutomaticChatSession(options=replace(options, backoff_thresholds=()))
    session.prepare_request({"model": MODEL, "messages": agent_history(12)}, api="chat")
    data = json.loads(session.state.to_json())
    assert data["frozen"]["segments"]
    for change, complaint in (
        ({"kind": "notes"}, "not a region"),
        ({"start": 5, "end": 5}, "not a region"),
        ({"end": data["frozen"]["covered"] + 1}, "must end where 'covered' does"),
    ):
        bad = json.loads(json.dumps(data))
        bad["frozen"]["segments"][-1].update(change)
        with pytest.raises(SessionStateError, match=complaint):
            ConversationState.from_json(json.dumps(bad))


def test_only_a_conversation_state_can_be_loaded():
    session = AutomaticChatSession()
    with pytest.raises(TomcError, match="ConversationState"):
        session.state = {"requests": 1}  # type: ignore[assignment]
