"""Deciding one request: what it is (:func:`plan_request`) and what to send (:func:`decide`).

Planning reads the request into a frozen :class:`~tomc.chat._plan.RequestPlan`: the model's
window and counter, the history's entries and token counts, the context target, the context
hint and the back-off thresholds; it stops at the first reason to send the request unchanged
(an unknown model, a native compaction, a broken history). Deciding reuses the frozen memory
when it still fits and stands for the same history, sends a request that fits unchanged
(``stable``), and otherwise rebuilds (:mod:`._rebuild`). Both are functions of the session's
options, the conversation's state and the session's caches (:class:`Caches`, which only save
time).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ._account import Verdict
from ._items import ItemCache
from ._meter import TokenMeter, meter_for
from ._options import SessionOptions
from ._plan import Outcome, RequestPlan, leading_kept_tokens
from ._plan import view as build_view
from ._profiles import ProfileTable, effective_window
from ._rebuild import build, finish
from ._state import ConversationState
from .dialects import Dialect, PassThrough

__all__ = ["Caches", "decide", "plan_request"]


class Caches:
    """What a session keeps only to be fast: profile look-ups, counters and per-item reads.

    Dropping them changes no decision: a meter is made again from its encoding and the margin
    the conversation state learned, and an item read again counts the same.
    """

    def __init__(self, options: SessionOptions) -> None:
        self.profiles = ProfileTable(options.model_profiles)
        self.items = ItemCache()
        self._meters: dict[str | None, TokenMeter] = {}
        self._learned: dict[str | None, TokenMeter] = {}

    def base_meter(self, encoding: str | None) -> TokenMeter:
        """The meter for ``encoding`` with its default safety factor."""
        meter = self._meters.get(encoding)
        if meter is None:
            meter = self._meters[encoding] = meter_for(encoding)
        return meter

    def meter(self, encoding: str | None, margin: float | None) -> TokenMeter:
        """The meter for ``encoding`` with the learned ``margin``, if any."""
        base = self.base_meter(encoding)
        if margin is None or base.exact or margin == base.factor:
            return base
        learned = self._learned.get(encoding)
        if learned is None or learned.factor != margin:
            learned = self._learned[encoding] = replace(base, factor=margin)
        return learned


def plan_request(
    options: SessionOptions,
    state: ConversationState,
    caches: Caches,
    dialect: Dialect,
    request: Mapping[str, Any],
    *,
    task: str | None,
    deployment_limit: int | None,
    target: int | None,
    explicit_budget: int | None,
    thinking_prefix: str,
) -> RequestPlan:
    """The plan of request number ``state.requests``; ``passed`` is set when planning already
    found a reason to send it unchanged (the figures it did not reach keep their defaults)."""
    reserve = dialect.output_reserve(request)
    known: dict[str, Any] = {
        "dialect": dialect,
        "request": request,
        "number": state.requests,
        "policy": options.refresh_policy,
        "output_reserve": reserve if reserve is not None else options.output_reserve,
        "thinking_prefix": thinking_prefix,
        "task": task,
        "explicit_budget": explicit_budget
        if explicit_budget is not None
        else options.budget_tokens,
    }
    try:
        _gather(options, state, caches, known, deployment_limit, target)
    except PassThrough as passed:
        known["passed"] = passed
    return RequestPlan(**known)


def _gather(
    options: SessionOptions,
    state: ConversationState,
    caches: Caches,
    known: dict[str, Any],
    deployment_limit: int | None,
    target: int | None,
) -> None:
    """Fill ``known`` step by step, in the order the figures become known."""
    dialect, request, reserve = known["dialect"], known["request"], known["output_reserve"]
    # Every logical request counts toward a native pause and cooldown.
    gate = state.native.gate(options.native_cooldown_requests, options.native_pause_limit)
    model = request.get("model")
    profile = caches.profiles.get(model) if isinstance(model, str) else None
    if (
        profile is not None
        and profile.default_output_tokens
        and (dialect.output_reserve(request) is None)
    ):
        # A request with no output limit gets the model's default: the prompt leaves room.
        reserve = max(reserve, profile.default_output_tokens)
        known["output_reserve"] = reserve
    encoding = profile.encoding if profile else None
    meter = caches.meter(encoding, state.margins.get(encoding or ""))
    known.update(meter=meter, encoding=encoding or "")
    limit = deployment_limit if deployment_limit is not None else options.deployment_context_limit
    window = effective_window(profile, limit)
    target = target if target is not None else options.context_target
    if target is not None and target <= 0:
        raise PassThrough("invalid_request", f"context_target must be positive, not {target}")
    # Under the provider's own compaction threshold, so that it never compacts what TOMC did.
    ceiling = dialect.provider_ceiling(request)
    if ceiling is not None and (target is None or ceiling < target):
        target = ceiling
    if window is None and target is not None:
        # A target alone is enough: the prompt is kept under it whatever the model.
        window = target + reserve
    if window is None:  # decided before reading anything: such a request costs nothing
        raise PassThrough(
            "unknown_model",
            f"unknown model {model!r}: no bundled profile, no "
            "deployment_context_limit and no context_target, so no capacity is assumed",
        )
    # Read even while a native compaction pauses the session, so the item cache stays warm.
    items = dialect.items(request)
    known["items"] = items
    entries = caches.items.read(dialect, meter, items)
    fixed = meter.count(dialect.fixed_text(request))
    before = fixed + sum(entry.tokens for entry in entries)
    stable = fixed + leading_kept_tokens(entries)
    known.update(entries=entries, fixed_tokens=fixed, stable_tokens=stable, tokens_before=before)
    problems = dialect.pairing(entries)
    if problems:
        raise PassThrough("pairing_broken", f"history breaks tool pairing rules: {problems[0]}")
    if gate is not None:
        raise PassThrough(*gate)
    fit_limit = window - reserve
    if target is not None and target < fit_limit:
        fit_limit = target
    margin = state.margins.get(encoding or "")
    if meter.exact and margin is not None and margin > 1:
        fit_limit = int(fit_limit / margin)  # the provider counts this much more than we do
    known.update(window=window, fit_limit=fit_limit, target=target)
    _backoff(options, state, known)


def _backoff(options: SessionOptions, state: ConversationState, known: dict[str, Any]) -> None:
    """The context hint, and a pass (or a note) when it first crosses a back-off threshold."""
    if state.usage_hint is not None:
        # Usage describes the previous request; it is used once, then estimates take over.
        hint, source, state.usage_hint = state.usage_hint, "usage", None
    else:
        hint, source = known["tokens_before"], "estimate"
    known.update(hint=hint, hint_source=source)
    window = known["window"]
    crossed = [
        share
        for share in options.backoff_thresholds
        if share not in state.thresholds_done and hint >= share * window
    ]
    if not crossed:
        return
    state.thresholds_done.update(crossed)
    reason = (
        f"backoff: context hint {hint:,} ({source}) first crossed "
        f"{max(crossed):.0%} of the effective window {window:,}"
    )
    if known["tokens_before"] <= known["fit_limit"]:
        raise PassThrough("backoff", reason)
    known["notes"] = (f"{reason}, but the unchanged request would not fit",)


def decide(
    options: SessionOptions,
    state: ConversationState,
    plan: RequestPlan,
    verdict: Verdict | None = None,
) -> Outcome:
    """What to send for ``plan``: the frozen memory again, the request unchanged, or a rebuilt
    memory (which ``state`` then holds). With the cost account's ``verdict`` (the ``priced``
    cost policy), a rebuild comes before the target demands it where it pays, as deep as it
    pays, and after the cache expired (:mod:`._account`)."""
    if plan.passed is not None:
        return Outcome.unchanged(plan, plan.passed)
    priced = (
        verdict is not None
        and options.cost_policy == "priced"
        and options.refresh_policy == "stable"
    )
    if priced and plan.explicit_budget is None:
        assert verdict is not None
        if verdict.trigger is not None and verdict.trigger < plan.fit_limit:
            early = replace(
                plan,
                fit_limit=verdict.trigger,
                goal=verdict.goal,
                strict=True,
                ceiling=verdict.ceiling,
            )
            try:
                outcome = _decide(options, state, early)
            except PassThrough as passed:
                # Not worth it yet: decided under the target below, saying why.
                waited = f"priced rebuild waits ({verdict.describe()}): {passed.reason}"
                plan = replace(plan, notes=(*plan.notes, waited))
            else:
                if outcome.action == "compiled":
                    note = f"priced ({verdict.describe()})"
                    return replace(outcome, reason=f"{outcome.reason}; {note}")
        # A rebuild the window or the target demands keeps the window's rule (a memory as
        # large as the headroom allows): deeper would cost less but keep less evidence.
    try:
        return _decide(options, state, plan)
    except PassThrough as passed:
        return Outcome.unchanged(plan, passed)


def _decide(options: SessionOptions, state: ConversationState, plan: RequestPlan) -> Outcome:
    frozen = state.frozen
    why = "" if frozen is None else frozen.why_stale(plan)
    if frozen is not None and not why:
        view, view_tokens = build_view(plan, frozen.segments)
        if view_tokens > plan.fit_limit:
            why = f"reused view ({view_tokens:,} tokens) would not fit {plan.fit_limit:,}"
        elif options.refresh_policy == "cadence" and (
            state.requests - frozen.built_request >= options.refresh_every
        ):
            why = f"cadence: refresh every {options.refresh_every} request(s)"
        elif grown := _growth(options, plan, frozen.built_len):
            why = grown
        else:
            # Frozen segments stand for whole groups of a history that passed the pairing
            # check, so the view needs no second check on reuse.
            body, headers = finish(plan, view, frozen.segments, check=False)
            reason = "frozen memory reused"
            return Outcome("reused", "reused", reason, body, headers, view_tokens, frozen.segments)
    if options.refresh_policy == "stable":
        fits = plan.tokens_before <= plan.fit_limit
        trigger = (
            f"history of {plan.tokens_before:,} tokens does not fit {plan.fit_limit:,} "
            f"(window {plan.window:,} - output {plan.output_reserve:,})"
            if not fits
            else (
                "explicit budget_tokens given"
                if plan.explicit_budget
                else _growth(options, plan, 0)
            )
        )
        if not trigger:
            if why:
                state.frozen = None
            prefix = f"{why}; " if why else ""
            raise PassThrough(
                "fits",
                f"{prefix}fits: {plan.tokens_before:,} of {plan.fit_limit:,} tokens "
                "available; nothing rewritten (the stable policy keeps the full prefix)",
            )
        why = f"{why}; {trigger}" if why else trigger
    elif not why:
        why = "cadence: first build"
    return build(options, state, plan, why)


def _growth(options: SessionOptions, plan: RequestPlan, since: int) -> str:
    limit = options.stable_growth_tokens
    if limit is None:
        return ""
    grown = sum(entry.tokens for entry in plan.entries[since:])
    if grown < limit:
        return ""
    return f"{grown:,} new history tokens (stable_growth_tokens={limit:,})"
