"""plan_append: when one more memory block can follow the frozen ones, and with what budget."""

from __future__ import annotations

from benchmarks import request_overhead
from tomc.chat import AutomaticChatSession
from tomc.chat._blocks import APPEND_SHARE, plan_append
from tomc.chat._conversation import allowed_cuts
from tomc.chat._items import ItemCache
from tomc.chat._layout import HISTORY, WORK, Region, plan_layout
from tomc.chat._meter import meter_for
from tomc.chat._plan import RequestPlan, Segment
from tomc.chat.dialects import DIALECTS


def session_history(steps: int) -> list[dict]:
    """A system prompt, the task, then ``steps`` tool calls with 20-line outputs."""
    history = [request_overhead.SYSTEM, request_overhead.TASK]
    for step in range(steps):
        history += request_overhead.agent_step(step, lines=20)
    return history


def planned(messages: list[dict], fit_limit: int) -> RequestPlan:
    dialect, meter = DIALECTS["chat"], meter_for(None)
    entries = ItemCache().read(dialect, meter, messages)
    return RequestPlan(
        dialect,
        {"model": "m", "messages": messages},
        number=1,
        policy="stable",
        output_reserve=0,
        thinking_prefix="drop_block",
        meter=meter,
        items=messages,
        entries=entries,
        tokens_before=sum(entry.tokens for entry in entries),
        fit_limit=fit_limit,
    )


def segment(region: Region, tokens: int) -> Segment:
    return Segment(region, {}, None, "", tokens, tokens, 1, "work", 0.0)


def work_of(plan: RequestPlan) -> tuple[Region, int]:
    """The work region and a cut in its middle."""
    layout = plan_layout(plan.entries, 6)
    (work,) = [r for r in layout.regions if r.kind == WORK]
    cuts = allowed_cuts(plan.entries)
    middle = next(i for i in range((work.start + work.end) // 2, work.end) if cuts[i])
    return work, middle


def test_one_block_follows_the_frozen_ones_over_the_work_that_arrived_since():
    plan = planned(session_history(30), fit_limit=10**6)
    layout = plan_layout(plan.entries, 6)
    work, middle = work_of(plan)
    frozen = (segment(Region(work.start, middle, WORK), 500),)
    append = plan_append(plan, layout, frozen, headroom=0)
    assert append is not None
    assert append.kept == frozen and append.region == Region(middle, work.end, WORK)
    size = sum(e.tokens for e in plan.entries[middle : work.end] if not e.kept)
    assert append.budget == int(size * APPEND_SHARE)  # room is ample: the share decides


def test_no_append_without_a_work_block_the_same_task_or_room():
    plan = planned(session_history(30), fit_limit=10**6)
    layout = plan_layout(plan.entries, 6)
    work, middle = work_of(plan)
    block = segment(Region(work.start, middle, WORK), 500)
    assert plan_append(plan, layout, (), headroom=0) is None  # nothing frozen: a whole build
    history_only = (segment(Region(0, 1, HISTORY), 50),)
    assert plan_append(plan, layout, history_only, headroom=0) is None  # no work block yet
    moved = (segment(Region(work.start + 2, middle, WORK), 500),)
    assert plan_append(plan, layout, moved, headroom=0) is None  # the work region moved
    # Room left for the new block under 5% of its work: merge instead.
    size = sum(e.tokens for e in plan.entries[middle : work.end] if not e.kept)
    replaced = sum(e.tokens for e in plan.entries[work.start : middle] if not e.kept)
    rest = plan.tokens_before - size - replaced + block.tokens
    tight = planned(session_history(30), fit_limit=rest + int(size * 0.04))
    assert plan_append(tight, layout, (block,), headroom=0) is None
    roomy = planned(session_history(30), fit_limit=rest + int(size * 0.2))
    assert plan_append(roomy, layout, (block,), headroom=0) is not None
    # The headroom is room an append may not use.
    assert plan_append(plan, layout, (block,), headroom=plan.fit_limit) is None


def test_a_session_appends_and_reports_it():
    session = AutomaticChatSession(context_target=12_000, backoff_thresholds=())
    kinds = []
    for steps in range(4, 160, 2):
        _, decision = session.prepare(model="gpt-4o", messages=session_history(steps))
        if decision.code == "compiled":
            kinds.append(decision.rebuild)
    assert kinds[0] == "build" and "append" in kinds and set(kinds) <= {"build", "append", "merge"}
