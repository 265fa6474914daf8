"""The cost account and the priced policy: what a rewrite costs under prompt caching.

The account prices requests in the session's own estimates; the checks here price what was
actually sent with an independent oracle (the simulator's whole-message prefix cache, billed as
OpenAI bills a Chat Completions request of a model without priced writes: cached input from
1,024 tokens in 128-token steps at 0.1x, the rest at 1x), request by request. The real agent
CLIs are priced as each provider bills in ``tests/gateway/test_real_agents.py``.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from dialect_fixtures import codex_request
from tomc import InvalidOptionError
from tomc._simulation.simulate import _Pricer, _Tokens, memory_marks
from tomc._simulation.workloads import agent_workload
from tomc.chat import AutomaticChatSession, SessionOptions
from tomc.chat._account import CostAccount, assess
from tomc.chat._state import ConversationState
from tomc.chat.dialects import DIALECTS, CachePricing, CacheTerms

START = 1_800_000_000.0


def test_each_format_reads_its_cache_prices_from_the_request():
    messages, responses, chat = DIALECTS["messages"], DIALECTS["responses"], DIALECTS["chat"]
    plain = {"model": "claude-opus-4-8", "messages": [{"role": "user", "content": "hi"}]}
    assert messages.cache_pricing(plain) == CachePricing(1.25, 0.1, 300.0)
    hour = {
        "model": "claude-opus-4-8",
        "system": [{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "x",
                        "cache_control": {"type": "ephemeral", "ttl": "1h"},
                    }
                ],
            }
        ],
    }
    assert messages.cache_pricing(hour) == CachePricing(2.0, 0.1, 3600.0)
    # OpenAI: writes cost extra only on the models that bill them; retention from the request.
    assert responses.cache_pricing({"model": "gpt-6.2-sol"}) == CachePricing(1.25, 0.1, 600.0)
    assert responses.cache_pricing({"model": "gpt-4o"}) == CachePricing(1.0, 0.1, 600.0)
    kept = {"model": "gpt-4o", "prompt_cache_retention": "24h"}
    assert chat.cache_pricing(kept) == CachePricing(1.0, 0.1, 86_400.0)


def test_a_models_own_terms_replace_the_formats_figures():
    opus = CacheTerms(read=0.05)
    assert opus.price(CachePricing(1.25, 0.1, 300.0)) == CachePricing(1.25, 0.05, 300.0)
    assert opus.price(CachePricing(2.0, 0.1, 3600.0)) == CachePricing(2.0, 0.05, 3600.0)
    sol = CacheTerms(read=0.05, ttl_s=1800)
    assert sol.price(CachePricing(1.25, 0.1, 600.0)) == CachePricing(1.25, 0.05, 1800.0)
    # A request that asks for a longer retention keeps it.
    assert sol.price(CachePricing(1.25, 0.1, 86_400.0)).ttl_s == 86_400.0
    deepseek = CacheTerms(read=0.02, write=1.0)
    assert deepseek.price(CachePricing(2.0, 0.1, 3600.0)) == CachePricing(1.0, 0.02, 3600.0)
    with pytest.raises(ValueError, match="less than a write"):
        CacheTerms(read=1.0, write=1.0)


def test_a_session_prices_requests_at_the_models_own_terms():
    """Two requests 15 minutes apart: the format's 10 minutes have passed (everything is written
    again), the model's own 30-minute retention still reads the first prompt, at 0.02x."""
    history = long_history()
    profiles = {
        "plain-model": {"context_window": 1_000_000},
        "cheap-reads": {"context_window": 1_000_000, "cache": {"read": 0.02, "ttl_s": 1800}},
    }
    bills = {}
    for model in profiles:
        session = AutomaticChatSession(model_profiles=profiles, compile_floor=10**9)
        for cut, at in ((history[:-2], START), (history, START + 900.0)):
            body = {"model": model, "messages": cut, "max_tokens": 1024}
            decision = session.prepare_request(body, api="chat", now=at).decision
            assert decision.action == "passthrough"
            if at == START:
                first = session.state.account.direct_prompt
        second = session.state.account.direct_prompt
        bills[model] = session.state.account.direct
    assert bills["plain-model"] == pytest.approx(first + second)
    assert bills["cheap-reads"] == pytest.approx(first + 0.02 * first + (second - first))


@pytest.mark.parametrize(
    "options",
    [
        {"cost_policy": "cheapest"},
        {"max_overshoot": 1.5},
        {"payback_requests": 0},
        {"cache_ttl_s": -1},
        {"cache_ttl_s": True},
        {"cache_ttl_s": float("inf")},
        {"compile_floor": 0},
        {"memory_floor": -1},
    ],
)
def test_bad_cost_options_are_refused_by_name(options):
    name = next(iter(options))
    with pytest.raises(InvalidOptionError, match=name):
        AutomaticChatSession(**options)


def replay(session: AutomaticChatSession, turns: int = 40, gap_s: float = 10.0):
    """Each request of a synthetic agent session through ``session``, priced by the oracle
    sent and direct: ``(decisions, direct bills, sent bills)`` per request, cumulative."""
    tokens = _Tokens()
    direct, sent = _Pricer("openai"), _Pricer("openai")
    decisions, direct_bills, sent_bills = [], [], []
    now = START
    for history in agent_workload("priced", turns=turns, window=1_000_000).replay():
        now += gap_s
        prepared = session.prepare_request(
            {"model": "simulated", "messages": history, "max_tokens": 1024}, api="chat", now=now
        )
        body = prepared.body["messages"]
        chain, total = tokens.chain(body)
        session.observe_usage(total)
        sent.charge(chain, total, memory_marks(body))
        chain, total = tokens.chain(history)
        direct.charge(chain, total)
        decisions.append(prepared.decision)
        direct_bills.append(direct.billed)
        sent_bills.append(sent.billed)
    return decisions, direct_bills, sent_bills


def test_a_conversation_never_rewritten_bills_what_direct_bills():
    session = AutomaticChatSession(deployment_context_limit=1_000_000, compile_floor=10**9)
    decisions, direct, sent = replay(session, turns=12)
    assert {d.action for d in decisions} == {"passthrough"}
    assert sent == direct
    account = session.state.account
    assert account.sent == pytest.approx(account.direct)


def test_the_priced_policy_is_never_far_above_direct_and_well_below_it_at_the_end():
    # No target: every rebuild is one the account chose because it pays.
    session = AutomaticChatSession(deployment_context_limit=1_000_000, compile_floor=8_000)
    decisions, direct, sent = replay(session)
    assert any(d.action == "compiled" for d in decisions)
    worst = max(s / d for s, d in zip(sent, direct, strict=True))
    assert worst <= 1.02, f"billed {worst:.3f}x direct at some request"
    assert sent[-1] <= 0.8 * direct[-1]
    # The account's own estimate agrees with the oracle within a few percent.
    account = session.state.account
    assert account.direct == pytest.approx(direct[-1], rel=0.05)
    assert account.sent == pytest.approx(sent[-1], rel=0.08)


def test_the_window_policy_rebuilds_only_when_the_target_demands():
    session = AutomaticChatSession(
        deployment_context_limit=1_000_000, compile_floor=8_000, cost_policy="window"
    )
    decisions, _, _ = replay(session, turns=20)
    assert {d.action for d in decisions} == {"passthrough"}


def long_history() -> list[dict]:
    *_, history = agent_workload("pause", turns=14, window=1_000_000).replay()
    return history


def seen_at_start(history: list[dict], **options) -> AutomaticChatSession:
    """A session that saw ``history`` less its last steps at :data:`START`, sent unchanged."""
    probe = AutomaticChatSession(deployment_context_limit=1_000_000, compile_floor=10**9)
    body = {"model": "simulated", "messages": history[:-2], "max_tokens": 1024}
    assert probe.prepare_request(body, api="chat", now=START).decision.action == "passthrough"
    session = AutomaticChatSession(deployment_context_limit=1_000_000, **options)
    session.state = probe.state
    return session


@pytest.mark.parametrize("gap_s, cold", [(60.0, False), (601.0, True)])
def test_a_request_after_the_cache_expired_is_compiled_deep(gap_s, cold):
    history = long_history()
    session = seen_at_start(history, compile_floor=8_000)
    body = {"model": "simulated", "messages": history, "max_tokens": 1024}
    decision = session.prepare_request(body, api="chat", now=START + gap_s).decision
    assert ("cold cache" in decision.reason) is cold
    if cold:
        assert decision.action == "compiled"
        assert decision.tokens_after <= 0.4 * decision.tokens_before


def test_the_cache_lifetime_comes_from_the_options_or_the_call():
    history = long_history()
    body = {"model": "simulated", "messages": history, "max_tokens": 1024}
    for ttl, per_call, cold in ((None, None, True), (3600.0, None, False), (None, 3600.0, False)):
        session = seen_at_start(history, compile_floor=8_000, cache_ttl_s=ttl)
        decision = session.prepare_request(
            body, api="chat", now=START + 900.0, cache_ttl_s=per_call
        ).decision
        assert ("cold cache" in decision.reason) is cold, (ttl, per_call, decision.reason)


# ------------------------------------------------------------------ the rewrite's cache check


def _rewritten(gap_s: float = 60.0) -> AutomaticChatSession:
    """A session whose latest request was a rewrite, on a warm cache: its tools stay cached
    through the rewrite (the account prices them as read)."""
    history = long_history()
    session = seen_at_start(history, compile_floor=8_000, context_target=40_000)
    rules = " ".join(f"Rule {i}: keep the build green and the logs short." for i in range(60))
    tool = {"type": "function", "function": {"name": "run", "description": rules}}
    body = {"model": "simulated", "messages": history, "max_tokens": 1024, "tools": [tool]}
    decision = session.prepare_request(body, api="chat", now=START + gap_s).decision
    assert decision.action == "compiled", decision.reason
    return session


def test_a_rewrite_the_provider_read_as_priced_is_no_miss(caplog):
    session = _rewritten()
    priced = session.state.account  # a snapshot
    assert 0 < priced.expected_cached < priced.expected_prompt
    # The provider read the priced prefix (its count a little off the session's own).
    prompt = int(priced.expected_prompt * 1.03)
    cached = int(priced.expected_cached * 0.97)
    usage = {"prompt_tokens": prompt, "prompt_tokens_details": {"cached_tokens": cached}}
    with caplog.at_level("INFO", logger="tomc"):
        session.observe_usage(usage)
    account = session.state.account
    assert account.cache_misses == 0 and "cache" not in caplog.text
    assert account.expected_prompt == 0  # checked once


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 9_000, "prompt_tokens_details": {"cached_tokens": 0}},  # Chat
        {"input_tokens": 9_000, "input_tokens_details": {"cached_tokens": 0}},  # Responses
        {"input_tokens": 8_000, "cache_creation_input_tokens": 1_000, "cache_read_input_tokens": 0},
    ],
)
def test_a_rewrite_the_provider_read_little_of_is_a_miss_logged_and_counted(usage, caplog):
    session = _rewritten()
    with caplog.at_level("INFO", logger="tomc"):
        session.observe_usage(usage)
    assert session.state.account.cache_misses == 1
    assert "the provider read 0 of 9,000 prompt tokens of a rewritten request" in caplog.text
    assert "the cost policy priced" in caplog.text
    session.observe_usage(usage)  # the same rewrite is checked once
    assert session.state.account.cache_misses == 1
    # It survives the state's round trip (a shared store saves it between requests).
    restored = ConversationState.from_json(session.state.to_json())
    assert restored.account.cache_misses == 1


def test_usage_that_says_nothing_of_the_cache_checks_nothing():
    session = _rewritten()
    session.observe_usage({"prompt_tokens": 9_000})
    account = session.state.account
    assert account.cache_misses == 0 and account.expected_prompt > 0


def test_the_cache_reads_are_read_from_each_sdks_usage():
    import anthropic.types
    import openai.types
    from openai.types.completion_usage import PromptTokensDetails
    from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails

    from tomc.chat.dialects._base import cached_size

    chat = openai.types.CompletionUsage(
        prompt_tokens=900,
        completion_tokens=5,
        total_tokens=905,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=768),
    )
    responses = openai.types.responses.ResponseUsage(
        input_tokens=900,
        input_tokens_details=InputTokensDetails(cached_tokens=640, cache_write_tokens=260),
        output_tokens=5,
        output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        total_tokens=905,
    )
    messages = anthropic.types.Usage(input_tokens=10, output_tokens=5, cache_read_input_tokens=880)
    assert [cached_size(u) for u in (chat, responses, messages)] == [768, 640, 880]
    bare = openai.types.CompletionUsage(prompt_tokens=900, completion_tokens=5, total_tokens=905)
    assert cached_size(bare) is None and cached_size(900) is None


def test_instructions_sent_as_leading_items_are_priced_as_cached_through_a_rewrite():
    """Codex 0.171 sends its instructions and tools as the first input items, not as
    ``instructions`` / ``tools``: a rewrite keeps them in place, so the provider reads them
    back from its cache, and the account prices them so wherever they sit."""
    rules = " ".join(f"Rule {i}: keep the build green and the logs short." for i in range(150))
    top = {**codex_request(40, steps=4), "instructions": rules}
    leading = [
        {
            "type": "message",
            "role": "developer",
            "content": [
                {"type": "input_text", "text": top["instructions"]},
                {"type": "input_text", "text": json.dumps(top["tools"])},
            ],
        },
    ]
    inline = {**top, "input": leading + top["input"]}
    del inline["instructions"], inline["tools"]
    cached = []
    for body in (top, inline):
        session = AutomaticChatSession(compile_floor=10**9)
        first = {**body, "input": body["input"][:-6]}
        session.prepare_request(first, api="responses", now=START, context_target=10**6)
        decision = session.prepare_request(
            body, api="responses", now=START + 30, context_target=8_000
        ).decision
        assert decision.action == "compiled", decision.reason
        cached.append(session.state.account.expected_cached)
    assert cached[0] > 1_000
    assert cached[1] == pytest.approx(cached[0], rel=0.1)


ANTHROPIC = CachePricing(write=1.25, read=0.1, ttl_s=300.0)
PAYBACK = 0.1 * (1 + 4) / (1.25 + 4 * 0.1)  # r (1 + k) / (w + k r), k = 4


def rewritten_account(sent_prompt: int) -> CostAccount:
    """An account warm at START whose latest request went out at ``sent_prompt`` of the
    client's 200,000 tokens, with so much banked that the allowance never binds."""
    return CostAccount(
        direct=10_000_000.0,
        sent=1_000_000.0,
        direct_prompt=200_000,
        sent_prompt=sent_prompt,
        seen_at=START,
        growth=5_000.0,
    )


def verdict_for(account: CostAccount, prompt: int, now: float = START + 10):
    plan = SimpleNamespace(tokens_before=prompt, stable_tokens=2_000)
    return assess(SessionOptions(), account, ANTHROPIC, plan, now)


def test_after_a_rewrite_a_rebuild_is_priced_against_the_view_otherwise_sent():
    """The alternative to a second rebuild is not going direct but sending the frozen view
    again, grown by what the client added: pricing it against the client's whole history let
    the memory grow with the session (goals 24K -> 126K on a 93-step Claude Code session)."""
    grown = verdict_for(rewritten_account(sent_prompt=40_000), prompt=205_000)
    assert grown.goal == int((40_000 + 5_000) * PAYBACK)
    # Sent unchanged so far: the alternative is the client's own prompt.
    unchanged = verdict_for(rewritten_account(sent_prompt=200_000), prompt=205_000)
    assert unchanged.goal == int(205_000 * PAYBACK)
    assert grown.goal < unchanged.goal / 4
    # After a pause the frozen view is written whole again, like direct's prompt: any smaller
    # prompt pays at once, and the depth stays the payback share of the client's prompt (a
    # goal priced on the view fell below the raw tail and left the view to be written whole).
    cold = verdict_for(rewritten_account(sent_prompt=40_000), prompt=205_000, now=START + 301)
    assert cold.cold and cold.goal == int(205_000 * PAYBACK)


def test_the_verdict_says_what_the_rebuild_requests_allowance_pays_for():
    account = rewritten_account(sent_prompt=40_000)
    account.direct, account.sent = 100_000.0, 100_000.0  # nothing banked: 1% of direct
    warm = verdict_for(account, prompt=205_000)
    direct_cost = 0.1 * 200_000 + 1.25 * 5_000
    afford = 2_000 + (direct_cost + 0.01 * 100_000 - 0.1 * 2_000) / 1.25
    assert warm.ceiling == int(afford)
    assert warm.goal <= warm.ceiling
    # After a pause direct writes the whole prompt too: no allowance to stay under.
    assert verdict_for(account, prompt=205_000, now=START + 301).ceiling is None


def priced_rebuilds(memory_floor: int):
    session = AutomaticChatSession(
        deployment_context_limit=1_000_000, compile_floor=8_000, memory_floor=memory_floor
    )
    decisions, direct, sent = replay(session)
    rebuilds = [d for d in decisions if d.action == "compiled"]
    assert rebuilds and all("priced" in d.reason for d in rebuilds)
    return rebuilds, max(s / d for s, d in zip(sent, direct, strict=True))


def test_a_deep_priced_rebuild_keeps_the_memory_floor_within_its_allowance():
    kept, worst = priced_rebuilds(memory_floor=8_192)
    deep, _ = priced_rebuilds(memory_floor=1_024)
    # The first rebuild, with nothing banked, cannot pay for the floor; later ones can.
    assert kept[0].tokens_after == deep[0].tokens_after
    assert kept[1].tokens_after > deep[1].tokens_after + 2_000
    # The floor is paid from the same allowance as the goal: never far above direct.
    assert worst <= 1.02, f"billed {worst:.3f}x direct at some request"
