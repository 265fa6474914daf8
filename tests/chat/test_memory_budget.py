"""A session's memory, framing included, never costs more than its budget."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from chat_fixtures import agent_history
from tomc.chat import AutomaticChatSession


@settings(max_examples=25, deadline=None)
@given(
    st.integers(10, 60),
    st.integers(1024, 4000),
    st.sampled_from(["tomc_raw", "tomc", "rag"]),
    st.booleans(),
)
def test_decision_memory_never_exceeds_its_budget(
    turns: int, budget: int, strategy: str, plain: bool
) -> None:
    history = agent_history(turns)
    if plain:  # a conversation without tools: the history path of the memory
        history = [m for m in history if m["role"] != "tool" and not m.get("tool_calls")]
    session = AutomaticChatSession(
        deployment_context_limit=1_000_000, backoff_thresholds=(), strategy=strategy
    )
    _, decision = session.prepare(model="m", messages=history, budget_tokens=budget)
    if decision.memory_tokens is not None:
        assert decision.memory_tokens <= decision.memory_budget


def test_a_memory_item_fits_with_its_framing_under_an_estimating_meter() -> None:
    # Model "m" has no published tokenizer: the meter estimates (o200k times a margin). The
    # compiler must count with that meter's counter, and the item's framing is in the budget.
    history = [m for m in agent_history(60) if m["role"] != "tool" and not m.get("tool_calls")]
    for budget in (1024, 1218, 1509):
        session = AutomaticChatSession(deployment_context_limit=1_000_000, backoff_thresholds=())
        _, decision = session.prepare(model="m", messages=history, budget_tokens=budget)
        assert decision.action == "compiled"
        assert decision.memory_budget == budget
        assert decision.memory_tokens <= budget
