"""AutomaticChatSession: rewrite only old history, keep prefix caches warm, fail open.

One session per conversation. Every ``create`` call is one logical model request; it forwards
the caller's client, model and options unchanged and changes only ``messages``.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from ..budget import default_budget
from ..counters import LexicalCounter
from .native import NativeEvent, NativeState, read_native_event
from .profiles import ModelProfile, ProfileTable, effective_window
from .protocol import (
    INSTRUCTION_ROLES,
    OVERHEAD_PER_MESSAGE,
    as_message,
    canonical,
    check_tool_pairing,
    content_text,
    estimate_tokens,
    history_hash,
    latest_user_index,
    message_text,
    protected_boundary,
    unsupported_reason,
)

__all__ = ["AutomaticChatSession", "Decision"]

logger = logging.getLogger("tomc.chat")
_LEXICAL = LexicalCounter()
POLICIES = ("stable", "cadence")
MEMORY_HEADER = (
    "[TOMC memory of {count} earlier messages, compiled on the CPU. It replaces them in this "
    "request: records are exact; source lines are selected excerpts in their original order, "
    "so a detail that is missing here was left out, not absent.]\n"
)
_MAX_CACHED_ESTIMATES = 200_000


@dataclass(frozen=True)
class Decision:
    """What one logical request did, and why.

    ``action`` is ``compiled`` (memory built or rebuilt: a full prefix-cache miss), ``reused``
    (the frozen memory sent again) or ``passthrough`` (messages sent unchanged). Token figures
    are lexical estimates, not provider billing.
    """

    request: int
    action: str
    reason: str
    model: str
    policy: str
    tokens_before: int
    tokens_after: int
    effective_window: int | None
    output_reserve: int
    memory_budget: int | None
    memory_tokens: int | None
    compiled_messages: int
    rebuilds: int
    context_hint: int | None
    hint_source: str | None
    compile_latency_s: float
    applied_strategy: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class _Memory:
    """A built memory: it stands for the non-instruction messages before ``boundary``."""

    boundary: int
    source_hash: str
    text: str
    role: str
    tokens: int
    budget: int
    explicit_budget: int | None
    built_len: int
    built_request: int
    compiled_messages: int
    applied_strategy: str
    latency_s: float


class _Pass(Exception):
    """Control flow inside ``prepare``: send the request unchanged, for this reason."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AutomaticChatSession:
    """A drop-in, cache-friendly wrapper around the caller's Chat Completions client.

    ``create(client, model=..., messages=..., **options)`` calls
    ``client.chat.completions.create`` with the same model and options and a rewritten
    ``messages``: old history becomes one compiled memory message; system and developer
    messages, the latest user message, the ``keep_recent_messages`` most recent messages and any
    pending tool protocol stay byte-identical. Anything the wrapper cannot handle safely passes
    through unchanged, with the reason in :attr:`last_decision`.

    ``refresh_policy="stable"`` (default) freezes the memory so that consecutive requests share
    a prefix; it is (re)built only when the request would not fit, history before the boundary
    changed, the explicit budget changed, or ``stable_growth_tokens`` of new history arrived.
    ``refresh_policy="cadence"`` rebuilds every ``refresh_every`` requests for the latest task;
    it defeats prefix caching and suits only providers without it.
    """

    def __init__(
        self,
        *,
        refresh_policy: str = "stable",
        refresh_every: int = 2,
        stable_growth_tokens: int | None = None,
        native_cooldown_requests: int = 2,
        deployment_context_limit: int | None = None,
        output_reserve: int = 8192,
        budget_tokens: int | None = None,
        keep_recent_messages: int = 6,
        strategy: str = "tomc_raw",
        model_profiles: Mapping[str, ModelProfile | Mapping[str, Any]] | None = None,
        memory_role: str = "user",
        growth_headroom: float = 0.2,
        backoff_thresholds: Sequence[float] = (0.5, 0.9),
    ) -> None:
        if refresh_policy not in POLICIES:
            raise ValueError(f"refresh_policy must be one of {POLICIES}, not {refresh_policy!r}")
        if refresh_every < 1:
            raise ValueError("refresh_every must be >= 1")
        if memory_role not in ("user", "system", "developer", "assistant"):
            raise ValueError(f"unsupported memory_role {memory_role!r}")
        if not 0 <= growth_headroom < 1:
            raise ValueError("growth_headroom must be in [0, 1)")
        for name, value in (
            ("stable_growth_tokens", stable_growth_tokens),
            ("deployment_context_limit", deployment_context_limit),
            ("budget_tokens", budget_tokens),
        ):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive")
        self.refresh_policy = refresh_policy
        self.refresh_every = refresh_every
        self.stable_growth_tokens = stable_growth_tokens
        self.deployment_context_limit = deployment_context_limit
        self.output_reserve = output_reserve
        self.budget_tokens = budget_tokens
        self.keep_recent_messages = keep_recent_messages
        self.strategy = strategy
        self.memory_role = memory_role
        self.growth_headroom = growth_headroom
        self.backoff_thresholds = tuple(sorted(backoff_thresholds))
        self.profiles = ProfileTable(model_profiles)
        self.native = NativeState(native_cooldown_requests)
        self.decisions: deque[Decision] = deque(maxlen=1000)
        self.rebuilds = 0
        self._requests = 0
        self._memory: _Memory | None = None
        self._usage_hint: int | None = None
        self._thresholds_done: set[float] = set()
        self._estimates: dict[str, int] = {}
        self._lock = threading.Lock()

    # ----------------------------------------------------------------- public surface

    @property
    def last_decision(self) -> Decision | None:
        """The decision of the most recent request, or ``None`` before the first."""
        return self.decisions[-1] if self.decisions else None

    def create(
        self,
        client: Any,
        *,
        model: str,
        messages: Any,
        task: str | None = None,
        deployment_context_limit: int | None = None,
        budget_tokens: int | None = None,
        **options: Any,
    ) -> Any:
        """Send one request through ``client.chat.completions.create``; return its result as is.

        ``task`` (default: the latest user message), ``deployment_context_limit`` and
        ``budget_tokens`` are TOMC's own arguments and are not forwarded. Every other keyword is
        forwarded unchanged. A stream is returned unconsumed.
        """
        sent, _ = self.prepare(
            model=model,
            messages=messages,
            task=task,
            deployment_context_limit=deployment_context_limit,
            budget_tokens=budget_tokens,
            options=options,
        )
        response = client.chat.completions.create(model=model, messages=sent, **options)
        if not options.get("stream"):
            # Reading usage from a finished response is free; a stream is left untouched.
            self.observe_usage(getattr(response, "usage", None))
        return response

    def observe_usage(self, usage: Any) -> None:
        """Record the provider's prompt size (int, usage object or mapping) as the next hint."""
        if isinstance(usage, Mapping):
            usage = usage.get("prompt_tokens")
        elif usage is not None and not isinstance(usage, int):
            usage = getattr(usage, "prompt_tokens", None)
        if isinstance(usage, int) and not isinstance(usage, bool) and usage >= 0:
            self._usage_hint = usage

    def on_native_event(self, source: str, event: Any) -> NativeEvent:
        """Feed a host's native compaction event (``"codex"`` or ``"claude"``); never raises."""
        result = read_native_event(source, event)
        with self._lock:
            self.native.apply(result)
        logger.info("native event %s: %s (%s)", result.source, result.kind, result.detail)
        return result

    def prepare(
        self,
        *,
        model: str,
        messages: Any,
        task: str | None = None,
        deployment_context_limit: int | None = None,
        budget_tokens: int | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> tuple[Any, Decision]:
        """Decide one request without sending it: ``(messages to send, decision)``.

        On pass-through the very ``messages`` object is returned.
        """
        with self._lock:
            self._requests += 1
            plan = _Plan(self, model, messages, options or {})
            try:
                sent = self._decide(plan, task, deployment_context_limit, budget_tokens)
            except _Pass as passed:
                plan.action, plan.reason, sent = "passthrough", passed.reason, messages
                plan.tokens_after = plan.tokens_before
            decision = plan.decision()
            self.decisions.append(decision)
        logger.info(
            "request %d %s: %s (%s -> %s tokens, rebuilds %d)",
            decision.request,
            decision.action,
            decision.reason,
            decision.tokens_before,
            decision.tokens_after,
            decision.rebuilds,
        )
        return sent, decision

    # ----------------------------------------------------------------- decision steps

    def _decide(
        self,
        plan: _Plan,
        task: str | None,
        deployment_limit: int | None,
        explicit_budget: int | None,
    ) -> list[Any]:
        gate = self.native.gate()  # every logical request counts toward the cooldown
        plan.read_messages()
        if gate:
            raise _Pass(gate)
        profile = self.profiles.get(plan.model) if isinstance(plan.model, str) else None
        limit = deployment_limit if deployment_limit is not None else self.deployment_context_limit
        window = effective_window(profile, limit)
        if window is None:
            raise _Pass(
                f"unknown model {plan.model!r}: no bundled profile and no "
                "deployment_context_limit, so no capacity is assumed"
            )
        plan.window = window
        plan.fit_limit = window - plan.output_reserve
        self._backoff(plan)
        explicit = explicit_budget if explicit_budget is not None else self.budget_tokens
        memory = self._memory
        why = "" if memory is None else self._stale(memory, plan, explicit)
        if memory is not None and not why:
            view, view_tokens = self._view(plan, memory)
            if view_tokens > plan.fit_limit:
                why = f"reused view ({view_tokens:,} tokens) would not fit {plan.fit_limit:,}"
            elif self.refresh_policy == "cadence" and (
                self._requests - memory.built_request >= self.refresh_every
            ):
                why = f"cadence: refresh every {self.refresh_every} request(s)"
            elif grown := self._growth(plan, memory.built_len):
                why = grown
            else:
                plan.use(memory, view_tokens, "reused", "frozen memory reused; prefix unchanged")
                return view
        if self.refresh_policy == "stable":
            fits = plan.tokens_before <= plan.fit_limit
            trigger = (
                f"history of {plan.tokens_before:,} tokens does not fit {plan.fit_limit:,} "
                f"(window {window:,} - output {plan.output_reserve:,})"
                if not fits
                else ("explicit budget_tokens given" if explicit else self._growth(plan, 0))
            )
            if not trigger:
                self._memory = None if why else memory
                prefix = f"{why}; " if why else ""
                raise _Pass(
                    f"{prefix}fits: {plan.tokens_before:,} of {plan.fit_limit:,} tokens "
                    "available; nothing rewritten (stable policy keeps the full prefix)"
                )
            why = f"{why}; {trigger}" if why else trigger
        elif not why:
            why = "cadence: first build"
        return self._build(plan, task, explicit, why)

    def _backoff(self, plan: _Plan) -> None:
        if self._usage_hint is not None:
            # Usage describes the previous request; it is used once, then strings take over.
            plan.hint, plan.hint_source, self._usage_hint = self._usage_hint, "usage", None
        else:
            chars = sum(len(message_text(message)) for message in plan.normalized)
            plan.hint, plan.hint_source = (chars + 3) // 4, "string-length"
        crossed = [
            share
            for share in self.backoff_thresholds
            if share not in self._thresholds_done and plan.hint >= share * plan.window
        ]
        if not crossed:
            return
        self._thresholds_done.update(crossed)
        reason = (
            f"backoff: context hint {plan.hint:,} ({plan.hint_source}) first crossed "
            f"{max(crossed):.0%} of the effective window {plan.window:,}"
        )
        if plan.tokens_before <= plan.fit_limit:
            raise _Pass(reason)
        plan.notes.append(f"{reason}, but the unchanged request would not fit")

    def _stale(self, memory: _Memory, plan: _Plan, explicit: int | None) -> str:
        if len(plan.normalized) < memory.boundary or (
            history_hash(plan.canon[: memory.boundary]) != memory.source_hash
        ):
            return "history before the boundary was edited"
        if explicit != memory.explicit_budget:
            return "the explicit budget changed"
        if memory.boundary > protected_boundary(plan.normalized, self.keep_recent_messages):
            return "protected messages now fall before the boundary"
        return ""

    def _growth(self, plan: _Plan, since: int) -> str:
        if self.stable_growth_tokens is None:
            return ""
        grown = sum(plan.tokens[since:])
        if grown < self.stable_growth_tokens:
            return ""
        return f"{grown:,} new history tokens (stable_growth_tokens={self.stable_growth_tokens:,})"

    def _view(self, plan: _Plan, memory: _Memory) -> tuple[list[Any], int]:
        kept = [
            index
            for index in range(memory.boundary)
            if plan.normalized[index].get("role") in INSTRUCTION_ROLES
        ]
        view = [plan.messages[index] for index in kept]
        view.append({"role": memory.role, "content": memory.text})
        view.extend(plan.messages[memory.boundary :])
        tokens = (
            sum(plan.tokens[index] for index in kept)
            + memory.tokens
            + sum(plan.tokens[memory.boundary :])
            + plan.tools_tokens
        )
        return view, tokens

    def _build(self, plan: _Plan, task: str | None, explicit: int | None, why: str) -> list[Any]:
        from .. import compile_memory  # the core package imports nothing from chat

        messages = plan.normalized
        boundary = protected_boundary(messages, self.keep_recent_messages)
        region = [i for i in range(boundary) if messages[i].get("role") not in INSTRUCTION_ROLES]
        if not region:
            raise _Pass(f"{why}; but no old history lies before the protected messages")
        if task is None:
            last_user = latest_user_index(messages)
            task = content_text(messages[last_user]) if last_user is not None else ""
        if not task.strip():
            raise _Pass(f"{why}; but there is no task (no user message and no task given)")
        history = [
            {"role": messages[i]["role"], "content": message_text(messages[i])} for i in region
        ]
        old_tokens = sum(plan.tokens[i] for i in region)
        header = MEMORY_HEADER.format(count=len(region))
        header_tokens = _LEXICAL.count(header) + 4
        available = plan.fit_limit - (plan.tokens_before - old_tokens) - header_tokens
        # estimate_tokens() is the lexical count of message_text() plus the per-message overhead.
        text_tokens = old_tokens - OVERHEAD_PER_MESSAGE * len(region)
        target = explicit or default_budget(text_tokens)
        if target > available:
            # The window constrains: leave room to grow, or the next request rebuilds again.
            headroom = int(self.growth_headroom * plan.window)
            target = available - headroom if available - headroom >= 1024 else available
        if target <= 0:
            raise _Pass(
                f"{why}; but protected messages and the output reservation leave no room "
                f"for a memory ({available:,} tokens)"
            )
        try:
            result = compile_memory(
                history, task, budget_tokens=target, strategy=self.strategy, counter="lexical"
            )
        except Exception as exc:  # fail open: the caller's request must still go out
            logger.warning("compilation failed; passing through", exc_info=True)
            raise _Pass(f"{why}; compilation failed ({type(exc).__name__}: {exc})") from exc
        text = header + result.compiled_memory
        tokens = estimate_tokens({"role": self.memory_role, "content": text})
        if tokens >= old_tokens:
            raise _Pass(
                f"{why}; compilation did not shrink the old history ({old_tokens:,} -> {tokens:,})"
            )
        memory = _Memory(
            boundary=boundary,
            source_hash=history_hash(plan.canon[:boundary]),
            text=text,
            role=self.memory_role,
            tokens=tokens,
            budget=target,
            explicit_budget=explicit,
            built_len=len(messages),
            built_request=self._requests,
            compiled_messages=len(region),
            applied_strategy=result.applied_strategy,
            latency_s=result.latency_s,
        )
        view, view_tokens = self._view(plan, memory)
        problems = check_tool_pairing(
            [as_message(message) or {} for message in view], allow_pending_tail=True
        )
        if problems:  # cannot happen for a valid original; refuse rather than send it
            raise _Pass(f"{why}; the rewrite would break tool pairing: {problems[0]}")
        self._memory = memory
        self.rebuilds += 1
        if view_tokens > plan.fit_limit:
            plan.notes.append(f"still over the window by {view_tokens - plan.fit_limit:,} tokens")
        plan.use(memory, view_tokens, "compiled", why)
        return view

    def _estimate(self, canon: str, message: Mapping[str, Any]) -> int:
        tokens = self._estimates.get(canon)
        if tokens is None:
            if len(self._estimates) >= _MAX_CACHED_ESTIMATES:
                self._estimates.clear()
            tokens = self._estimates[canon] = estimate_tokens(message)
        return tokens


class _Plan:
    """The facts and figures gathered for one request while it is being decided."""

    def __init__(
        self, session: AutomaticChatSession, model: str, messages: Any, options: Mapping[str, Any]
    ) -> None:
        self.session = session
        self.model = model
        self.messages = messages
        self.request = session._requests
        self.action = "passthrough"
        self.reason = ""
        self.notes: list[str] = []
        self.normalized: list[dict[str, Any]] = []
        self.canon: list[str] = []
        self.tokens: list[int] = []
        tools = [options.get(key) for key in ("tools", "functions") if options.get(key)]
        self.tools_tokens = _LEXICAL.count(canonical({"tools": tools})) if tools else 0
        self.tokens_before = 0
        self.tokens_after = 0
        self.window: int | None = None
        self.fit_limit = 0
        self.hint: int | None = None
        self.hint_source: str | None = None
        self.memory: _Memory | None = None
        # Planning hint only: the request's own output limit wins, and is never rewritten.
        reserve = options.get("max_completion_tokens") or options.get("max_tokens")
        self.output_reserve = reserve if isinstance(reserve, int) else session.output_reserve

    def read_messages(self) -> None:
        if not isinstance(self.messages, list | tuple):
            raise _Pass(f"messages is a {type(self.messages).__name__}, not a list")
        for index, message in enumerate(self.messages):
            data = as_message(message)
            if data is None:
                raise _Pass(f"message {index} is a {type(message).__name__}, not a mapping")
            self.normalized.append(data)
        unsupported = unsupported_reason(self.normalized)
        if unsupported:
            raise _Pass(f"unsupported history: {unsupported}")
        problems = check_tool_pairing(self.normalized, allow_pending_tail=True)
        if problems:
            raise _Pass(f"history breaks tool pairing rules: {problems[0]}")
        self.canon = [canonical(message) for message in self.normalized]
        self.tokens = [
            self.session._estimate(text, message)
            for text, message in zip(self.canon, self.normalized, strict=True)
        ]
        self.tokens_before = self.tokens_after = sum(self.tokens) + self.tools_tokens

    def use(self, memory: _Memory, view_tokens: int, action: str, reason: str) -> None:
        self.memory, self.tokens_after, self.action, self.reason = (
            memory,
            view_tokens,
            action,
            reason,
        )

    def decision(self) -> Decision:
        memory = self.memory
        reason = "; ".join([self.reason, *self.notes]) if self.notes else self.reason
        return Decision(
            request=self.request,
            action=self.action,
            reason=reason,
            model=str(self.model),
            policy=self.session.refresh_policy,
            tokens_before=self.tokens_before,
            tokens_after=self.tokens_after,
            effective_window=self.window,
            output_reserve=self.output_reserve,
            memory_budget=memory.budget if memory else None,
            memory_tokens=memory.tokens if memory else None,
            compiled_messages=memory.compiled_messages if memory else 0,
            rebuilds=self.session.rebuilds,
            context_hint=self.hint,
            hint_source=self.hint_source,
            compile_latency_s=memory.latency_s if memory and self.action == "compiled" else 0.0,
            applied_strategy=memory.applied_strategy if memory else None,
        )
