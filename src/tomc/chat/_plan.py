"""One request being decided: its facts and figures, the memory segments, and the view.

A :class:`RequestPlan` gathers what the session learns about one request (its entries, token
counts, window) and becomes its :class:`~tomc.chat._decision.Decision`. A :class:`Segment` is a
region replaced by one memory item; :func:`view` splices segments into the item list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._conversation import Entry
from ._decision import Decision
from ._items import ItemCache
from ._layout import Region
from ._meter import TokenMeter
from .dialects import Dialect

__all__ = [
    "Frozen",
    "Pass",
    "RequestPlan",
    "Segment",
    "raw_tokens",
    "share",
    "view",
    "view_entries",
]


@dataclass(frozen=True)
class Segment:
    """A region replaced by one memory item."""

    region: Region
    item: Any
    entry: Entry
    text: str
    tokens: int
    budget: int
    compiled: int
    strategy: str
    latency_s: float


@dataclass(frozen=True)
class Frozen:
    """The memory in use: its segments and the entries it stands for (compared by identity)."""

    segments: tuple[Segment, ...]
    entries: tuple[Entry, ...]
    explicit_budget: int | None
    built_request: int
    built_len: int
    dialect: str


class Pass(Exception):
    """Control flow inside a decision: send the request unchanged, with this code."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def raw_tokens(entries: Sequence[Entry], region: Region) -> int:
    """What the entries a memory of ``region`` replaces cost raw (kept items stay)."""
    return sum(e.tokens for e in entries[region.start : region.end] if not e.kept)


def share(total: int, wanted: Sequence[int]) -> list[int]:
    """Split ``total`` in proportion to ``wanted`` (each at most what it wants)."""
    whole = sum(wanted)
    if whole <= 0:
        return [0 for _ in wanted]
    if whole <= total:
        return list(wanted)
    return [total * w // whole for w in wanted]


def view_entries(plan: RequestPlan, segments: Sequence[Segment]) -> list[Entry]:
    """The neutral entries of the view (cheap: the format's full check runs in the tests)."""
    entries = plan.entries
    out: list[Entry] = []
    position = 0
    for segment in segments:
        region = segment.region
        out.extend(entries[position : region.start])
        out.extend(e for e in entries[region.start : region.end] if e.kept)
        out.append(segment.entry)
        position = region.end
    out.extend(entries[position:])
    return out


def view(plan: RequestPlan, segments: Sequence[Segment]) -> tuple[list[Any], int]:
    """The items to send with ``segments`` in place, and their token count."""
    items, entries = plan.items, plan.entries
    view: list[Any] = []
    tokens = plan.fixed_tokens
    position = 0
    for segment in segments:
        region = segment.region
        view.extend(items[position : region.start])
        tokens += sum(entry.tokens for entry in entries[position : region.start])
        for index in range(region.start, region.end):
            if entries[index].kept:
                view.append(items[index])
                tokens += entries[index].tokens
        view.append(segment.item)
        tokens += segment.tokens
        position = region.end
    view.extend(items[position:])
    tokens += sum(entry.tokens for entry in entries[position:])
    return view, tokens


class RequestPlan:
    """The facts and figures gathered for one request while it is being decided."""

    def __init__(
        self,
        dialect: Dialect,
        request: Mapping[str, Any],
        *,
        number: int,
        policy: str,
        default_reserve: int,
    ) -> None:
        self.dialect = dialect
        self.request = request
        self.model = request.get("model")
        self.number = number
        self.policy = policy
        self.rebuilds = 0
        self.rebuild: str | None = None
        self.action = "passthrough"
        self.code = ""
        self.reason = ""
        self.notes: list[str] = []
        self.items: Sequence[Any] = ()
        self.entries: list[Entry] = []
        self.meter: TokenMeter | None = None
        self.fixed_tokens = 0
        self.tokens_before = 0
        self.tokens_after = 0
        self.window: int | None = None
        self.fit_limit = 0
        self.target: int | None = None
        self.thinking_prefix = "drop_block"
        self.hint: int | None = None
        self.hint_source: str | None = None
        self.segments: Sequence[Segment] = ()
        # Planning hint only: the request's own output limit wins, and is never rewritten.
        reserve = dialect.output_reserve(request)
        self.output_reserve = reserve if reserve is not None else default_reserve

    def read(self, cache: ItemCache) -> None:
        """Read the history (through ``cache``) and check its tool pairing."""
        assert self.meter is not None
        self.items = self.dialect.items(self.request)
        self.entries = cache.read(self.dialect, self.meter, self.items)
        self.fixed_tokens = self.meter.count(self.dialect.fixed_text(self.request))
        self.tokens_before = self.tokens_after = self.fixed_tokens + sum(
            entry.tokens for entry in self.entries
        )
        problems = self.dialect.pairing(self.entries)
        if problems:
            raise Pass("pairing_broken", f"history breaks tool pairing rules: {problems[0]}")

    def use(self, segments: Sequence[Segment], view_tokens: int, action: str, reason: str) -> None:
        self.segments, self.tokens_after, self.action, self.reason = (
            segments,
            view_tokens,
            action,
            reason,
        )
        self.code = action

    def passthrough(self, code: str, reason: str) -> None:
        self.action, self.code, self.reason = "passthrough", code, reason
        self.tokens_after = self.tokens_before
        self.segments = ()  # nothing of a memory was sent

    def decision(self, rebuilds: int) -> Decision:
        self.rebuilds = rebuilds
        segments = self.segments
        reason = "; ".join([self.reason, *self.notes]) if self.notes else self.reason
        compiled = self.action == "compiled"
        return Decision(
            request=self.number,
            action=self.action,
            code=self.code,
            reason=reason,
            model=str(self.model),
            api=self.dialect.name,
            policy=self.policy,
            tokens_before=self.tokens_before,
            tokens_after=self.tokens_after,
            effective_window=self.window,
            output_reserve=self.output_reserve,
            counter=self.meter.name if self.meter else "",
            memory_budget=sum(s.budget for s in segments) if segments else None,
            memory_tokens=sum(s.tokens for s in segments) if segments else None,
            compiled_messages=sum(s.compiled for s in segments),
            rebuilds=self.rebuilds,
            context_hint=self.hint,
            hint_source=self.hint_source,
            compile_latency_s=sum(s.latency_s for s in segments) if compiled else 0.0,
            applied_strategy=segments[-1].strategy if segments else None,
            context_target=self.target,
            rebuild=self.rebuild if compiled else None,
        )
