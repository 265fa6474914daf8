"""Building a memory for one request: append a block to the frozen ones, or build it whole.

These are the steps the session runs once its policy (:mod:`._policy`) decided to rebuild:
choose the layout (shortening the raw tail when big tool outputs would leave no headroom), try
one more block after the frozen ones (:func:`tomc.chat._blocks.plan_append`), else compile every
region within its budget, fit the view to the window, and finish the body in the request's
format. They are functions of the session's options, the request's plan and the
conversation's state; :func:`build` is the only one that changes the state (the new frozen
memory and the rebuild count).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from .._core.budget import MIN_BUDGET, default_budget
from ._blocks import plan_append
from ._conversation import Entry
from ._items import read_item
from ._layout import HISTORY, WORK, Layout, Region, plan_layout
from ._memory import CONTINUED_PREFIX, EarlierWork, RegionMemory, build_region_memory
from ._meter import ITEM_OVERHEAD
from ._options import SessionOptions
from ._plan import (
    Outcome,
    RequestPlan,
    Segment,
    prefix_tokens,
    raw_tokens,
    share,
    view_entries,
)
from ._plan import view as build_view
from ._safe_memory import safe_memory, safe_why
from ._state import ConversationState, FrozenMemory, covered_digest
from .dialects import Dialect, PassThrough

__all__ = ["WHOLE_BUILD_HEADROOM", "build", "finish", "headroom"]

logger = logging.getLogger("tomc.chat")
#: A whole build leaves this many times ``growth_headroom`` free: room for the raw steps to come
#: and for the blocks appended after it before the next whole build.
WHOLE_BUILD_HEADROOM = 1.25
#: Attempts at a smaller memory when a built view still measures over the window.
_FIT_ATTEMPTS = 3
#: The strategy of a segment that is the safe compaction (:mod:`._safe_memory`).
SAFE = "safe"

Built = tuple[tuple[Segment, ...], list[Any], int]


def build(
    options: SessionOptions, state: ConversationState, plan: RequestPlan, why: str
) -> Outcome:
    """Compile a memory for ``plan`` (an append, else a whole build), freeze it in ``state``
    and return the rewritten request; raise :class:`PassThrough` when it would not help."""
    entries = plan.entries
    layout = _layout(options, plan)
    task = plan.task if plan.task is not None else _task_text(entries, layout)
    if plan.strict and plan.goal is not None and layout.regions:
        raw = plan.tokens_before - sum(raw_tokens(entries, r) for r in layout.regions)
        if raw + MIN_BUDGET > plan.goal:
            raise PassThrough(
                "priced_wait",
                f"{why}; but what stays raw ({raw:,} tokens) leaves no room for a memory under "
                f"the priced goal {plan.goal:,}: not worth a rebuild yet",
            )
    if not layout.regions:
        raise PassThrough(
            "nothing_to_compile",
            f"{why}; but everything left is protected (instructions, the task, the recent "
            "items and pending tool protocol)",
        )
    if not task.strip():
        raise PassThrough("no_task", f"{why}; but there is no task (no user message, none given)")
    built = _append(options, state.frozen, plan, layout, task, why)
    if built is None:
        kind = "merge" if state.frozen is not None else "build"
        built = _build_whole(options, state.frozen, plan, layout, task, why)
    else:
        kind = "append"
    segments, view, view_tokens = built
    if kind == "append":
        first_new = len(segments) - 1
    else:
        old = state.frozen.segments if state.frozen is not None else ()
        first_new = next(
            (k for k, s in enumerate(segments) if k >= len(old) or s is not old[k]), len(segments)
        )
    if view_tokens > plan.fit_limit:
        raise PassThrough(
            "cannot_fit",
            f"{why}; but even the rewritten request ({view_tokens:,} tokens) would not fit "
            f"{plan.fit_limit:,}",
        )
    if view_tokens >= plan.tokens_before:
        raise PassThrough(
            "no_shrink",
            f"{why}; compilation did not shrink the request "
            f"({plan.tokens_before:,} -> {view_tokens:,})",
        )
    # The format's last rules come first: a request they refuse freezes nothing.
    body, headers = finish(plan, view, segments)
    end = segments[-1].region.end
    state.frozen = FrozenMemory(
        segments=segments,
        covered=end,
        digest=covered_digest(entries, end),
        counter=plan.encoding,
        explicit_budget=plan.explicit_budget,
        built_request=state.requests,
        built_len=len(entries),
        dialect=plan.dialect.name,
    )
    state.rebuilds += 1
    kept = prefix_tokens(plan, segments, first_new)
    code = "compiled"
    safe = [segment for segment in segments[first_new:] if segment.strategy == SAFE]
    if safe:
        code = "safe_compaction"
        why = f"{why}; the memory could not be compiled {safe_why(safe[0].text)}: the safe "
        why += "compaction went out (every call named, the tools' output left out)"
    return Outcome("compiled", code, why, body, headers, view_tokens, segments, kind, kept)


def headroom(options: SessionOptions, plan: RequestPlan, *, whole: bool = False) -> int:
    """Tokens left free after an append (``growth_headroom``), or after a whole build
    (:data:`WHOLE_BUILD_HEADROOM` times that, at most 90% of the prompt budget)."""
    fraction = options.growth_headroom
    if whole:
        fraction = min(0.9, WHOLE_BUILD_HEADROOM * fraction)
    return int(fraction * plan.fit_limit)


def finish(
    plan: RequestPlan, view: list[Any], segments: Sequence[Segment], *, check: bool = True
) -> tuple[dict[str, Any], dict[str, str]]:
    """The body to send with ``view`` as its history, and the headers to add."""
    problems = plan.dialect.pairing(view_entries(plan, segments)) if check else []
    if problems:  # cannot happen for a valid original; refuse rather than send it
        raise PassThrough("pairing_broken", f"the rewrite would break the format: {problems[0]}")
    body = plan.dialect.with_items(plan.request, view)
    newest = segments[-1].item
    index = next((i for i in range(len(view) - 1, -1, -1) if view[i] is newest), None)
    if index is not None:
        body = plan.dialect.cache_memory(body, index)
    return plan.dialect.finalize(
        body, _raw_after_change(plan.entries, segments), plan.thinking_prefix
    )


def _layout(options: SessionOptions, plan: RequestPlan) -> Layout:
    """The layout with the longest recent tail (``keep_recent_messages``, shortened down to
    ``min_recent_messages`` when it must be) that still leaves a whole build its headroom:
    big tool outputs in the raw tail would otherwise fill the window right after a build,
    and every request would rebuild (a cache miss each)."""
    entries = plan.entries
    ceiling = plan.fit_limit - headroom(options, plan, whole=True)
    if plan.goal is not None:
        ceiling = min(ceiling, plan.goal)
    keep_recent = options.keep_recent_messages
    least = options.min_recent_messages or 0
    layout = plan_layout(entries, keep_recent)
    for keep in range(keep_recent - 2, least - 1, -2):
        raw = plan.tokens_before - sum(raw_tokens(entries, r) for r in layout.regions)
        if raw + MIN_BUDGET <= ceiling:
            break
        shorter = plan_layout(entries, keep)
        if shorter.tail == layout.tail:
            continue
        layout = shorter
    return layout


def _append(
    options: SessionOptions,
    frozen: FrozenMemory | None,
    plan: RequestPlan,
    layout: Layout,
    task: str,
    why: str,
) -> Built | None:
    """One more memory block after the frozen ones (their bytes, and so the provider's
    cached prefix, stay as they were), or ``None`` when the work memory must be rebuilt."""
    if frozen is None or plan.explicit_budget is not None or frozen.why_stale(plan):
        return None
    append = plan_append(plan, layout, frozen.segments, headroom(options, plan))
    if append is None:
        return None
    earlier = _earlier_work(plan, append.kept)
    block = _compile(options, plan, layout, append.region, task, append.budget, why, True, earlier)
    segments = (*append.kept, block)
    view, view_tokens = build_view(plan, segments)
    for _ in range(_FIT_ATTEMPTS - 1):
        if view_tokens <= plan.fit_limit:
            break
        over = view_tokens - plan.fit_limit
        block = _shrunk(options, plan, layout, block, over, task, why, earlier)
        segments = (*append.kept, block)
        view, view_tokens = build_view(plan, segments)
    if view_tokens > plan.fit_limit or block.tokens >= raw_tokens(plan.entries, append.region):
        return None
    return segments, view, view_tokens


def _build_whole(
    options: SessionOptions,
    frozen: FrozenMemory | None,
    plan: RequestPlan,
    layout: Layout,
    task: str,
    why: str,
) -> Built:
    segments = _segments(options, frozen, plan, layout, task, why)
    view, view_tokens = build_view(plan, segments)
    for _ in range(_FIT_ATTEMPTS - 1):
        if view_tokens <= plan.fit_limit:
            break
        # A memory measured a little over its estimate (BPE is not additive across lines):
        # take the overflow off the largest segment and build it again.
        largest = max(range(len(segments)), key=lambda k: segments[k].tokens)
        over = view_tokens - plan.fit_limit
        smaller = _shrunk(options, plan, layout, segments[largest], over, task, why)
        segments = (*segments[:largest], smaller, *segments[largest + 1 :])
        view, view_tokens = build_view(plan, segments)
    return segments, view, view_tokens


def _segments(
    options: SessionOptions,
    frozen: FrozenMemory | None,
    plan: RequestPlan,
    layout: Layout,
    task: str,
    why: str,
) -> tuple[Segment, ...]:
    entries = plan.entries
    for region in layout.regions:
        for index in range(region.start, region.end):
            if entries[index].blocker and not entries[index].kept:
                raise PassThrough(
                    "unsupported_content",
                    f"{why}; but item {index} would need compiling and carries "
                    f"{entries[index].blocker}",
                )
    budgets, reusable = _budgets(options, frozen, plan, layout)
    if min(budgets) <= 0:
        raise PassThrough(
            "cannot_fit",
            f"{why}; but protected items and the output reservation leave no room for a "
            f"memory ({sum(budgets):,} tokens)",
        )
    segments = []
    for region, budget in zip(layout.regions, budgets, strict=True):
        if region in reusable:
            segments.append(reusable[region])
            continue
        segment = _compile(options, plan, layout, region, task, budget, why)
        # A memory never costs more than what it replaces: such a region stays raw, as does
        # one the compiler gave back unchanged (nothing in it to compile).
        if segment.strategy != "unchanged" and segment.tokens < raw_tokens(entries, region):
            segments.append(segment)
    if not segments:
        raise PassThrough("no_shrink", f"{why}; but no memory would be smaller than its history")
    return tuple(segments)


def _budgets(
    options: SessionOptions, frozen: FrozenMemory | None, plan: RequestPlan, layout: Layout
) -> tuple[list[int], dict[Region, Segment]]:
    """Memory budgets per region, and segments of the frozen memory that can stay as they are.

    Each region wants the compiler's default budget for its size. When the window constrains,
    what is left after the protected items, less ``growth_headroom`` of the window, is shared
    in proportion; an unchanged history segment is kept (its prefix stays cached) as long as
    the work region still gets room.
    """
    entries, explicit = plan.entries, plan.explicit_budget
    inside = sum(entries[i].tokens for r in layout.regions for i in range(r.start, r.end))
    instructions = sum(
        entries[i].tokens for r in layout.regions for i in range(r.start, r.end) if entries[i].kept
    )
    memory_overhead = ITEM_OVERHEAD * len(layout.regions)
    available = plan.fit_limit - (plan.tokens_before - inside) - instructions - memory_overhead
    sizes = [raw_tokens(entries, r) for r in layout.regions]
    if explicit:
        wanted = [max(1, explicit * size // max(1, sum(sizes))) for size in sizes]
    else:
        wanted = [default_budget(size) for size in sizes]
    reusable: dict[Region, Segment] = {}
    if frozen is not None and not frozen.why_stale(plan):
        for segment in frozen.segments:
            if segment.region.kind == HISTORY and segment.region in layout.regions:
                reusable[segment.region] = segment
    # A whole build leaves its larger headroom (room for the raw steps still to come and the
    # blocks appended before the next whole build); a tight window gets what it can: the
    # single headroom, else at least MIN_BUDGET.
    room = min(available, MIN_BUDGET)
    for leave in (headroom(options, plan, whole=True), headroom(options, plan)):
        if available - leave >= MIN_BUDGET:
            room = available - leave
            break
    if plan.goal is not None:
        # The cost account's goal for an early or cold-cache rebuild: as deep as it says, and
        # never shallower than the window's rule.
        priced = available - max(0, plan.fit_limit - plan.goal)
        # A goal deep enough to pay back fast may leave a memory too small to say what the
        # work did (each call's header, the values the task names): it keeps memory_floor
        # where the rebuild request's allowance pays for it.
        floor = options.memory_floor
        if plan.ceiling is not None:
            floor = min(floor, available - max(0, plan.fit_limit - plan.ceiling))
        room = min(room, max(MIN_BUDGET, priced, floor))
    if sum(wanted) <= (available if explicit else room):
        return wanted, reusable
    kept = sum(segment.tokens for segment in reusable.values())
    if reusable and room - kept >= min(MIN_BUDGET, sum(wanted) - kept):
        rest = [w for r, w in zip(layout.regions, wanted, strict=True) if r not in reusable]
        shares = share(room - kept, rest)
        out = []
        for region in layout.regions:
            out.append(reusable[region].tokens if region in reusable else shares.pop(0))
        return out, reusable
    return share(room, wanted), {}


def _earlier_work(plan: RequestPlan, kept: Sequence[Segment]) -> EarlierWork | None:
    """The work the frozen work blocks stand for, and their text: an appended block may bring
    back what the task asks about that they left out (their budgets were the smallest)."""
    blocks = [segment for segment in kept if segment.region.kind == WORK]
    if not blocks:
        return None
    start, end = blocks[0].region.start, blocks[-1].region.end
    entries = plan.entries
    return EarlierWork(
        tuple(entry for entry in entries[start:end] if not entry.kept),
        "\n".join(segment.text for segment in blocks),
        1 + sum(len(entry.calls) for entry in entries[:start]),
    )


def _compile(
    options: SessionOptions,
    plan: RequestPlan,
    layout: Layout,
    region: Region,
    task: str,
    budget: int,
    why: str,
    continued: bool = False,
    earlier: EarlierWork | None = None,
) -> Segment:
    entries, dialect, meter = plan.entries, plan.dialect, plan.meter
    assert meter is not None  # planning set it before reading the history
    started = time.perf_counter()
    focus = entries[layout.tail :] if options.work_query == "task+step" else ()
    role = _memory_role(options, dialect)
    # The memory item's framing counts against the budget too, so the text gets what is
    # left; should the item still come out over (a meter that rounds), the text is rebuilt
    # smaller by the excess. The segment's tokens never exceed its budget.
    framing = read_item(dialect, meter, dialect.memory_item("", role), 0).tokens
    text_budget = max(0, budget - framing)
    first_call = 1 + sum(len(e.calls) for e in entries[: region.start])
    safe_why = plan.safe_why
    for _ in range(3):
        memory = None
        if safe_why is None:
            try:
                memory = build_region_memory(
                    entries[region.start : region.end],
                    kind=region.kind,
                    task=task,
                    focus=focus,
                    later=entries[region.end :],
                    budget=text_budget,
                    meter=meter,
                    strategy=options.strategy,
                    compiler=options.compiler,
                    first_call_number=first_call,
                    continued=continued,
                    earlier=earlier,
                )
            except Exception as exc:
                # The request must still go out, and within its window: the safe compaction
                # (every call named, no output) instead of the whole history.
                logger.warning("compilation failed; the safe compaction goes out", exc_info=True)
                safe_why = f"because the compiler failed ({type(exc).__name__})"
        if memory is None:
            text = safe_memory(
                entries[region.start : region.end],
                why=safe_why or "",
                budget=text_budget,
                count=meter.count,
                first_call_number=first_call,
            )
            memory = RegionMemory(text, SAFE)
        item = dialect.memory_item(memory.text, role)
        entry = read_item(dialect, meter, item, region.start)
        if entry.tokens <= budget or text_budget == 0:
            break
        # Shrink by the excess, and at least in proportion (a history given back unchanged
        # only shrinks once the budget is below what it costs).
        excess = entry.tokens - budget
        text_budget = max(0, min(text_budget - excess, text_budget * budget // entry.tokens))
    compiled = sum(1 for i in range(region.start, region.end) if not entries[i].kept)
    return Segment(
        region=region,
        item=item,
        entry=entry,
        text=memory.text,
        tokens=entry.tokens,
        budget=budget,
        compiled=compiled,
        strategy=memory.strategy,
        latency_s=time.perf_counter() - started,
    )


def _shrunk(
    options: SessionOptions,
    plan: RequestPlan,
    layout: Layout,
    segment: Segment,
    over: int,
    task: str,
    why: str,
    earlier: EarlierWork | None = None,
) -> Segment:
    budget = segment.budget - over - max(16, segment.budget // 20)
    if budget <= 0:
        return segment
    continued = segment.text.startswith(CONTINUED_PREFIX)
    return _compile(options, plan, layout, segment.region, task, budget, why, continued, earlier)


def _memory_role(options: SessionOptions, dialect: Dialect) -> str:
    return options.memory_role if options.memory_role in dialect.memory_roles else "user"


def _raw_after_change(entries: Sequence[Entry], segments: Sequence[Segment]) -> list[Entry]:
    """The entries sent unchanged after the first rewritten position (what a prefix-bound
    signature would see changed before it); entries inside compiled regions are not sent."""
    out: list[Entry] = []
    position = segments[0].region.start
    for segment in segments:
        region = segment.region
        out.extend(entries[position : region.start])
        out.extend(e for e in entries[region.start : region.end] if e.kept)
        position = region.end
    out.extend(entries[position:])
    return out


def _task_text(entries: Sequence[Entry], layout: Layout) -> str:
    return entries[layout.task].text if layout.task is not None else ""
