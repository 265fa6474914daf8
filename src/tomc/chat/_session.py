"""AutomaticChatSession: rewrite only old history, keep prefix caches warm, fail open.

One session per conversation. Every ``create`` call is one logical model request (an agent makes
many per user message); it forwards the caller's client, model and options unchanged and changes
only the history list, in whichever wire format the client speaks (see :mod:`.dialects`).

The session is the public face of four parts: its options (:mod:`._options`), what it learned
about the conversation (:mod:`._state`), the policy that decides each request and the steps that
rebuild its memory (:mod:`._policy`, :mod:`._rebuild`), and the driving of the caller's client
(:mod:`._client`).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields, replace
from typing import Any

from .._core.errors import InvalidOptionError
from ._account import assess, cache_miss, charge
from ._client import acall, call
from ._deadline import LateRebuild, RebuildClock
from ._decision import Decision
from ._meter import learned_factor
from ._native import NativeEvent, read_native_event
from ._options import THINKING_PREFIX, SessionOptions, check_choice
from ._plan import PreparedRequest
from ._policy import Caches, plan_request
from ._profiles import ModelProfile, ProfileTable
from ._state import ConversationState
from .dialects import CachePricing, Dialect, dialect_for
from .dialects._base import cached_size, prompt_size

__all__ = ["AutomaticChatSession", "PreparedRequest"]

logger = logging.getLogger("tomc.chat")
_DEFAULTS = {option.name: option.default for option in fields(SessionOptions)}
#: An exactly counted model learns a margin only from prompts at least this large.
EXACT_MARGIN_FLOOR = 4096

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

    The keywords are those of :class:`~tomc.chat.SessionOptions`; ``options=`` passes them as one
    value instead. What the session learns about its conversation is :attr:`state`, which can be
    saved and loaded. A session is one conversation: use one per conversation, from any number of
    threads. Each caller sees its own request's decision in :attr:`last_decision`.
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
        cost_policy: str = "priced",
        cache_ttl_s: float | None = None,
        max_overshoot: float = 0.01,
        payback_requests: int = 4,
        compile_floor: int = 32_000,
        memory_floor: int = 8192,
        compile_deadline_s: float | None = None,
        options: SessionOptions | None = None,
    ) -> None:
        keywords = {
            "refresh_policy": refresh_policy,
            "refresh_every": refresh_every,
            "stable_growth_tokens": stable_growth_tokens,
            "native_cooldown_requests": native_cooldown_requests,
            "native_pause_limit": native_pause_limit,
            "deployment_context_limit": deployment_context_limit,
            "context_target": context_target,
            "output_reserve": output_reserve,
            "budget_tokens": budget_tokens,
            "keep_recent_messages": keep_recent_messages,
            "min_recent_messages": min_recent_messages,
            "strategy": strategy,
            "model_profiles": model_profiles,
            "memory_role": memory_role,
            "growth_headroom": growth_headroom,
            "backoff_thresholds": backoff_thresholds,
            "work_query": work_query,
            "api": api,
            "thinking_prefix": thinking_prefix,
            "compiler": compiler,
            "cost_policy": cost_policy,
            "cache_ttl_s": cache_ttl_s,
            "max_overshoot": max_overshoot,
            "payback_requests": payback_requests,
            "compile_floor": compile_floor,
            "memory_floor": memory_floor,
            "compile_deadline_s": compile_deadline_s,
        }
        if options is None:
            options = SessionOptions(**keywords)
        else:
            given = [name for name, value in keywords.items() if value != _DEFAULTS[name]]
            if given:
                raise InvalidOptionError(
                    f"pass options=SessionOptions(...) or keywords, not both ({', '.join(given)})"
                )
        #: The session's options (frozen; shared freely between sessions).
        self.options = options
        #: The latest thousand decisions of every caller, oldest first.
        self.decisions: deque[Decision] = deque(maxlen=1000)
        self._state = ConversationState()
        self._caches = Caches(options)
        self._lock = threading.RLock()
        self._clock = RebuildClock()

    # ----------------------------------------------------------------- public surface

    @property
    def last_decision(self) -> Decision | None:
        """The decision of this caller's latest request (per thread and per asyncio task)."""
        mine = _LAST_DECISION.get()
        if mine is not None and any(d is mine for d in reversed(self.decisions)):
            return mine
        return None

    @property
    def state(self) -> ConversationState:
        """A snapshot of what the session learned about its conversation.

        ``session.state.to_json()`` saves it; ``session.state = ConversationState.from_json(text)``
        loads it into a session with the same options, which then decides every later request
        exactly as the session that saved it would have.
        """
        with self._lock:
            return self._state.snapshot()

    @state.setter
    def state(self, state: ConversationState) -> None:
        if not isinstance(state, ConversationState):
            raise InvalidOptionError(
                f"state must be a ConversationState, not {type(state).__name__}"
            )
        with self._lock:
            self._state = state.snapshot()

    @property
    def rebuilds(self) -> int:
        """How many times the memory was built, appended to or merged."""
        return self._state.rebuilds

    @property
    def profiles(self) -> ProfileTable:
        """The model profiles the session looks windows up in (bundled plus overrides)."""
        return self._caches.profiles

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

        def prepare(name: str) -> PreparedRequest:
            return self.prepare_request(
                {"model": model, **options},
                api=name,
                task=task,
                deployment_context_limit=deployment_context_limit,
                context_target=context_target,
                budget_tokens=budget_tokens,
            )

        return call(client, api, self.options.api, options, prepare, self.observe_usage)

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

        def prepare(name: str) -> PreparedRequest:
            return self.prepare_request(
                {"model": model, **options},
                api=name,
                task=task,
                deployment_context_limit=deployment_context_limit,
                context_target=context_target,
                budget_tokens=budget_tokens,
            )

        return await acall(
            client, api, self.options.api, options, prepare, self.observe_usage, _LAST_DECISION.set
        )

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

    def _pricing(
        self, dialect: Dialect, request: Mapping[str, Any], cache_ttl_s: float | None
    ) -> CachePricing:
        """The request's cache prices: its format's, the model's own terms where its profile
        has them, and the lifetime the call or the options name."""
        pricing = dialect.cache_pricing(request)
        model = request.get("model")
        profile = self._caches.profiles.get(model) if isinstance(model, str) else None
        if profile is not None and profile.cache is not None:
            pricing = profile.cache.price(pricing)
        ttl = cache_ttl_s if cache_ttl_s is not None else self.options.cache_ttl_s
        return pricing if ttl is None else replace(pricing, ttl_s=float(ttl))

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
        now: float | None = None,
        cache_ttl_s: float | None = None,
    ) -> PreparedRequest:
        """Decide one request body in any supported format without sending it.

        ``request`` is what the SDK method would receive (or the JSON body a gateway received).
        On pass-through the body is the very ``request`` object (as a dict). ``now`` is when the
        request is sent, in seconds since the epoch (default: the clock): the cost account
        compares it with the provider's cache lifetime (``cache_ttl_s`` for this request, else
        the option, else what the model's profile and the request's format say).
        """
        started = time.perf_counter()
        now = time.time() if now is None else now
        dialect = dialect_for(api or self.options.api, request)
        pricing = self._pricing(dialect, request, cache_ttl_s)
        if thinking_prefix is not None:
            check_choice("thinking_prefix", thinking_prefix, THINKING_PREFIX)
        with self._lock:
            state = self._state
            state.requests += 1
            plan = plan_request(
                self.options,
                state,
                self._caches,
                dialect,
                request,
                task=task,
                deployment_limit=deployment_context_limit,
                target=context_target,
                explicit_budget=budget_tokens,
                thinking_prefix=thinking_prefix or self.options.thinking_prefix,
            )
            verdict = (
                assess(self.options, state.account, pricing, plan, now)
                if plan.tokens_before > 0
                else None
            )
            outcome = self._clock.decide(self.options, state, plan, verdict, self._install_late)
            if verdict is not None:
                charge(state.account, verdict, plan, outcome, now)
            if outcome.code == "agent_compaction":
                self._compacted(NativeEvent(dialect.name, "completed", outcome.reason))
            decision = replace(
                plan.decision(outcome, state.rebuilds), prepare_s=time.perf_counter() - started
            )
            self.decisions.append(decision)
            if plan.meter is not None:
                state.last_sent = (outcome.tokens_after, plan.encoding)
            account = replace(state.account)  # for the log line, outside the lock
        _LAST_DECISION.set(decision)
        logger.info(
            # A forecast in TOMC's own count, never a bill (the gateway logs the provider's).
            "request %d %s [%s%s]: %s (%s -> %s tokens, rebuilds %d; prepared in %.1f ms; "
            "TOMC's estimate so far: %.0f sent against %.0f direct)",
            decision.request,
            decision.action,
            decision.code,
            f" {decision.rebuild}" if decision.rebuild else "",
            decision.reason,
            decision.tokens_before,
            decision.tokens_after,
            decision.rebuilds,
            decision.prepare_s * 1000,
            account.sent,
            account.direct,
        )
        return PreparedRequest(outcome.body, decision, outcome.headers)

    def _install_late(self, job: LateRebuild) -> None:
        """A rebuild that missed its deadline finished (``job.trial`` holds its memory): it
        becomes the frozen memory unless the conversation moved on since it started."""
        took_s = time.perf_counter() - job.started
        with self._lock:
            state = self._state
            moved = state is not job.state or state.frozen is not job.frozen
            if moved or state.rebuilds != job.rebuilds:
                logger.info(
                    "a late rebuild finished after %.1f s; not used (the conversation moved on)",
                    took_s,
                )
                return
            state.frozen, state.rebuilds = job.trial.frozen, job.trial.rebuilds
        logger.info("a late rebuild finished after %.1f s; the next request uses it", took_s)

    def observe_usage(self, usage: Any) -> None:
        """Record the provider's prompt size (an int, usage object or mapping) of the last request.

        Chat Completions' ``prompt_tokens``; Responses' ``input_tokens``; Anthropic's
        ``input_tokens`` plus its cache creation and cache reads (its ``input_tokens`` is only the
        uncached remainder).

        It is the next request's context hint, and when it exceeds what the session estimated
        for that request, the estimate's safety factor rises to match (for a model counted
        exactly, the room kept under its limit grows by the same factor).
        """
        cached = cached_size(usage)
        usage = prompt_size(usage)
        if usage is None:
            return
        with self._lock:
            state = self._state
            state.usage_hint = usage
            missed = cache_miss(state.account, usage, cached) if cached is not None else None
            if missed:
                logger.info("%s (cache misses so far: %d)", missed, state.account.cache_misses)
            if state.last_sent is None:
                return
            estimated, counter = state.last_sent
            # An exact count still misses the provider's own framing of the request: its margin
            # is learned all the same, and keeps that much room under the limit instead.
            meter = self._caches.base_meter(counter or None)
            if meter.exact and estimated < EXACT_MARGIN_FLOOR:
                return  # a small prompt's ratio is mostly the provider's fixed framing
            factor = state.margins.get(counter, meter.factor)
            # An estimate was counted with its factor, an exact count without it.
            learned = learned_factor(factor, estimated, usage, applied=not meter.exact)
            if learned != factor:
                state.margins[counter] = learned

    def on_native_event(self, source: str, event: Any) -> NativeEvent:
        """Feed a host's native compaction event (``"codex"`` or ``"claude"``); never raises."""
        result = read_native_event(source, event)
        with self._lock:
            if result.kind == "completed":
                self._compacted(result)
            else:
                self._state.native.apply(result, self.options.native_cooldown_requests)
        logger.info("native event %s: %s (%s)", result.source, result.kind, result.detail)
        return result

    def note_compaction(self, detail: str) -> None:
        """The agent compacted its own history (its compaction request went out): the next
        requests cool down as after a native compaction event."""
        with self._lock:
            self._compacted(NativeEvent("agent", "completed", detail))

    def _compacted(self, event: NativeEvent) -> None:
        if self._state.native.apply(event, self.options.native_cooldown_requests):
            # A compacted conversation is a new one for the back-off thresholds.
            self._state.thresholds_done.clear()

    def __getattr__(self, name: str) -> Any:
        # The options were attributes of the session before they were one value; reading them
        # there still works.
        options = self.__dict__.get("options")
        if options is not None and name in _DEFAULTS:
            return getattr(options, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
