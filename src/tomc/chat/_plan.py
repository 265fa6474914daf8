"""One request being decided: its facts and figures, the memory segments, and the view.

A :class:`RequestPlan` is what the session learns about one request before deciding it (its
entries, token counts, window, context hint); :func:`tomc.chat._policy.plan_request` builds it.
An :class:`Outcome` is what the decision did with it, and the two together make the request's
:class:`~tomc.chat._decision.Decision`. A :class:`Segment` is a region replaced by one memory
item; :func:`view` splices segments into the item list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._conversation import Entry
from ._decision import Decision
from ._layout import Region
from ._meter import TokenMeter
from .dialects import Dialect, PassThrough

__all__ = [
    "Outcome",
    "PreparedRequest",
    "RequestPlan",
    "Segment",
    "prefix_tokens",
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


def prefix_tokens(plan: RequestPlan, segments: Sequence[Segment], first_new: int) -> int:
    """Tokens of the view before ``segments[first_new]``'s region: what a rewrite keeps of
    the previous request when its earlier segments are the ones that request sent."""
    entries = plan.entries
    tokens, position = plan.fixed_tokens, 0
    for segment in segments[:first_new]:
        region = segment.region
        tokens += sum(entry.tokens for entry in entries[position : region.start])
        tokens += sum(e.tokens for e in entries[region.start : region.end] if e.kept)
        tokens += segment.tokens
        position = region.end
    if first_new < len(segments):
        region = segments[first_new].region
        tokens += sum(entry.tokens for entry in entries[position : region.start])
        # Its leading instruction items stay in place ahead of its memory.
        tokens += leading_kept_tokens(entries[region.start : region.end])
    return tokens


def leading_kept_tokens(entries: Sequence[Entry]) -> int:
    """Tokens of the instruction items ``entries`` start with: a rewrite keeps them in place,
    ahead of any memory."""
    tokens = 0
    for entry in entries:
        if not entry.kept:
            break
        tokens += entry.tokens
    return tokens


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


@dataclass(frozen=True)
class RequestPlan:
    """The facts and figures of one request, gathered before it is decided.

    Figures that planning did not reach (it stopped at ``passed``, the reason to send the
    request unchanged) keep their defaults: a request of an unknown model is never read.
    """

    dialect: Dialect
    request: Mapping[str, Any]
    number: int
    policy: str
    #: Planning hint only: the request's own output limit wins, and is never rewritten.
    output_reserve: int
    thinking_prefix: str
    #: The caller's task and explicit memory budget for this request, if given.
    task: str | None = None
    explicit_budget: int | None = None
    meter: TokenMeter | None = None
    #: The model's encoding (``""`` for none): which learned margin and frozen memory apply.
    encoding: str = ""
    items: Sequence[Any] = ()
    entries: Sequence[Entry] = ()
    fixed_tokens: int = 0
    #: The head every rewrite of this request starts with, byte for byte: the fixed text and
    #: the leading instruction items (Codex sends its instructions and tools as such items),
    #: which the provider reads back from its cache through a rebuild.
    stable_tokens: int = 0
    tokens_before: int = 0
    window: int | None = None
    fit_limit: int = 0
    target: int | None = None
    hint: int | None = None
    hint_source: str | None = None
    #: What the decision's reason adds (a back-off threshold crossed by a request that must
    #: still be rewritten).
    notes: tuple[str, ...] = ()
    passed: PassThrough | None = None
    #: The largest prompt a rebuild should leave (the cost account's verdict), ``None`` for
    #: the window's rule alone; ``strict``: a rebuild that cannot reach it is not worth doing
    #: now (an early, priced one), rather than one the target demands.
    goal: int | None = None
    strict: bool = False
    #: The largest prompt the rebuild request may leave within its allowance (the cost
    #: account's ``ceiling``): a memory floor deeper goals leave in place stays below it.
    ceiling: int | None = None
    #: Set when this request's memory is the safe compaction (:mod:`._safe_memory`): why the
    #: work memory could not be compiled for it ("in time (...)").
    safe_why: str | None = None

    @property
    def model(self) -> Any:
        return self.request.get("model")

    def decision(self, outcome: Outcome, rebuilds: int) -> Decision:
        """The decision of this request with ``outcome``."""
        segments = outcome.segments
        reason = "; ".join([outcome.reason, *self.notes]) if self.notes else outcome.reason
        compiled = outcome.action == "compiled"
        return Decision(
            request=self.number,
            action=outcome.action,
            code=outcome.code,
            reason=reason,
            model=str(self.model),
            api=self.dialect.name,
            policy=self.policy,
            tokens_before=self.tokens_before,
            tokens_after=outcome.tokens_after,
            effective_window=self.window,
            output_reserve=self.output_reserve,
            counter=self.meter.name if self.meter else "",
            memory_budget=sum(s.budget for s in segments) if segments else None,
            memory_tokens=sum(s.tokens for s in segments) if segments else None,
            compiled_messages=sum(s.compiled for s in segments),
            rebuilds=rebuilds,
            context_hint=self.hint,
            hint_source=self.hint_source,
            compile_latency_s=sum(s.latency_s for s in segments) if compiled else 0.0,
            applied_strategy=segments[-1].strategy if segments else None,
            context_target=self.target,
            rebuild=outcome.rebuild if compiled else None,
        )


@dataclass(frozen=True)
class Outcome:
    """What a decision did with a request: the body and headers to send, and its figures."""

    action: str
    code: str
    reason: str
    body: dict[str, Any]
    headers: Mapping[str, str]
    tokens_after: int
    segments: tuple[Segment, ...] = ()
    #: ``build``, ``append`` or ``merge`` for a compiled request.
    rebuild: str | None = None
    #: Tokens at the start of a compiled request that the previous one sent too (what the
    #: provider can still read from its cache).
    kept_prefix: int = 0

    @classmethod
    def unchanged(cls, plan: RequestPlan, passed: PassThrough) -> Outcome:
        """The request sent as it came (as a dict), for ``passed``'s reason."""
        request = plan.request
        body = request if isinstance(request, dict) else dict(request)
        return cls("passthrough", passed.code, passed.reason, body, {}, plan.tokens_before)


@dataclass(frozen=True)
class PreparedRequest:
    """A decided request: the body to send, the decision, and headers to add (rarely any)."""

    body: dict[str, Any]
    decision: Decision
    headers: Mapping[str, str] = field(default_factory=dict)
