"""AutomaticChatSession: rewrite only old history, keep prefix caches warm, fail open.

One session per conversation. Every ``create`` call is one logical model request (an agent makes
many per user message); it forwards the caller's client, model and options unchanged and changes
only the history list, in whichever wire format the client speaks (see :mod:`.dialects`).
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._core.budget import MIN_BUDGET, default_budget
from .._core.errors import InvalidOptionError, UnsupportedClientError
from ._blocks import plan_append
from ._conversation import Entry
from ._decision import Decision
from ._items import ItemCache, read_item
from ._layout import HISTORY, Layout, Region, plan_layout
from ._memory import CONTINUED_PREFIX, build_region_memory
from ._meter import ITEM_OVERHEAD, TokenMeter, meter_for
from ._native import NativeEvent, NativeState, read_native_event
from ._plan import Frozen, Pass, RequestPlan, Segment, raw_tokens, share, view_entries
from ._plan import view as build_view
from ._profiles import ModelProfile, ProfileTable, effective_window
from .dialects import DIALECTS, Dialect, PassThrough, dialect_for
from .dialects import guess_dialects as _guess
from .dialects._base import prompt_size

__all__ = ["AutomaticChatSession", "PreparedRequest"]

logger = logging.getLogger("tomc.chat")
POLICIES = ("stable", "cadence")
WORK_QUERIES = ("task", "task+step")
THINKING_PREFIX = ("passthrough", "drop_block")
#: A whole build leaves this many times ``growth_headroom`` free: room for the raw steps to come
#: and for the blocks appended after it before the next whole build.
WHOLE_BUILD_HEADROOM = 1.25
#: Attempts at a smaller memory when a built view still measures over the window.
_FIT_ATTEMPTS = 3


@dataclass(frozen=True)
class PreparedRequest:
    """A decided request: the body to send, the decision, and headers to add (rarely any)."""

    body: dict[str, Any]
    decision: Decision
    headers: Mapping[str, str] = field(default_factory=dict)


_LAST_DECISION: contextvars.ContextVar[Decision | None] = contextvars.ContextVar(
    "tomc_last_decision", default=None
)


class AutomaticChatSession:
    """A drop-in, cache-friendly wrapper around the caller's own model client.

    ``create(client, model=..., messages=... | input=..., **options)`` sends the request through
    the client's own method (Chat Completions, Anthropic Messages or OpenAI Responses, chosen by
    ``api`` or from the client and the request) with the same model and options and a rewritten
    history: old history and finished tool work become compiled memory items; instructions, the
    latest user message, the ``keep_recent_messages`` newest items, the latest assistant item and
    pending tool protocol stay byte-identical. Whatever the wrapper cannot handle safely goes out
    unchanged, with the reason in :attr:`last_decision`.

    ``refresh_policy="stable"`` (default) freezes the memory so that consecutive requests share a
    prefix. When the reused view would no longer fit, the boundary advances (newer finished groups
    join the compiled region) rather than the same region shrinking; ``growth_headroom`` of the
    window is kept free so one rebuild lasts many requests. ``refresh_policy="cadence"`` rebuilds
    every ``refresh_every`` requests; it defeats prefix caching.

    A session is one conversation: use one per conversation, from any number of threads. Each
    caller sees its own request's decision in :attr:`last_decision`.
    """

    def __init__(
        self,
        *,
        refresh_policy: str = "stable",
        refresh_every: int = 2,
        stable_growth_tokens: int | None = None,
        native_cooldown_requests: int = 2,
        native_pause_limit: int = 8,
        deployment_context_limit: int | None = None,
        context_target: int | None = None,
        output_reserve: int = 8192,
        budget_tokens: int | None = None,
        keep_recent_messages: int = 6,
        min_recent_messages: int | None = None,
        strategy: str = "tomc_raw",
        model_profiles: Mapping[str, ModelProfile | Mapping[str, Any]] | None = None,
        memory_role: str = "user",
        growth_headroom: float = 0.25,
        backoff_thresholds: Sequence[float] = (0.5, 0.9),
        work_query: str = "task+step",
        api: str | None = None,
        thinking_prefix: str = "drop_block",
        compiler: Callable[..., Any] | None = None,
    ) -> None:
        _check_choice("refresh_policy", refresh_policy, POLICIES)
        _check_choice("work_query", work_query, WORK_QUERIES)
        _check_choice("thinking_prefix", thinking_prefix, THINKING_PREFIX)
        if api is not None:
            _check_choice("api", api, tuple(DIALECTS))
        if refresh_every < 1:
            raise InvalidOptionError("refresh_every must be >= 1")
        if memory_role not in ("user", "system", "developer", "assistant"):
            raise InvalidOptionError(f"unsupported memory_role {memory_role!r}")
        if not 0 <= growth_headroom < 1:
            raise InvalidOptionError("growth_headroom must be in [0, 1)")
        if keep_recent_messages < 0 or output_reserve < 0 or native_pause_limit < 1:
            raise InvalidOptionError(
                "keep_recent_messages and output_reserve must be >= 0, native_pause_limit >= 1"
            )
        for name, value in (
            ("stable_growth_tokens", stable_growth_tokens),
            ("deployment_context_limit", deployment_context_limit),
            ("context_target", context_target),
            ("budget_tokens", budget_tokens),
        ):
            if value is not None and value <= 0:
                raise InvalidOptionError(f"{name} must be positive")
        self.refresh_policy = refresh_policy
        self.refresh_every = refresh_every
        self.stable_growth_tokens = stable_growth_tokens
        self.deployment_context_limit = deployment_context_limit
        self.context_target = context_target
        self.output_reserve = output_reserve
        self.budget_tokens = budget_tokens
        self.keep_recent_messages = keep_recent_messages
        # None: the recent tail is never shortened (the library's guarantee).
        self.min_recent_messages = (
            keep_recent_messages
            if min_recent_messages is None
            else max(0, min(min_recent_messages, keep_recent_messages))
        )
        self.strategy = strategy
        self.memory_role = memory_role
        self.growth_headroom = growth_headroom
        self.backoff_thresholds = tuple(sorted(backoff_thresholds))
        self.work_query = work_query
        self.api = api
        self.thinking_prefix = thinking_prefix
        self.profiles = ProfileTable(model_profiles)
        self.native = NativeState(native_cooldown_requests, native_pause_limit)
        self.decisions: deque[Decision] = deque(maxlen=1000)
        self.rebuilds = 0
        self._compiler = compiler
        self._requests = 0
        self._frozen: Frozen | None = None
        self._usage_hint: int | None = None
        self._thresholds_done: set[float] = set()
        self._items = ItemCache()
        self._meters: dict[str | None, TokenMeter] = {}
        self._last_sent: tuple[int, TokenMeter] | None = None
        self._lock = threading.RLock()

    # ----------------------------------------------------------------- public surface

    @property
    def last_decision(self) -> Decision | None:
        """The decision of this caller's latest request (per thread and per asyncio task)."""
        mine = _LAST_DECISION.get()
        if mine is not None and any(d is mine for d in reversed(self.decisions)):
            return mine
        return None

    def create(
        self,
        client: Any,
        *,
        model: str,
        api: str | None = None,
        task: str | None = None,
        deployment_context_limit: int | None = None,
        context_target: int | None = None,
        budget_tokens: int | None = None,
        **options: Any,
    ) -> Any:
        """Send one request with ``client``'s own method; return its result as is.

        Pass ``messages=`` (Chat Completions, Anthropic Messages) or ``input=`` (Responses) and
        any other option the method takes; all are forwarded unchanged except the history list.
        ``api`` (``"chat"``, ``"messages"``, ``"responses"``), ``task``,
        ``deployment_context_limit`` and ``budget_tokens`` are TOMC's own. A stream is returned
        unconsumed. A client this method cannot drive (an async client, a client without the
        format's method) is refused with :class:`tomc.UnsupportedClientError` before anything
        about the session changes.
        """
        dialect, send = self._resolve(client, api, options, want_async=False)
        prepared = self.prepare_request(
            {"model": model, **options},
            api=dialect.name,
            task=task,
            deployment_context_limit=deployment_context_limit,
            context_target=context_target,
            budget_tokens=budget_tokens,
        )
        response = send(**_with_headers(prepared.body, prepared.headers, client))
        if not options.get("stream"):
            # Reading usage from a finished response is free; a stream is left untouched.
            self.observe_usage(dialect.prompt_tokens(response))
        return response

    async def acreate(
        self,
        client: Any,
        *,
        model: str,
        api: str | None = None,
        task: str | None = None,
        deployment_context_limit: int | None = None,
        context_target: int | None = None,
        budget_tokens: int | None = None,
        **options: Any,
    ) -> Any:
        """:meth:`create` for async clients (``AsyncOpenAI``, ``AsyncAnthropic``): awaits the call.

        Deciding and compiling run in a worker thread, so a large compile never blocks the event
        loop.
        """
        dialect, send = self._resolve(client, api, options, want_async=True)
        prepared = await asyncio.to_thread(
            self.prepare_request,
            {"model": model, **options},
            api=dialect.name,
            task=task,
            deployment_context_limit=deployment_context_limit,
            context_target=context_target,
            budget_tokens=budget_tokens,
        )
        _LAST_DECISION.set(prepared.decision)
        response = await send(**_with_headers(prepared.body, prepared.headers, client))
        if not options.get("stream"):
            self.observe_usage(dialect.prompt_tokens(response))
        return response

    def prepare(
        self,
        *,
        model: str,
        messages: Any,
        task: str | None = None,
        deployment_context_limit: int | None = None,
        context_target: int | None = None,
        budget_tokens: int | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[Any, Decision]:
        """Decide one Chat Completions request without sending it: ``(messages, decision)``.

        On pass-through the very ``messages`` object is returned.
        """
        prepared = self.prepare_request(
            {**(options or {}), "model": model, "messages": messages},
            api="chat",
            task=task,
            deployment_context_limit=deployment_context_limit,
            context_target=context_target,
            budget_tokens=budget_tokens,
        )
        return prepared.body["messages"], prepared.decision

    def prepare_request(
        self,
        request: Mapping[str, Any],
        *,
        api: str | None = None,
        task: str | None = None,
        deployment_context_limit: int | None = None,
        context_target: int | None = None,
        budget_tokens: int | None = None,
        thinking_prefix: str | None = None,
    ) -> PreparedRequest:
        """Decide one request body in any supported format without sending it.

        ``request`` is what the SDK method would receive (or the JSON body a gateway received).
        On pass-through the body is the very ``request`` object (as a dict).
        """
        dialect = dialect_for(api or self.api, request)
        if thinking_prefix is not None:
            _check_choice("thinking_prefix", thinking_prefix, THINKING_PREFIX)
        with self._lock:
            self._requests += 1
            plan = RequestPlan(
                dialect,
                request,
                number=self._requests,
                policy=self.refresh_policy,
                default_reserve=self.output_reserve,
            )
            plan.thinking_prefix = thinking_prefix or self.thinking_prefix
            try:
                body, headers = self._decide(
                    plan, task, deployment_context_limit, context_target, budget_tokens
                )
            except (Pass, PassThrough) as passed:
                plan.passthrough(passed.code, passed.reason)
                if passed.code == "agent_compaction":
                    self._compacted(NativeEvent(dialect.name, "completed", passed.reason))
                body, headers = dict(request) if not isinstance(request, dict) else request, {}
            decision = plan.decision(self.rebuilds)
            self.decisions.append(decision)
            if plan.meter is not None:
                self._last_sent = (plan.tokens_after, plan.meter)
        _LAST_DECISION.set(decision)
        logger.info(
            "request %d %s [%s]: %s (%s -> %s tokens, rebuilds %d)",
            decision.request,
            decision.action,
            decision.code,
            decision.reason,
            decision.tokens_before,
            decision.tokens_after,
            decision.rebuilds,
        )
        return PreparedRequest(body, decision, headers)

    def observe_usage(self, usage: Any) -> None:
        """Record the provider's prompt size (an int, usage object or mapping) of the last request.

        Chat Completions' ``prompt_tokens``; Responses' ``input_tokens``; Anthropic's
        ``input_tokens`` plus its cache creation and cache reads (its ``input_tokens`` is only the
        uncached remainder).

        It is the next request's context hint, and when it exceeds what the session estimated
        for that request, the estimate's safety factor rises to match.
        """
        usage = prompt_size(usage)
        if usage is not None:
            with self._lock:
                self._usage_hint = usage
                if self._last_sent is not None:
                    estimated, meter = self._last_sent
                    meter.learn(estimated, usage)

    def on_native_event(self, source: str, event: Any) -> NativeEvent:
        """Feed a host's native compaction event (``"codex"`` or ``"claude"``); never raises."""
        result = read_native_event(source, event)
        with self._lock:
            if result.kind == "completed":
                self._compacted(result)
            else:
                self.native.apply(result)
        logger.info("native event %s: %s (%s)", result.source, result.kind, result.detail)
        return result

    def note_compaction(self, detail: str) -> None:
        """The agent compacted its own history (its compaction request went out): the next
        requests cool down as after a native compaction event."""
        with self._lock:
            self._compacted(NativeEvent("agent", "completed", detail))

    def _compacted(self, event: NativeEvent) -> None:
        if self.native.apply(event):
            # A compacted conversation is a new one for the back-off thresholds.
            self._thresholds_done.clear()

    # ----------------------------------------------------------------- client dispatch

    def _resolve(
        self, client: Any, api: str | None, options: Mapping[str, Any], *, want_async: bool
    ) -> tuple[Dialect, Callable[..., Any]]:
        if api is not None:
            _check_choice("api", api, tuple(DIALECTS))
        name = api or self.api
        candidates = [DIALECTS[name]] if name else _guess(options)
        for dialect in candidates:
            send = dialect.endpoint(client)
            if send is None:
                continue
            is_async = inspect.iscoroutinefunction(inspect.unwrap(send))
            if is_async != want_async:
                method, other = ("create", "acreate") if want_async else ("acreate", "create")
                raise UnsupportedClientError(
                    f"{type(client).__name__} is {'an async' if is_async else 'a sync'} client: "
                    f"use session.{other}(...) with it, not session.{method}(...)"
                )
            return dialect, send
        wanted = ", ".join(f"{d.name} ({d.method_name})" for d in candidates)
        raise UnsupportedClientError(
            f"{type(client).__name__} has no method for {wanted}; pass a Chat Completions, "
            "Anthropic Messages or OpenAI Responses client (or name the format with api=...)"
        )

    # ----------------------------------------------------------------- decision steps

    def _decide(
        self,
        plan: RequestPlan,
        task: str | None,
        deployment_limit: int | None,
        target: int | None,
        explicit_budget: int | None,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        gate = self.native.gate()  # every logical request counts toward pause and cooldown
        profile = self.profiles.get(plan.model) if isinstance(plan.model, str) else None
        plan.meter = self._meter(profile)
        limit = deployment_limit if deployment_limit is not None else self.deployment_context_limit
        window = effective_window(profile, limit)
        target = target if target is not None else self.context_target
        if target is not None and target <= 0:
            raise Pass("invalid_request", f"context_target must be positive, not {target}")
        if window is None and target is not None:
            # A target alone is enough: the prompt is kept under it whatever the model.
            window = target + plan.output_reserve
        if window is None:  # decided before reading anything: such a request costs nothing
            raise Pass(
                "unknown_model",
                f"unknown model {plan.model!r}: no bundled profile, no "
                "deployment_context_limit and no context_target, so no capacity is assumed",
            )
        # Read even while a native compaction pauses the session, so the item cache stays warm.
        plan.read(self._items)
        if gate is not None:
            raise Pass(*gate)
        plan.window = window
        plan.fit_limit = window - plan.output_reserve
        if target is not None and target < plan.fit_limit:
            plan.fit_limit = target
        plan.target = target
        self._backoff(plan)
        explicit = explicit_budget if explicit_budget is not None else self.budget_tokens
        frozen = self._frozen
        why = "" if frozen is None else self._stale(frozen, plan, explicit)
        if frozen is not None and not why:
            view, view_tokens = build_view(plan, frozen.segments)
            if view_tokens > plan.fit_limit:
                why = f"reused view ({view_tokens:,} tokens) would not fit {plan.fit_limit:,}"
            elif self.refresh_policy == "cadence" and (
                self._requests - frozen.built_request >= self.refresh_every
            ):
                why = f"cadence: refresh every {self.refresh_every} request(s)"
            elif grown := self._growth(plan, frozen.built_len):
                why = grown
            else:
                # Frozen segments stand for whole groups of a history that passed the pairing
                # check, so the view needs no second check on reuse.
                finished = self._finish(plan, view, frozen.segments, check=False)
                plan.use(frozen.segments, view_tokens, "reused", "frozen memory reused")
                return finished
        if self.refresh_policy == "stable":
            fits = plan.tokens_before <= plan.fit_limit
            trigger = (
                f"history of {plan.tokens_before:,} tokens does not fit {plan.fit_limit:,} "
                f"(window {window:,} - output {plan.output_reserve:,})"
                if not fits
                else ("explicit budget_tokens given" if explicit else self._growth(plan, 0))
            )
            if not trigger:
                if why:
                    self._frozen = None
                prefix = f"{why}; " if why else ""
                raise Pass(
                    "fits",
                    f"{prefix}fits: {plan.tokens_before:,} of {plan.fit_limit:,} tokens "
                    "available; nothing rewritten (the stable policy keeps the full prefix)",
                )
            why = f"{why}; {trigger}" if why else trigger
        elif not why:
            why = "cadence: first build"
        return self._build(plan, task, explicit, why)

    def _meter(self, profile: ModelProfile | None) -> TokenMeter:
        encoding = profile.encoding if profile else None
        meter = self._meters.get(encoding)
        if meter is None:
            meter = self._meters[encoding] = meter_for(encoding)
        return meter

    def _backoff(self, plan: RequestPlan) -> None:
        if self._usage_hint is not None:
            # Usage describes the previous request; it is used once, then estimates take over.
            plan.hint, plan.hint_source, self._usage_hint = self._usage_hint, "usage", None
        else:
            plan.hint, plan.hint_source = plan.tokens_before, "estimate"
        window = plan.window or 0
        crossed = [
            share
            for share in self.backoff_thresholds
            if share not in self._thresholds_done and plan.hint >= share * window
        ]
        if not crossed:
            return
        self._thresholds_done.update(crossed)
        reason = (
            f"backoff: context hint {plan.hint:,} ({plan.hint_source}) first crossed "
            f"{max(crossed):.0%} of the effective window {window:,}"
        )
        if plan.tokens_before <= plan.fit_limit:
            raise Pass("backoff", reason)
        plan.notes.append(f"{reason}, but the unchanged request would not fit")

    def _stale(self, frozen: Frozen, plan: RequestPlan, explicit: int | None) -> str:
        if frozen.dialect != plan.dialect.name:
            return "the request format changed"
        entries = plan.entries
        if len(entries) < len(frozen.entries) or any(
            a is not b for a, b in zip(frozen.entries, entries, strict=False)
        ):
            return "history before the boundary was edited"
        if explicit != frozen.explicit_budget:
            return "the explicit budget changed"
        return ""

    def _growth(self, plan: RequestPlan, since: int) -> str:
        if self.stable_growth_tokens is None:
            return ""
        grown = sum(entry.tokens for entry in plan.entries[since:])
        if grown < self.stable_growth_tokens:
            return ""
        return f"{grown:,} new history tokens (stable_growth_tokens={self.stable_growth_tokens:,})"

    def _build(
        self, plan: RequestPlan, task: str | None, explicit: int | None, why: str
    ) -> tuple[dict[str, Any], dict[str, str]]:
        entries = plan.entries
        layout = self._layout(plan)
        task_text = task if task is not None else _task_text(entries, layout)
        if not layout.regions:
            raise Pass(
                "nothing_to_compile",
                f"{why}; but everything left is protected (instructions, the task, the recent "
                "items and pending tool protocol)",
            )
        if not task_text.strip():
            raise Pass("no_task", f"{why}; but there is no task (no user message, none given)")
        built = self._append(plan, layout, task_text, explicit, why)
        if built is None:
            kind = "merge" if self._frozen is not None else "build"
            built = self._build_whole(plan, layout, task_text, explicit, why)
        else:
            kind = "append"
        segments, view, view_tokens = built
        if view_tokens > plan.fit_limit:
            raise Pass(
                "cannot_fit",
                f"{why}; but even the rewritten request ({view_tokens:,} tokens) would not fit "
                f"{plan.fit_limit:,}",
            )
        if view_tokens >= plan.tokens_before:
            raise Pass(
                "no_shrink",
                f"{why}; compilation did not shrink the request "
                f"({plan.tokens_before:,} -> {view_tokens:,})",
            )
        # The format's last rules come first: a request they refuse freezes nothing.
        finished = self._finish(plan, view, segments)
        self._frozen = Frozen(
            segments=segments,
            entries=tuple(entries[: segments[-1].region.end]),
            explicit_budget=explicit,
            built_request=self._requests,
            built_len=len(entries),
            dialect=plan.dialect.name,
        )
        self.rebuilds += 1
        plan.rebuild = kind
        plan.use(segments, view_tokens, "compiled", why)
        return finished

    def _layout(self, plan: RequestPlan) -> Layout:
        """The layout with the longest recent tail (``keep_recent_messages``, shortened down to
        ``min_recent_messages`` when it must be) that still leaves a whole build its headroom:
        big tool outputs in the raw tail would otherwise fill the window right after a build,
        and every request would rebuild (a cache miss each)."""
        entries = plan.entries
        want = self._headroom(plan, whole=True)
        layout = plan_layout(entries, self.keep_recent_messages)
        for keep in range(self.keep_recent_messages - 2, self.min_recent_messages - 1, -2):
            raw = plan.tokens_before - sum(raw_tokens(entries, r) for r in layout.regions)
            if raw + MIN_BUDGET + want <= plan.fit_limit:
                break
            shorter = plan_layout(entries, keep)
            if shorter.tail == layout.tail:
                continue
            layout = shorter
        return layout

    def _headroom(self, plan: RequestPlan, *, whole: bool = False) -> int:
        """Tokens left free after an append (``growth_headroom``), or after a whole build
        (:data:`WHOLE_BUILD_HEADROOM` times that, at most 90% of the prompt budget)."""
        fraction = self.growth_headroom
        if whole:
            fraction = min(0.9, WHOLE_BUILD_HEADROOM * fraction)
        return int(fraction * plan.fit_limit)

    def _append(
        self, plan: RequestPlan, layout: Layout, task: str, explicit: int | None, why: str
    ) -> tuple[tuple[Segment, ...], list[Any], int] | None:
        """One more memory block after the frozen ones (their bytes, and so the provider's
        cached prefix, stay as they were), or ``None`` when the work memory must be rebuilt."""
        frozen = self._frozen
        if frozen is None or explicit is not None or self._stale(frozen, plan, explicit):
            return None
        append = plan_append(plan, layout, frozen.segments, self._headroom(plan))
        if append is None:
            return None
        block = self._compile(plan, layout, append.region, task, append.budget, why, True)
        segments = (*append.kept, block)
        view, view_tokens = build_view(plan, segments)
        for _ in range(_FIT_ATTEMPTS - 1):
            if view_tokens <= plan.fit_limit:
                break
            block = self._shrunk(plan, layout, block, view_tokens - plan.fit_limit, task, why)
            segments = (*append.kept, block)
            view, view_tokens = build_view(plan, segments)
        if view_tokens > plan.fit_limit or block.tokens >= raw_tokens(plan.entries, append.region):
            return None
        return segments, view, view_tokens

    def _build_whole(
        self, plan: RequestPlan, layout: Layout, task: str, explicit: int | None, why: str
    ) -> tuple[tuple[Segment, ...], list[Any], int]:
        segments = self._segments(plan, layout, task, explicit, why)
        view, view_tokens = build_view(plan, segments)
        for _ in range(_FIT_ATTEMPTS - 1):
            if view_tokens <= plan.fit_limit:
                break
            # A memory measured a little over its estimate (BPE is not additive across lines):
            # take the overflow off the largest segment and build it again.
            largest = max(range(len(segments)), key=lambda k: segments[k].tokens)
            smaller = self._shrunk(
                plan, layout, segments[largest], view_tokens - plan.fit_limit, task, why
            )
            segments = (*segments[:largest], smaller, *segments[largest + 1 :])
            view, view_tokens = build_view(plan, segments)
        return segments, view, view_tokens

    def _segments(
        self, plan: RequestPlan, layout: Layout, task: str, explicit: int | None, why: str
    ) -> tuple[Segment, ...]:
        entries = plan.entries
        for region in layout.regions:
            for index in range(region.start, region.end):
                if entries[index].blocker and not entries[index].kept:
                    raise Pass(
                        "unsupported_content",
                        f"{why}; but item {index} would need compiling and carries "
                        f"{entries[index].blocker}",
                    )
        budgets, reusable = self._budgets(plan, layout, explicit)
        if min(budgets) <= 0:
            raise Pass(
                "cannot_fit",
                f"{why}; but protected items and the output reservation leave no room for a "
                f"memory ({sum(budgets):,} tokens)",
            )
        segments = []
        for region, budget in zip(layout.regions, budgets, strict=True):
            if region in reusable:
                segments.append(reusable[region])
                continue
            segment = self._compile(plan, layout, region, task, budget, why)
            # A memory never costs more than what it replaces: such a region stays raw, as does
            # one the compiler gave back unchanged (nothing in it to compile).
            if segment.strategy != "unchanged" and segment.tokens < raw_tokens(entries, region):
                segments.append(segment)
        if not segments:
            raise Pass("no_shrink", f"{why}; but no memory would be smaller than its history")
        return tuple(segments)

    def _budgets(
        self, plan: RequestPlan, layout: Layout, explicit: int | None
    ) -> tuple[list[int], dict[Region, Segment]]:
        """Memory budgets per region, and segments of the frozen memory that can stay as they are.

        Each region wants the compiler's default budget for its size. When the window constrains,
        what is left after the protected items, less ``growth_headroom`` of the window, is shared
        in proportion; an unchanged history segment is kept (its prefix stays cached) as long as
        the work region still gets room.
        """
        entries = plan.entries
        inside = sum(entries[i].tokens for r in layout.regions for i in range(r.start, r.end))
        instructions = sum(
            entries[i].tokens
            for r in layout.regions
            for i in range(r.start, r.end)
            if entries[i].kept
        )
        memory_overhead = ITEM_OVERHEAD * len(layout.regions)
        available = plan.fit_limit - (plan.tokens_before - inside) - instructions - memory_overhead
        sizes = [raw_tokens(entries, r) for r in layout.regions]
        if explicit:
            wanted = [max(1, explicit * size // max(1, sum(sizes))) for size in sizes]
        else:
            wanted = [default_budget(size) for size in sizes]
        reusable: dict[Region, Segment] = {}
        frozen = self._frozen
        if frozen is not None and not self._stale(frozen, plan, explicit):
            for segment in frozen.segments:
                if segment.region.kind == HISTORY and segment.region in layout.regions:
                    reusable[segment.region] = segment
        # A whole build leaves its larger headroom (room for the raw steps still to come and the
        # blocks appended before the next whole build); a tight window gets what it can: the
        # single headroom, else at least MIN_BUDGET.
        room = min(available, MIN_BUDGET)
        for leave in (self._headroom(plan, whole=True), self._headroom(plan)):
            if available - leave >= MIN_BUDGET:
                room = available - leave
                break
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

    def _compile(
        self,
        plan: RequestPlan,
        layout: Layout,
        region: Region,
        task: str,
        budget: int,
        why: str,
        continued: bool = False,
    ) -> Segment:
        entries = plan.entries
        started = time.perf_counter()
        focus = entries[layout.tail :] if self.work_query == "task+step" else ()
        role = self._memory_role(plan.dialect)
        # The memory item's framing counts against the budget too, so the text gets what is
        # left; should the item still come out over (a meter that rounds), the text is rebuilt
        # smaller by the excess. The segment's tokens never exceed its budget.
        framing = read_item(plan.dialect, plan.meter, plan.dialect.memory_item("", role), 0).tokens
        text_budget = max(0, budget - framing)
        for _ in range(3):
            try:
                memory = build_region_memory(
                    entries[region.start : region.end],
                    kind=region.kind,
                    task=task,
                    focus=focus,
                    later=entries[region.end :],
                    budget=text_budget,
                    meter=plan.meter,
                    strategy=self.strategy,
                    compiler=self._compiler,
                    first_call_number=1 + sum(len(e.calls) for e in entries[: region.start]),
                    continued=continued,
                )
            except Exception as exc:  # fail open: the caller's request must still go out
                logger.warning("compilation failed; passing through", exc_info=True)
                raise Pass(
                    "compile_error", f"{why}; compilation failed ({type(exc).__name__}: {exc})"
                ) from exc
            item = plan.dialect.memory_item(memory.text, role)
            entry = read_item(plan.dialect, plan.meter, item, region.start)
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
        self, plan: RequestPlan, layout: Layout, segment: Segment, over: int, task: str, why: str
    ) -> Segment:
        budget = segment.budget - over - max(16, segment.budget // 20)
        if budget <= 0:
            return segment
        continued = segment.text.startswith(CONTINUED_PREFIX)
        return self._compile(plan, layout, segment.region, task, budget, why, continued)

    def _memory_role(self, dialect: Dialect) -> str:
        return self.memory_role if self.memory_role in dialect.memory_roles else "user"

    def _finish(
        self, plan: RequestPlan, view: list[Any], segments: Sequence[Segment], *, check: bool = True
    ) -> tuple[dict[str, Any], dict[str, str]]:
        problems = plan.dialect.pairing(view_entries(plan, segments)) if check else []
        if problems:  # cannot happen for a valid original; refuse rather than send it
            raise Pass("pairing_broken", f"the rewrite would break the format: {problems[0]}")
        body = plan.dialect.with_items(plan.request, view)
        newest = segments[-1].item
        index = next((i for i in range(len(view) - 1, -1, -1) if view[i] is newest), None)
        if index is not None:
            body = plan.dialect.cache_memory(body, index)
        return plan.dialect.finalize(
            body, _raw_after_change(plan.entries, segments), plan.thinking_prefix
        )


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


def _check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        raise InvalidOptionError(
            f"{name} must be one of {', '.join(map(repr, choices))}, not {value!r}"
        )


def _with_headers(body: dict[str, Any], headers: Mapping[str, str], client: Any) -> dict[str, Any]:
    """``body`` with ``headers`` joined to the caller's own values of the same (case-insensitive)
    names: from the call's ``extra_headers``, else from the client's ``default_headers``, so a
    beta the caller set anywhere is kept beside the one added."""
    if not headers:
        return body
    merged = dict(body.get("extra_headers") or {})
    defaults = getattr(client, "default_headers", None)
    defaults = defaults if isinstance(defaults, Mapping) else {}
    for key, value in headers.items():
        name = next((k for k in merged if k.lower() == key.lower()), None)
        if name is None:
            existing = next((v for k, v in defaults.items() if k.lower() == key.lower()), None)
            name = key
        else:
            existing = merged[name]
        parts = [part.strip() for part in str(existing or "").split(",") if part.strip()]
        merged[name] = ",".join([*parts, value]) if value not in parts else ",".join(parts)
    return {**body, "extra_headers": merged}
