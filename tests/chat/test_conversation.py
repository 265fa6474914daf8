"""The neutral conversation model: cut points and tool pairing, on random histories."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chat_fixtures import entries_of, groups_of
from chat_strategies import histories
from tomc.chat import check_tool_pairing
from tomc.chat._conversation import (
    ASSISTANT,
    REASONING,
    TOOL,
    Entry,
    ToolCall,
    ToolOutput,
    allowed_cuts,
    pairing_problems,
)


@given(histories())
def test_generated_histories_pair_correctly(history):
    assert check_tool_pairing(history) == []


@given(histories(pending=True))
def test_a_pending_tail_is_flagged_unless_allowed(history):
    assert check_tool_pairing(history, allow_pending_tail=True) == []
    problems = check_tool_pairing(history)
    assert len(problems) == 1 and "without results" in problems[0]


@given(histories(), st.data())
def test_dropping_or_duplicating_a_result_or_call_is_detected(history, data):
    spans = groups_of(history)
    if not spans:
        return
    start, end = data.draw(st.sampled_from(spans))
    without_result = list(history)
    del without_result[data.draw(st.integers(start + 1, end - 1))]
    assert check_tool_pairing(without_result)
    without_call = history[:start] + history[start + 1 :]
    assert any("answers no open call" in p for p in check_tool_pairing(without_call))
    duplicated = [*history[:end], history[end - 1], *history[end:]]
    assert any("answers no open call" in p for p in check_tool_pairing(duplicated))


@given(histories(pending=True) | histories())
def test_cuts_never_separate_a_call_from_its_results(history):
    cuts = allowed_cuts(entries_of(history))
    assert cuts[0] is True
    for start, end in groups_of(history):
        assert not any(cuts[b] for b in range(start + 1, end))


def test_reasoning_is_glued_to_what_follows_and_an_assistant_turn_stays_whole():
    entries = [
        Entry(REASONING, "assistant", glue_next=True),
        Entry(ASSISTANT, "assistant", "let me look"),
        Entry(ASSISTANT, "assistant", calls=(ToolCall("c1", "bash", "{}"),)),
        Entry(TOOL, "tool", outputs=(ToolOutput("c1", "ok"),)),
    ]
    assert allowed_cuts(entries) == [True, False, False, False, True]


def test_responses_pair_by_call_id_anywhere_later():
    call = Entry(ASSISTANT, "assistant", calls=(ToolCall("c1", "bash", "{}"),))
    note = Entry(ASSISTANT, "assistant", "running it")
    result = Entry(TOOL, "tool", outputs=(ToolOutput("c1", "ok"),))
    assert pairing_problems([call, note, result], adjacent=False) == []
    assert pairing_problems([call, note, result], adjacent=True)
    assert pairing_problems([result, call], adjacent=False)
