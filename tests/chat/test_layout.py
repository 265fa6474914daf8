"""Where a history may be compiled: regions never touch what must stay raw, in any history."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chat_fixtures import entries_of, groups_of
from chat_strategies import agent_loops, histories
from tomc.chat._conversation import COMPACTION, USER, Entry
from tomc.chat._layout import HISTORY, WORK, plan_layout


@given(histories(pending=True) | histories() | agent_loops(), st.integers(0, 8))
def test_regions_leave_protected_items_raw(history, keep):
    entries = entries_of(history)
    layout = plan_layout(entries, keep)
    task = max(i for i, m in enumerate(history) if m["role"] == "user")
    last_assistant = max((i for i, m in enumerate(history) if m["role"] == "assistant"), default=0)
    assert layout.task == task
    assert layout.tail <= max(0, len(history) - keep) or layout.tail == 0
    assert layout.tail <= max(last_assistant, 0) or not any(
        m["role"] == "assistant" for m in history
    )
    for region in layout.regions:
        assert 0 <= region.start < region.end <= layout.tail
        assert not region.start <= task < region.end  # the task is never compiled
        if region.kind == HISTORY:
            assert region.end <= task
        else:
            assert region.kind == WORK and region.start == task + 1
        for start, end in groups_of(history):  # a tool group is compiled or kept whole
            assert not start < region.start < end and not start < region.end < end
    kinds = [region.kind for region in layout.regions]
    assert kinds in ([], [HISTORY], [WORK], [HISTORY, WORK])


@given(agent_loops())
def test_finished_work_after_the_task_can_be_compiled(history):
    layout = plan_layout(entries_of(history), keep_recent=4)
    groups_after_task = [g for g in groups_of(history) if g[0] > layout.task]
    if len(groups_after_task) > 4:
        assert any(region.kind == WORK for region in layout.regions)


def test_nothing_before_the_last_compaction_item_is_compiled():
    entries = [
        Entry(USER, "user", "old task"),
        Entry(COMPACTION, "opaque"),
        Entry(USER, "user", "new task"),
    ]
    entries += entries_of(
        [
            m
            for n in range(6)
            for m in (
                {"role": "assistant", "content": None, "tool_calls": [_call(n)]},
                {"role": "tool", "tool_call_id": f"c{n}", "content": "done"},
            )
        ]
    )
    layout = plan_layout(entries, keep_recent=2)
    assert layout.floor == 2
    assert [(r.kind, r.start) for r in layout.regions] == [(WORK, 3)]


def _call(n: int) -> dict:
    return {"id": f"c{n}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
