"""AutomaticChatSession driven through the real openai SDK against a loopback fake server."""

from __future__ import annotations

import itertools
import json
import logging
import re
from collections.abc import Iterator

import openai
import pytest

from chat_fixtures import (
    SYSTEM,
    SpyClient,
    agent_history,
    history_tokens,
    openai_client,
    tool_turn,
)
from fake_providers import FakeProvider, Usage
from tomc.chat import AutomaticChatSession, check_tool_pairing


@pytest.fixture
def server() -> Iterator[FakeProvider]:
    with FakeProvider() as fake:
        yield fake


@pytest.fixture
def client(server: FakeProvider) -> Iterator[openai.OpenAI]:
    with openai_client(server) as sdk:
        yield sdk


OPTIONS = {
    "temperature": 0.25,
    "top_p": 0.9,
    "max_tokens": 512,
    "stop": ["\n\nEND"],
    "seed": 7,
    "user": "u-42",
    "metadata": {"app": "tests"},
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "read_log",
                "description": "Read a log file",
                "parameters": {"type": "object", "properties": {"file": {"type": "string"}}},
            },
        }
    ],
    "tool_choice": "auto",
}


def small_window_session(history, **kwargs) -> AutomaticChatSession:
    """A session whose window is ~60% of the history, so the first request must compile."""
    kwargs.setdefault("deployment_context_limit", int(history_tokens(history) * 0.6) + 512)
    kwargs.setdefault("backoff_thresholds", ())
    kwargs.setdefault("output_reserve", 256)
    return AutomaticChatSession(**kwargs)


def test_passthrough_forwards_the_exact_same_request_body(server, client):
    history = agent_history(3)
    client.chat.completions.create(model="gpt-4o", messages=history, **OPTIONS)
    session = AutomaticChatSession()
    session.create(client, model="gpt-4o", messages=history, **OPTIONS)
    direct, wrapped = server.requests
    assert wrapped.body == direct.body
    assert (session.last_decision.action, session.last_decision.code) == ("passthrough", "fits")


def test_compiled_request_changes_only_messages(server, client):
    history = agent_history(24)
    session = small_window_session(history)
    session.create(client, model="anything", messages=history, **OPTIONS)
    body = server.requests[-1].body
    assert session.last_decision.action == "compiled"
    assert {k: v for k, v in body.items() if k != "messages"} == {
        "model": "anything",
        **json.loads(json.dumps(OPTIONS)),
    }
    assert len(body["messages"]) < len(history)
    assert body["max_tokens"] == 512  # the output limit is read for planning, never rewritten


def test_returns_the_clients_object_itself(client):
    spy = SpyClient(client)
    session = AutomaticChatSession()
    history = agent_history(2)
    result = session.create(spy, model="gpt-4o", messages=history)
    assert result is spy.returned[-1]
    assert isinstance(result, openai.types.chat.ChatCompletion)
    assert result.choices[0].message.content == "Sure: the answer is 42."


def test_stream_is_returned_unconsumed_and_chunk_identical(server, client):
    history = agent_history(24)
    session = small_window_session(history)
    spy = SpyClient(client)
    stream = session.create(
        spy, model="m", messages=history, stream=True, stream_options={"include_usage": True}
    )
    assert stream is spy.returned[-1]
    assert isinstance(stream, openai.Stream)
    assert session.last_decision.action == "compiled"
    assert session.last_decision.context_hint is not None
    chunks = [chunk.to_dict() for chunk in stream]  # the session has not read any of it
    sent = [json.loads(event[len(b"data: ") :]) for event in server.last.sent[:-1]]
    assert server.last.sent[-1] == b"data: [DONE]\n\n"
    assert chunks == sent
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in sent if c["choices"]) == (
        server.reply.text
    )


def test_protected_messages_are_byte_identical_and_pairing_holds(server, client):
    history = agent_history(24)
    # A developer message deep in old history is kept verbatim too.
    history.insert(6, {"role": "developer", "content": "Prefer short answers. \u00e9\u4e2d"})
    session = small_window_session(history, keep_recent_messages=5)
    session.create(client, model="m", messages=history)
    assert session.last_decision.action == "compiled"
    sent = server.requests[-1].body["messages"]
    memory_index = 2  # system, developer, memory
    assert sent[0] == SYSTEM and sent[1] == history[6]
    assert sent[memory_index]["role"] == "user"
    assert sent[memory_index]["content"].startswith("[TOMC memory of ")
    tail = sent[memory_index + 1 :]
    assert [json.dumps(m, sort_keys=True) for m in tail] == [
        json.dumps(m, sort_keys=True) for m in history[-len(tail) :]
    ]
    assert len(tail) >= 5
    assert tail[-1] == history[-1]  # the latest user task
    assert check_tool_pairing(sent) == []
    assert tail[0]["role"] != "tool"  # no group was split at the boundary


def test_pending_tool_protocol_stays_raw(server, client):
    history = agent_history(24)[:-1]
    history += tool_turn(99, calls=3)[:3]  # user, tool_calls, one result; two still pending
    session = small_window_session(history, keep_recent_messages=0)
    session.prepare(model="m", messages=history)
    sent, decision = session.prepare(model="m", messages=history)
    assert decision.action == "reused"
    assert sent[-3:] == history[-3:]
    assert sent[-3] is history[-3]  # the latest user message, the very same object
    assert check_tool_pairing(sent, allow_pending_tail=True) == []


def test_stable_prefix_across_requests(server, client):
    history = agent_history(24)
    session = small_window_session(
        history, deployment_context_limit=int(history_tokens(history) * 0.9)
    )
    bodies = []
    for turn in range(100, 104):
        session.create(client, model="m", messages=history, task=f"task {turn}")
        bodies.append(server.requests[-1].body["messages"])
        history = history + tool_turn(turn, calls=1, lines=2)
    actions = [d.action for d in session.decisions]
    assert actions == ["compiled", "reused", "reused", "reused"]
    for earlier, later in itertools.pairwise(bodies):
        assert later[: len(earlier)] == earlier  # each request extends the previous one
    assert session.rebuilds == 1


def test_cadence_rebuilds_and_breaks_the_prefix(server, client):
    history = agent_history(24)
    window = int(history_tokens(history) * 0.9)
    session = AutomaticChatSession(
        refresh_policy="cadence",
        refresh_every=1,
        deployment_context_limit=window,
        backoff_thresholds=(),
        keep_recent_messages=3,
        output_reserve=256,
    )
    memories = []
    for turn in range(100, 103):
        session.create(client, model="m", messages=history)
        memories.append(server.requests[-1].body["messages"][1]["content"])
        history = history + tool_turn(turn, calls=1, lines=2)
    assert [d.action for d in session.decisions] == ["compiled"] * 3
    assert session.rebuilds == 3
    assert len(set(memories)) == 3
    every_two = AutomaticChatSession(
        refresh_policy="cadence",
        refresh_every=2,
        deployment_context_limit=window,
        backoff_thresholds=(),
        output_reserve=256,
    )
    for _ in range(4):
        every_two.prepare(model="m", messages=history)
    assert [d.action for d in every_two.decisions] == ["compiled", "reused"] * 2


def test_rebuild_when_history_before_boundary_is_edited():
    history = agent_history(24)
    session = small_window_session(history)
    session.prepare(model="m", messages=history)
    edited = [dict(m) for m in history]
    edited[1]["content"] = "Turn 0: check service s0 twice."
    _, decision = session.prepare(model="m", messages=edited)
    assert decision.code == "compiled"
    assert decision.reason.startswith("history before the boundary was edited")
    assert session.rebuilds == 2


def test_rebuild_when_explicit_budget_changes_or_history_grows():
    history = agent_history(24)
    session = AutomaticChatSession(deployment_context_limit=1_000_000, backoff_thresholds=())
    assert session.prepare(model="m", messages=history)[1].action == "passthrough"
    _, decision = session.prepare(model="m", messages=history, budget_tokens=1500)
    assert (decision.action, decision.memory_budget) == ("compiled", 1500)
    assert session.prepare(model="m", messages=history, budget_tokens=1500)[1].action == "reused"
    _, decision = session.prepare(model="m", messages=history, budget_tokens=1200)
    assert decision.reason.startswith("the explicit budget changed")
    grower = AutomaticChatSession(
        deployment_context_limit=1_000_000, backoff_thresholds=(), stable_growth_tokens=600
    )
    assert grower.prepare(model="m", messages=history)[1].action == "compiled"
    history += tool_turn(50, calls=1, lines=2)
    assert grower.prepare(model="m", messages=history)[1].action == "reused"
    history += tool_turn(51, calls=2, lines=12)
    _, decision = grower.prepare(model="m", messages=history)
    assert decision.action == "compiled" and "stable_growth_tokens=600" in decision.reason


def test_rebuild_when_the_reused_view_no_longer_fits():
    history = agent_history(24)
    session = small_window_session(history)
    session.prepare(model="m", messages=history)
    for turn in range(60, 90):
        history = history + tool_turn(turn)
        _, decision = session.prepare(model="m", messages=history)
        assert decision.tokens_after <= decision.effective_window - decision.output_reserve
        if decision.action == "compiled":
            assert "would not fit" in decision.reason
            break
    else:
        pytest.fail("the view never outgrew the window")
    assert session.rebuilds == 2


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda h: h.__setitem__(
                3, {**h[3], "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}
            ),
            "unsupported_content",
        ),
        (lambda h: h.__setitem__(3, {**h[3], "audio": {"id": "a1"}}), "unsupported_content"),
        (
            lambda h: h.insert(1, {"role": "tool", "tool_call_id": "x", "content": "orphan"}),
            "pairing_broken",
        ),
        (lambda h: h.pop(3), "pairing_broken"),
        (
            lambda h: h.insert(1, {"role": "function", "name": "f", "content": "x"}),
            "unsupported_content",
        ),
    ],
)
def test_unsupported_histories_pass_through_unchanged(server, client, mutate, expected):
    history = agent_history(24)
    mutate(history)
    session = small_window_session(agent_history(24))
    if expected == "pairing_broken":  # the provider rejects it, as it would without the session
        with pytest.raises(openai.BadRequestError, match="tool"):
            session.create(client, model="m", messages=history)
    else:
        session.create(client, model="m", messages=history)
    decision = session.last_decision
    assert (decision.action, decision.code) == ("passthrough", expected)
    assert server.requests[-1].body["messages"] == json.loads(json.dumps(history))


def test_other_passthrough_reasons(monkeypatch):
    history = agent_history(24)
    unknown = AutomaticChatSession()
    sent, decision = unknown.prepare(model="my-private-model", messages=history)
    assert sent is history and decision.code == "unknown_model"
    assert "my-private-model" in decision.reason

    short = [SYSTEM, {"role": "user", "content": "hi " * 3000}]
    _, decision = small_window_session(short, deployment_context_limit=2000).prepare(
        model="m", messages=short
    )
    assert decision.code == "nothing_to_compile"

    _, decision = small_window_session(history, output_reserve=10**6).prepare(
        model="m", messages=history
    )
    assert decision.code == "cannot_fit"

    sent, decision = small_window_session(history).prepare(model="m", messages=iter(history))
    assert decision.code == "invalid_request"
    assert decision.reason == "messages is a list_iterator, not a list"

    plain = [m for m in history if "tool_calls" not in m and m["role"] != "tool"]
    big = small_window_session(plain, budget_tokens=10**6, deployment_context_limit=10**7)
    _, decision = big.prepare(model="m", messages=plain)
    assert decision.code == "no_shrink"

    def explode(*args, **kwargs):
        raise RuntimeError("kernel bug")

    # A compiler that fails sends the safe compaction, within the window, never the whole
    # history (which would go over it).
    failing = small_window_session(plain, compiler=explode, keep_recent_messages=1)
    sent, decision = failing.prepare(model="m", messages=plain)
    assert decision.code == "safe_compaction" and decision.action == "compiled"
    assert "the compiler failed (RuntimeError)" in decision.reason
    assert decision.tokens_after < decision.tokens_before
    assert decision.tokens_after <= decision.effective_window - decision.output_reserve
    memory = next(m["content"] for m in sent if "(safe compaction)" in str(m["content"]))
    assert "the memory could not be compiled because the compiler failed (RuntimeError)" in memory
    assert any(m["content"][:40] in memory for m in plain[1:-1])  # the newest turns, a line each
    assert failing.rebuilds == 1


def test_outputs_with_keys_that_assign_nothing_are_compiled():
    """Tool outputs with ``NAME =`` and ``FOO=`` lines (an empty value) are compiled: the
    values reader once raised IndexError on them, and every rebuild went out as the safe
    compaction instead (issue 48)."""
    history = agent_history(24)
    for message in history:
        if message["role"] == "tool":
            message["content"] += "\nNAME =\nFOO=\nexport BAR=\nx = '\n\"\n'"
    sent, decision = small_window_session(history).prepare(model="m", messages=history)
    assert (decision.action, decision.code) == ("compiled", "compiled"), decision.reason
    assert not any("(safe compaction)" in str(m["content"]) for m in sent)


def test_backoff_once_at_50_and_once_at_90_percent():
    history = agent_history(10)
    tokens = history_tokens(history)
    session = AutomaticChatSession(
        deployment_context_limit=int(tokens / 0.55), output_reserve=0, keep_recent_messages=2
    )
    session.observe_usage(tokens)  # as if the previous response reported this prompt size
    actions = []
    for turn in range(100, 145):
        _, decision = session.prepare(model="m", messages=history)
        session.observe_usage({"prompt_tokens": decision.tokens_after})
        actions.append((decision.action, decision.reason.split(":")[0]))
        history = history + tool_turn(turn, calls=1, lines=1)
    backoffs = [a for a in actions if a[1] == "backoff"]
    assert len(backoffs) == 2
    assert actions[0] == ("passthrough", "backoff")  # 55% at the first request
    assert actions.index(backoffs[1]) < [a[0] for a in actions].index("compiled")
    assert session.decisions[-1].hint_source == "usage"


def test_backoff_never_sends_an_over_window_request():
    history = agent_history(24)
    session = AutomaticChatSession(
        deployment_context_limit=history_tokens(history) // 2, output_reserve=256
    )
    _, decision = session.prepare(model="m", messages=history)
    assert decision.code == "compiled"
    assert "first crossed 90%" in decision.reason and "would not fit" in decision.reason


def test_usage_from_a_non_streaming_response_is_the_next_hint(server, client):
    server.configure(usage=Usage(input_tokens=777))
    session = AutomaticChatSession(deployment_context_limit=10**6)
    history = agent_history(2)
    session.create(client, model="m", messages=history)
    assert session.last_decision.hint_source == "estimate"
    session.create(client, model="m", messages=history)
    assert (session.last_decision.context_hint, session.last_decision.hint_source) == (
        777,
        "usage",
    )
    session.create(client, model="m", messages=history, stream=True)
    session.create(client, model="m", messages=history)
    assert session.last_decision.hint_source == "estimate"  # a stream carries no hint


def test_native_events_gate_requests(server, client):
    history = agent_history(24)
    session = small_window_session(history, native_cooldown_requests=2)
    started = session.on_native_event(
        "codex",
        {
            "method": "item/started",
            "params": {
                "item": {"type": "contextCompaction", "id": "c1"},
                "threadId": "t",
                "turnId": "u",
            },
        },
    )
    assert started.kind == "started"
    session.create(client, model="m", messages=history)
    assert session.last_decision.code == "native_pause"
    session.on_native_event("claude", {"hook_event_name": "PostCompact", "compact_summary": "s"})
    codes = []
    for _ in range(3):
        session.create(client, model="m", messages=history)
        codes.append(session.last_decision.code)
    assert codes == ["native_cooldown", "native_cooldown", "compiled"]
    assert session.last_decision.action == "compiled"
    assert session.on_native_event("codex", {"method": "thread/tokenUsage/updated"}).kind == (
        "ignored"
    )
    assert session.prepare(model="m", messages=history)[1].action == "reused"


def test_pydantic_messages_from_responses_are_accepted(server, client):
    history = agent_history(24)
    session = small_window_session(history)
    response = session.create(client, model="m", messages=history)
    history = [*history, response.choices[0].message, {"role": "user", "content": "Thanks."}]
    _, decision = session.prepare(model="m", messages=history)
    assert decision.action == "reused"


def test_profiles_are_looked_up_once_per_model_id():
    history = agent_history(2)
    session = AutomaticChatSession()
    for _ in range(3):
        assert session.prepare(model="gpt-4o", messages=history)[1].effective_window == 128_000
    assert session.profiles.lookups == 1
    _, decision = session.prepare(model="gpt-4o-2024-08-06", messages=history)
    assert decision.effective_window == 128_000 and session.profiles.lookups == 2
    _, decision = session.prepare(model="gpt-4o", messages=history, deployment_context_limit=9000)
    assert decision.effective_window == 9000
    custom = AutomaticChatSession(
        model_profiles={"gpt-4o": {"context_window": 5000, "source": "our gateway"}}
    )
    assert custom.prepare(model="gpt-4o", messages=history)[1].effective_window == 5000


def test_every_decision_is_logged(caplog):
    history = agent_history(24)
    session = small_window_session(history)
    with caplog.at_level(logging.INFO, logger="tomc.chat"):
        session.prepare(model="m", messages=history)
        session.prepare(model="m", messages=history)
    lines = [r.getMessage() for r in caplog.records if r.name == "tomc.chat"]
    assert lines[0].startswith("request 1 compiled [compiled build]:")
    assert lines[1].startswith("request 2 reused [reused]:")
    # Each line is the request's account: how long it took, what it has cost so far by the
    # session's own estimate, labelled so (the provider's bill is logged apart, as "billed").
    assert all(
        re.search(r"prepared in [\d.]+ ms; TOMC's estimate so far: \d+ sent against \d+", line)
        for line in lines
    )
    assert not any("billed" in line for line in lines)
    assert session.last_decision.to_dict()["rebuilds"] == 1


def test_the_callers_history_is_never_mutated():
    history = agent_history(24)
    snapshot = json.dumps(history, sort_keys=True)
    session = small_window_session(history)
    sent, _ = session.prepare(model="m", messages=history)
    sent.append({"role": "user", "content": "appended to the view only"})
    assert json.dumps(history, sort_keys=True) == snapshot


def test_context_target_keeps_the_prompt_under_it_whatever_the_model():
    history = agent_history(40)
    total = history_tokens(history)
    target = total // 2
    # An unlisted model: the target alone is enough to compact it.
    session = AutomaticChatSession(context_target=target, backoff_thresholds=())
    sent, decision = session.prepare(
        model="my-private-model", messages=history, options={"max_tokens": 64_000}
    )
    assert decision.action == "compiled"
    assert decision.context_target == target
    # The output reservation is the window's business: only the prompt counts against a target.
    assert decision.tokens_after <= target < decision.tokens_before
    assert decision.effective_window == target + 64_000
    # A per-request target wins over the session's, and a history under it passes unchanged.
    sent, decision = AutomaticChatSession(context_target=10).prepare(
        model="gpt-4o", messages=history, context_target=total * 2
    )
    assert sent is history and decision.code == "fits"
    assert decision.context_target == total * 2


def test_an_exactly_counted_model_keeps_the_room_the_provider_counts_beyond_it():
    # The provider counts its own framing too: 5% more than the exact count of a large prompt
    # keeps 5% more room under the target from then on; a small prompt's ratio teaches nothing.
    history = agent_history(40)
    profiles = {"gpt-4o": {"context_window": 1_000_000, "encoding": "o200k_base"}}
    session = AutomaticChatSession(model_profiles=profiles)
    target = history_tokens(history) * 2
    _, decision = session.prepare(model="gpt-4o", messages=history[:3], context_target=target)
    session.observe_usage(decision.tokens_after * 3)  # tiny: not learned
    _, decision = session.prepare(model="gpt-4o", messages=history, context_target=target)
    assert session.state.margins == {}
    assert f"of {target:,} tokens available" in decision.reason
    session.observe_usage(int(decision.tokens_after * 1.05))
    assert session.state.margins["o200k_base"] == pytest.approx(1.05, abs=1e-3)
    _, decision = session.prepare(model="gpt-4o", messages=history, context_target=target)
    assert f"of {int(target / session.state.margins['o200k_base']):,} tokens available" in (
        decision.reason
    )
