"""The conversation's cost account: what its requests were billed, against going direct.

Under prompt caching a rewrite is a purchase: everything after its first changed byte is
written into the provider's cache again (1.25x an input token on Anthropic and on OpenAI's
newest models), while going direct would have read the whole old prefix back at 0.1x. Each
later request then saves 0.1x of what the rewrite dropped. So compiling a prompt of ``C``
tokens down to ``T`` pays back after ``(w T - r C) / (r (C - T))`` requests (``w``, ``r`` the
write and read prices): about 100 requests when ``T = 0.9 C``, about 4 when ``T = 0.3 C``.

The account keeps, in the session's own token estimates, what every request so far would have
been billed direct (:attr:`CostAccount.direct`) and what was billed for what TOMC sent
(:attr:`CostAccount.sent`). :func:`assess` turns it into a :class:`Verdict` for one request:

- **how deep** a rebuild goes (:attr:`Verdict.goal`): the prompt it leaves must pay back within
  ``payback_requests`` requests, and the rebuild request may cost more than the same request
  direct by no more than the savings banked so far plus ``max_overshoot`` of what direct would
  have billed so far: a conversation is never billed much above direct at any request;
- **when** to rebuild before the context target (:attr:`Verdict.trigger`): the prompt size at
  which one more rebuild costs less than carrying the grown prompt, from the size a rebuild
  leaves and the rate the prompt grows (the classic ordering-cost square root:
  ``T_low + sqrt(2 (w - r) T_low D / r)``), never below ``compile_floor``;
- **a cold cache** (:attr:`Verdict.cold`): a request that comes after a pause longer than the
  cache's lifetime is a full cache write direct as well, so a deep rewrite costs nothing extra.

Everything here is pure arithmetic on the account, the plan and the time given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ._options import SessionOptions
from ._plan import Outcome, RequestPlan
from .dialects import CachePricing

__all__ = ["CACHE_MISS_MARGIN", "CostAccount", "Verdict", "assess", "cache_miss", "charge"]

#: How much of a new growth figure the running estimate takes (an exponential average).
_GROWTH_WEIGHT = 0.3
#: A rewrite is a cache miss when the provider read a share of its prompt from the cache this
#: much below the share the account priced (the counts differ a little: the session's estimate
#: against the provider's tokenizer, and caches hit in steps).
CACHE_MISS_MARGIN = 0.1


@dataclass
class CostAccount:
    """What a conversation was billed so far and what going direct would have cost, in
    uncached-input-token equivalents of the session's own token estimates."""

    #: Billed input had every request gone out unchanged.
    direct: float = 0.0
    #: Billed input of what was sent.
    sent: float = 0.0
    #: The latest request's prompt as the client sent it, and as it went out.
    direct_prompt: int = 0
    sent_prompt: int = 0
    #: When the latest request was prepared (seconds since the epoch), ``None`` before any.
    seen_at: float | None = None
    #: How many tokens the client's prompt grows per request (a running average).
    growth: float = 0.0
    #: The prompt a rebuild last left (0 before the first).
    floor: int = 0
    #: Of the latest request, when it was a rewrite: the prompt prefix the account priced as read
    #: from the provider's cache, and the prompt (0: no rewrite to check).
    expected_cached: int = 0
    expected_prompt: int = 0
    #: Rewrites whose provider read clearly less from its cache than the account priced.
    cache_misses: int = 0

    @property
    def saved(self) -> float:
        """What TOMC saved so far (negative when it cost more)."""
        return self.direct - self.sent


@dataclass(frozen=True)
class Verdict:
    """What the account says about one request (see the module docstring)."""

    pricing: CachePricing
    #: The cache has expired since the latest request.
    cold: bool
    #: What this request costs sent unchanged.
    direct_cost: float
    #: The largest prompt a rebuild of this request should leave.
    goal: int
    #: The prompt size from which a rebuild pays before the target demands one (``None``:
    #: only the target may demand one).
    trigger: int | None
    #: The largest prompt the rebuild request's allowance pays for (``None``: a cold cache,
    #: where direct writes the whole prompt too).
    ceiling: int | None = None

    def describe(self) -> str:
        state = "cold cache" if self.cold else "warm cache"
        trigger = f", priced trigger {self.trigger:,}" if self.trigger is not None else ""
        return f"{state}, rebuild goal {self.goal:,}{trigger}"


def is_cold(account: CostAccount, pricing: CachePricing, now: float) -> bool:
    """Whether the conversation's cache has expired when a request comes at ``now``: its
    previous request came longer than the cache lifetime ago. (Of a conversation's first
    request nothing is known: it is not taken as cold, so it is not rewritten early.)"""
    return account.seen_at is not None and now - account.seen_at > pricing.ttl_s


def _direct_cost(account: CostAccount, pricing: CachePricing, prompt: int, cold: bool) -> float:
    warm = not cold and account.seen_at is not None
    cached = account.direct_prompt if warm and prompt >= account.direct_prompt else 0
    return pricing.read * cached + pricing.write * (prompt - cached)


def assess(
    options: SessionOptions,
    account: CostAccount,
    pricing: CachePricing,
    plan: RequestPlan,
    now: float,
) -> Verdict:
    """The account's verdict on ``plan``, a request prepared at ``now``."""
    write, read = pricing.write, pricing.read
    prompt = plan.tokens_before
    cold = is_cold(account, pricing, now)
    direct_cost = _direct_cost(account, pricing, prompt, cold)
    # A rebuild that pays back within k requests leaves at most this share of the prompt.
    k = options.payback_requests
    otherwise = prompt
    if not cold and account.seen_at is not None and account.sent_prompt < account.direct_prompt:
        # After a rewrite the alternative to a rebuild is not going direct but sending the
        # view that is frozen now, grown by what the client added since. (After a pause that
        # view is written whole again, so any smaller prompt pays at once: the depth stays
        # the payback share of the client's prompt, which a raw tail of big outputs still
        # fits under.)
        grown = max(0, prompt - account.direct_prompt)
        otherwise = min(prompt, account.sent_prompt + grown)
    goal = otherwise * read * (1 + k) / (write + k * read)
    ceiling: int | None = None
    if not cold:
        # What the rebuild request may cost above direct's price of the same request: the
        # savings banked so far, plus a sliver of what direct has billed so far.
        allowance = options.max_overshoot * account.direct + account.saved
        kept = plan.stable_tokens  # the instructions and tools stay cached through a rebuild
        afford = kept + (direct_cost + allowance - read * kept) / write
        goal = min(goal, afford)
        ceiling = max(0, int(afford))
    goal = max(0, int(goal))
    low = account.floor or goal
    growth = max(account.growth, 1.0)
    top = low + math.sqrt(2 * (write - read) * low * growth / read) if low > 0 else 0
    trigger: int | None = max(options.compile_floor, int(top))
    if cold:
        trigger = max(options.compile_floor, goal)
    elif account.seen_at is None:
        # The first request seen: whether the provider still has it cached is not known (a
        # gateway restarted mid-conversation), so only the target may have it rewritten.
        trigger = None
    return Verdict(pricing, cold, direct_cost, goal, trigger, ceiling)


def charge(
    account: CostAccount, verdict: Verdict, plan: RequestPlan, outcome: Outcome, now: float
) -> None:
    """Enter one decided request in ``account``: what it cost as sent and what it would have
    cost direct."""
    pricing = verdict.pricing
    before, after = plan.tokens_before, outcome.tokens_after
    seen_before = account.seen_at is not None
    if verdict.cold or account.seen_at is None:
        kept = 0  # nothing of the conversation is in the cache
    elif outcome.action == "compiled":
        kept = outcome.kept_prefix
    elif account.sent_prompt == account.direct_prompt and outcome.action == "passthrough":
        kept = account.sent_prompt  # unchanged after unchanged: the whole old prompt
    elif outcome.action == "reused":
        kept = account.sent_prompt  # the frozen view only grows between rebuilds
    else:
        kept = plan.stable_tokens  # unchanged after a rewrite: only the instructions match
    kept = min(kept, after)
    if account.seen_at is not None and before >= account.direct_prompt:
        grown = before - account.direct_prompt
        account.growth = (
            float(grown)
            if account.growth == 0
            else (1 - _GROWTH_WEIGHT) * account.growth + _GROWTH_WEIGHT * grown
        )
    account.direct += verdict.direct_cost
    account.sent += pricing.read * kept + pricing.write * (after - kept)
    account.direct_prompt, account.sent_prompt = before, after
    account.seen_at = float(now)
    # How deep a rewrite may go rests on the instructions and tools staying cached through it
    # (:func:`assess`): kept to be checked against what the provider reports (:func:`cache_miss`).
    warm = not verdict.cold and seen_before
    rewrote = outcome.action == "compiled" and warm
    account.expected_cached = min(plan.stable_tokens, after) if rewrote else 0
    account.expected_prompt = after if rewrote else 0
    if outcome.action == "compiled" and outcome.rebuild != "append":
        account.floor = after


def cache_miss(account: CostAccount, prompt: int, cached: int) -> str | None:
    """What went wrong when the provider read ``cached`` of a rewritten request's ``prompt``
    tokens from its cache, clearly less than the account priced; ``None`` when it read about as
    much (or the latest request was no rewrite). Counts the miss in the account."""
    if account.expected_prompt <= 0 or prompt <= 0:
        return None
    expected = account.expected_cached / account.expected_prompt
    found = min(cached, prompt) / prompt
    account.expected_cached = account.expected_prompt = 0  # one check per rewrite
    if found >= expected - CACHE_MISS_MARGIN:
        return None
    account.cache_misses += 1
    return (
        f"the provider read {cached:,} of {prompt:,} prompt tokens of a rewritten request from "
        f"its cache ({found:.0%}); the cost policy priced {expected:.0%} as cached"
    )
