"""A rebuild on the clock: past ``compile_deadline_s`` the request goes out with the safe
compaction and the rebuild finishes off the request path for the next one."""

from __future__ import annotations

import threading

import pytest

from chat_fixtures import agent_history, history_tokens
from tomc import InvalidOptionError
from tomc.chat import AutomaticChatSession, _memory


def _session(history, **kwargs) -> AutomaticChatSession:
    return AutomaticChatSession(
        deployment_context_limit=int(history_tokens(history) * 0.6) + 512,
        backoff_thresholds=(),
        output_reserve=256,
        **kwargs,
    )


@pytest.fixture
def slow_compile(monkeypatch):
    """Every region's memory takes ``delay[0]`` seconds more to build (a compile made slow on
    purpose); ``release`` ends every wait at once."""
    build = _memory.build_region_memory
    release = threading.Event()
    delay = [2.0]

    def slow(*args, **kwargs):
        release.wait(delay[0])
        return build(*args, **kwargs)

    monkeypatch.setattr("tomc.chat._rebuild.build_region_memory", slow)
    yield delay, release
    release.set()


def _finished(session: AutomaticChatSession, rebuilds: int) -> bool:
    """Waits for the late rebuild to be installed (the worker's thread to end)."""
    for thread in threading.enumerate():
        if thread.name == "tomc-rebuild":
            thread.join(30)
    return session.rebuilds > rebuilds


def test_a_rebuild_past_its_deadline_sends_the_safe_compaction_then_its_memory(slow_compile):
    delay, release = slow_compile
    history = agent_history(12)
    session = _session(history, compile_deadline_s=0.2)
    sent, decision = session.prepare(model="m", messages=history)
    assert decision.code == "safe_compaction" and decision.action == "compiled"
    assert "could not be compiled in time (within 0.2 s)" in decision.reason
    assert decision.tokens_after <= decision.effective_window - decision.output_reserve
    assert any("(safe compaction)" in str(m.get("content")) for m in sent)
    assert session.rebuilds == 0  # the safe compaction is not frozen

    # While the rebuild runs, requests do not start another: the safe compaction again.
    more = history + agent_history(13)[len(history) : len(history) + 1]
    _, waiting = session.prepare(model="m", messages=more)
    assert waiting.code == "safe_compaction" and "still running" in waiting.reason

    release.set()
    assert _finished(session, 0)
    delay[0] = 0.0
    later, decision = session.prepare(model="m", messages=more)
    assert decision.code == "reused"  # the late rebuild's memory, built for the first request
    assert not any("(safe compaction)" in str(m.get("content")) for m in later)
    assert any("[TOMC memory" in str(m.get("content")) for m in later)


def test_a_rebuild_within_its_deadline_is_the_same_as_without_one():
    history = agent_history(12)
    plain, first = _session(history).prepare(model="m", messages=history)
    timed, second = _session(history, compile_deadline_s=30).prepare(model="m", messages=history)
    assert first.code == second.code == "compiled"
    assert timed == plain


def test_a_late_rebuild_is_dropped_when_the_conversation_moved_on(slow_compile):
    _, release = slow_compile
    history = agent_history(12)
    session = _session(history, compile_deadline_s=0.2)
    _, decision = session.prepare(model="m", messages=history)
    assert decision.code == "safe_compaction"
    session.state = type(session.state)()  # a conversation loaded from elsewhere
    release.set()
    assert not _finished(session, 0)
    assert session.state.frozen is None


def test_the_deadline_must_be_a_positive_number_of_seconds():
    for bad in (0, -1, "1", float("inf"), True):
        with pytest.raises(InvalidOptionError, match="compile_deadline_s"):
            AutomaticChatSession(compile_deadline_s=bad)
    assert AutomaticChatSession(compile_deadline_s=1).options.compile_deadline_s == 1.0
