"""The tool pairing validator and the rewrite's protection rules, on random histories."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tomc.chat import AutomaticChatSession, check_tool_pairing
from tomc.chat.protocol import protected_boundary, tool_groups, unsupported_reason

WORDS = st.sampled_from(
    ["alpha", "x = 3", "y copies x", "deploy", "failed", "retry", "ok", "build 42", "\u4e2d\u6587"]
)
TEXT = st.lists(st.lists(WORDS, min_size=1, max_size=10).map(" ".join), min_size=1, max_size=6).map(
    "\n".join
)


@st.composite
def tool_group(draw, number: int) -> list[dict]:
    ids = [f"call_{number}_{k}" for k in range(draw(st.integers(1, 3)))]
    calls = [
        {"id": i, "type": "function", "function": {"name": "run", "arguments": json.dumps([i])}}
        for i in ids
    ]
    results = [{"role": "tool", "tool_call_id": i, "content": draw(TEXT)} for i in ids]
    order = draw(st.permutations(results))  # providers accept results in any order
    return [{"role": "assistant", "content": draw(st.none() | TEXT), "tool_calls": calls}, *order]


@st.composite
def histories(draw, pending: bool = False) -> list[dict]:
    history: list[dict] = []
    if draw(st.booleans()):
        history.append({"role": "system", "content": draw(TEXT)})
    for number in range(draw(st.integers(0, 24))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools", "developer"]))
        if kind == "tools":
            history.extend(draw(tool_group(number)))
        else:
            history.append({"role": kind, "content": draw(TEXT)})
    history.append({"role": "user", "content": draw(TEXT)})
    if pending:
        group = draw(tool_group(99))
        history.extend(group[: draw(st.integers(1, len(group) - 1))])
    return history


@given(histories())
def test_generated_histories_satisfy_the_rules(history):
    assert check_tool_pairing(history) == []
    assert unsupported_reason(history) is None


@given(histories(pending=True))
def test_a_pending_tail_is_flagged_unless_allowed(history):
    assert check_tool_pairing(history, allow_pending_tail=True) == []
    problems = check_tool_pairing(history)
    assert len(problems) == 1 and "without results" in problems[0]


@given(histories(), st.data())
def test_dropping_a_result_or_a_call_is_detected(history, data):
    groups = tool_groups(history)
    if not groups:
        return
    group = data.draw(st.sampled_from(groups))
    without_result = list(history)
    del without_result[data.draw(st.integers(group.start + 1, group.end - 1))]
    assert check_tool_pairing(without_result)
    without_call = history[: group.start] + history[group.start + 1 :]
    orphaned = check_tool_pairing(without_call)
    assert any("without a tool call" in p or "answers no open call" in p for p in orphaned)
    duplicated = [*history[: group.end], history[group.end - 1], *history[group.end :]]
    assert any("answered twice" in p for p in check_tool_pairing(duplicated))


@given(histories(pending=True) | histories(), st.integers(0, 8))
def test_the_boundary_never_splits_a_group_or_takes_protected_messages(history, keep):
    boundary = protected_boundary(history, keep)
    tail = history[boundary:]
    assert len(tail) >= min(keep, len(history))
    assert any(m["role"] == "user" for m in tail)
    assert not tail or tail[0]["role"] != "tool"
    for group in tool_groups(history):
        assert not group.start < boundary < group.end
        if group.missing:
            assert boundary <= group.start


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    histories(pending=True) | histories(),
    st.integers(0, 6),
    st.floats(0.3, 1.2),
    st.sampled_from(["stable", "cadence"]),
    st.none() | st.integers(1, 400),
)
def test_rewrites_keep_pairing_and_protected_messages(history, keep, share, policy, budget):
    tokens = sum(len(json.dumps(m)) // 4 + 4 for m in history)
    session = AutomaticChatSession(
        refresh_policy=policy,
        refresh_every=1,
        budget_tokens=budget,
        growth_headroom=0,
        deployment_context_limit=max(64, int(tokens * share)),
        output_reserve=16,
        keep_recent_messages=keep,
        backoff_thresholds=(),
    )
    sent, decision = session.prepare(model="m", messages=history)
    if decision.action == "passthrough":
        assert sent is history
        return
    pending = bool(check_tool_pairing(history))
    assert check_tool_pairing(sent, allow_pending_tail=pending) == []
    memory = next(i for i, m in enumerate(sent) if m["content"].startswith("[TOMC memory"))
    tail = sent[memory + 1 :]
    assert all(a is b for a, b in zip(tail, history[-len(tail) :], strict=True))
    assert len(tail) >= min(keep, len(history))
    latest_user = max(i for i, m in enumerate(history) if m["role"] == "user")
    assert history[latest_user] in tail
    instructions = [m for m in history if m["role"] in ("system", "developer")]
    assert [m for m in sent if m["role"] in ("system", "developer")] == instructions
    assert all(m is not None for m in sent[:memory])
