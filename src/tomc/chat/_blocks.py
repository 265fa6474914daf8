"""Appending a memory block instead of rebuilding the work memory: what keeps a cache warm.

A rewritten request is cheap for a provider's prompt cache only up to its first changed byte.
When the frozen view no longer fits, rebuilding the whole work memory changes everything after
the task, so every later token is billed as new input again (at 1.25x on Anthropic). Instead,
like a log-structured store that writes new runs and merges them rarely, the session keeps every
memory block it already sent byte-identical and compiles only the finished work that arrived
since into one more block after them. The prefix up to the last old block stays cached; only the
new block and the raw steps after it are new.

Blocks are merged (the whole work region compiled again as one block) only when an append cannot
make room: when what is left for the new block after the old blocks, the raw tail and the
headroom is too small to hold a useful memory of it. :func:`plan_append` decides; it is pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._core.budget import default_budget
from ._layout import WORK, Layout, Region
from ._meter import ITEM_OVERHEAD
from ._plan import RequestPlan, Segment, raw_tokens

__all__ = ["APPEND_SHARE", "MIN_APPEND_SHARE", "MIN_APPEND_TOKENS", "AppendPlan", "plan_append"]

#: An appended block gets at most this share of the work it stands for, so each append leaves
#: room under the headroom for the next ones before a merge is needed.
APPEND_SHARE = 0.33
#: Below this share of its work (or :data:`MIN_APPEND_TOKENS`), a block would keep too little:
#: the blocks are merged instead.
MIN_APPEND_SHARE = 0.05
MIN_APPEND_TOKENS = 256


@dataclass(frozen=True, slots=True)
class AppendPlan:
    """Keep ``kept`` as they are and compile ``region`` into one more block of ``budget``."""

    kept: tuple[Segment, ...]
    region: Region
    budget: int


def plan_append(
    plan: RequestPlan, layout: Layout, frozen: Sequence[Segment], headroom: int
) -> AppendPlan | None:
    """An append for this request, or ``None`` when the work memory must be built whole.

    ``frozen`` are the segments in use (their entries are unchanged: the caller checked), and
    ``layout`` the regions this request would compile from scratch.
    """
    if not frozen or frozen[-1].region.kind != WORK:
        return None
    work = next((r for r in layout.regions if r.kind == WORK), None)
    first_block = next(s for s in frozen if s.region.kind == WORK)
    if work is None or work.start != first_block.region.start:
        return None  # a new task, or the provider compacted: the work region moved
    if any(s.region.kind != WORK and s.region not in layout.regions for s in frozen):
        return None  # the history memory no longer matches its region
    start = frozen[-1].region.end
    if work.end <= start:
        return None
    entries = plan.entries
    region = Region(start, work.end, WORK)
    size = raw_tokens(entries, region)
    if size <= 0 or any(e.blocker and not e.kept for e in entries[start : work.end]):
        return None
    rest = plan.tokens_before - size + ITEM_OVERHEAD
    for segment in frozen:
        rest += segment.tokens - raw_tokens(entries, segment.region)
    room = plan.fit_limit - headroom - rest
    budget = min(room, default_budget(size), int(size * APPEND_SHARE))
    if budget < max(MIN_APPEND_TOKENS, int(size * MIN_APPEND_SHARE)):
        return None
    return AppendPlan(tuple(frozen), region, budget)
