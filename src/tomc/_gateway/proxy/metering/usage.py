"""What a provider reports it used for one request, what that input was billed, and what the
same request would have been billed had it gone direct.

Each wire format reads its own usage (:meth:`~tomc.chat.dialects.Dialect.response_usage` for a
whole answer, :meth:`~tomc.chat.dialects.Dialect.event_usage` for stream events) into neutral
figures (:class:`~tomc.chat.dialects.WireUsage`); here they become one result
(:class:`ProviderUsage`) with the format's billing family. Anthropic reports ``input_tokens`` as
the uncached remainder beside its cache writes and reads, and the thinking blocks it dropped
(``input_transformations``, with the ``thinking-binding-controls-2026-08-01`` beta); OpenAI
reports the whole prompt with its cached part. A stream's figures accumulate event by event:
later figures replace earlier ones (Anthropic's final ``message_delta``), until an event closes
them.

Figures are "billed-input token equivalents", not money: input tokens weighted by what the
provider charges for them relative to an uncached input token (:func:`billed_input`).
:func:`estimate_direct` estimates what a rewritten request's original would have been billed.
Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ....chat.dialects import (
    ANTHROPIC_BILLING,
    DIALECTS,
    OPENAI_BILLING,
    CacheBilling,
    CacheTerms,
    WireUsage,
    billing_rules,
)

__all__ = [
    "ANTHROPIC",
    "CACHE_READ_RATE",
    "CACHE_TTL_S",
    "CACHE_WRITE_RATE",
    "MAX_SNIFF_BYTES",
    "OPENAI",
    "OPENAI_CACHE_MIN",
    "OPENAI_CACHE_STEP",
    "DirectEstimate",
    "ProviderUsage",
    "StreamUsage",
    "billed_input",
    "billing_of",
    "estimate_direct",
    "provider_usage",
    "usage_from_json",
]

#: Billing families: Anthropic (cache writes and reads priced apart) and OpenAI (reads only);
#: their rules are the dialects' (:class:`~tomc.chat.dialects.CacheBilling`).
ANTHROPIC = ANTHROPIC_BILLING.family
OPENAI = OPENAI_BILLING.family
#: Anthropic's price of a (5-minute) cache write, and both providers' price of a cache read,
#: relative to an uncached input token.
CACHE_WRITE_RATE = ANTHROPIC_BILLING.write
CACHE_READ_RATE = ANTHROPIC_BILLING.read
#: How long a cached prefix is assumed to live (Anthropic's default TTL; OpenAI's is similar).
CACHE_TTL_S = 300.0
#: OpenAI caches prompts from 1,024 tokens, in steps of 128 tokens.
OPENAI_CACHE_MIN = OPENAI_BILLING.min_prefix
OPENAI_CACHE_STEP = OPENAI_BILLING.step
#: How much of a non-streaming answer is kept to read its usage (the body is relayed anyway).
MAX_SNIFF_BYTES = 8 * 1024 * 1024


def billing_of(api: str) -> str:
    """The billing family of a registered dialect (``messages``: Anthropic; ``responses``,
    ``chat``: OpenAI)."""
    return DIALECTS[api].billing


@dataclass(frozen=True)
class ProviderUsage:
    """One response's usage, in the same terms for every provider.

    ``prompt_tokens`` is the whole prompt as the provider counted it, cache reads and writes
    included; ``cache_read_tokens`` and ``cache_write_tokens`` are parts of it (OpenAI reports
    no writes, or reports them without charging extra). ``thinking_dropped`` counts the
    ``thinking_dropped`` entries of Anthropic's ``input_transformations`` (``None`` when the
    response carried no such list).
    """

    billing: str
    prompt_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int | None = None
    thinking_dropped: int | None = None
    #: The model's own cache prices (its profile's), where they differ from the family's.
    terms: CacheTerms | None = None

    @property
    def rules(self) -> CacheBilling:
        """How this response's cached input is billed: the family's rules with the model's
        own prices."""
        rules = billing_rules(self.billing)
        return rules if self.terms is None else self.terms.bill(rules)

    def priced(self, terms: CacheTerms | None) -> ProviderUsage:
        """The same figures, billed at a model's own cache prices (``None``: the family's)."""
        return self if terms == self.terms else replace(self, terms=terms)

    @property
    def uncached_tokens(self) -> int:
        """The prompt tokens neither read from nor written to a cache."""
        return max(0, self.prompt_tokens - self.cache_read_tokens - self.cache_write_tokens)

    @property
    def used_cache(self) -> bool:
        return bool(self.cache_read_tokens or self.cache_write_tokens)

    @property
    def billed_input(self) -> float:
        """See :func:`billed_input`."""
        return billed_input(self)

    def describe(self) -> str:
        """One log line's worth: the prompt, what the cache read and wrote, the bill (the
        request's one "billed" figure in the log, under the status page's name)."""
        return (
            f"provider counted {self.prompt_tokens:,} prompt tokens ({self.cache_read_tokens:,} "
            f"read from its cache, {self.cache_write_tokens:,} written): billed input "
            f"{self.billed_input:,.0f}"
        )


def billed_input(usage: ProviderUsage) -> float:
    """The input a response was billed, in uncached-input-token equivalents (not money).

    - Anthropic: ``input_tokens + 1.25 x cache_creation_input_tokens + 0.1 x
      cache_read_input_tokens`` (every cache write is priced as a 5-minute one);
    - OpenAI: ``(input - cached) + 0.1 x cached`` (writes cost nothing extra).
    """
    read = usage.cache_read_tokens
    rules = usage.rules
    if rules.write is not None:  # writes told apart
        return usage.uncached_tokens + rules.write * usage.cache_write_tokens + rules.read * read
    return max(0, usage.prompt_tokens - read) + rules.read * read


# ---------------------------------------------------------------------- reading


def provider_usage(billing: str, figures: WireUsage | None) -> ProviderUsage | None:
    """A format's figures as one result; ``None`` until they give the prompt's size."""
    prompt = figures.prompt_tokens if figures is not None else None
    if figures is None or prompt is None:
        return None
    return ProviderUsage(
        billing,
        prompt,
        cache_read_tokens=figures.cache_read_tokens or 0,
        cache_write_tokens=figures.cache_write_tokens or 0,
        output_tokens=figures.output_tokens,
        thinking_dropped=figures.thinking_dropped,
    )


def usage_from_json(api: str, body: Any) -> ProviderUsage | None:
    """The usage of a whole (non-streamed) JSON answer in ``api``'s format, if it reports one."""
    dialect = DIALECTS.get(api)
    if dialect is None or not isinstance(body, Mapping):
        return None
    return provider_usage(dialect.billing, dialect.response_usage(body))


class StreamUsage:
    """Reads the usage of a stream from its events (parsed ``data:`` payloads), in order.

    ``complete`` turns true once an event that closes the figures has been seen (Anthropic's
    ``message_delta`` with usage, Responses' ``response.completed``, a Chat chunk with usage).
    """

    def __init__(self, api: str | None) -> None:
        self.api = api
        self.complete = False
        self._dialect = DIALECTS.get(api) if api is not None else None
        self._figures: WireUsage | None = None

    @property
    def prompt_tokens(self) -> int | None:
        """The prompt's size, once an event has reported it."""
        return self._figures.prompt_tokens if self._figures is not None else None

    def event(self, event: Any) -> None:
        if self._dialect is None or not isinstance(event, Mapping):
            return
        found = self._dialect.event_usage(event)
        if found is None:
            return
        figures, closes = found
        self._figures = figures if self._figures is None else self._figures.then(figures)
        self.complete = self.complete or closes

    def result(self) -> ProviderUsage | None:
        if self._dialect is None:
            return None
        return provider_usage(self._dialect.billing, self._figures)


# ---------------------------------------------------------------------- going direct


@dataclass(frozen=True)
class DirectEstimate:
    """What a request would have cost without TOMC: its prompt in provider tokens, and the
    billed input (in the same units as :func:`billed_input`)."""

    prompt_tokens: float
    billed_input: float


def _lifetime(usage: ProviderUsage) -> float:
    """How long a cached prefix lives: :data:`CACHE_TTL_S`, or the model's longer default."""
    ttl = usage.terms.ttl_s if usage.terms is not None else None
    return CACHE_TTL_S if ttl is None else max(CACHE_TTL_S, float(ttl))


def estimate_direct(
    usage: ProviderUsage,
    *,
    rewritten: bool,
    tokens_before: int,
    tokens_after: int,
    previous_prompt: float | None,
    seconds_since_previous: float | None,
    caching_seen: bool,
) -> DirectEstimate:
    """Estimate what the original request would have been billed (an estimate, never a bill).

    A request TOMC sent unchanged (``rewritten`` false) cost what it cost: the estimate is the
    actual prompt and billed input. For a rewritten one:

    - its prompt in provider tokens is the reported prompt scaled by TOMC's own count before
      and after the rewrite (``prompt_tokens x tokens_before / tokens_after``);
    - an agent's history only grows, so going direct would have found cached the previous
      direct prompt of the same conversation (``previous_prompt``), provided it came within
      :data:`CACHE_TTL_S` or the model's longer default retention (else nothing is cached),
      and never more than the current prompt;
    - cache prices are the model's own where its profile gives them (:class:`CacheTerms`),
      else the family's:
    - Anthropic: the cached part is read at 0.1, the rest written at 1.25 when the
      conversation's real requests used caching at all (``caching_seen``), else billed at 1.0;
    - OpenAI: the cached part counts only from 1,024 tokens, rounded down to a multiple of
      128, and is billed at 0.1; the rest at 1.0.
    """
    if not rewritten or tokens_after <= 0 or tokens_before <= 0:
        return DirectEstimate(float(usage.prompt_tokens), billed_input(usage))
    prompt = usage.prompt_tokens * tokens_before / tokens_after
    fresh = (
        previous_prompt is not None
        and seconds_since_previous is not None
        and 0 <= seconds_since_previous <= _lifetime(usage)
    )
    cached = min(float(previous_prompt or 0.0), prompt) if fresh else 0.0
    rules = usage.rules
    if rules.write is not None:  # writes told apart
        rest_rate = rules.write if caching_seen else 1.0
        return DirectEstimate(prompt, rules.read * cached + rest_rate * (prompt - cached))
    if cached < rules.min_prefix:
        cached = 0.0
    cached = math.floor(cached / rules.step) * rules.step
    return DirectEstimate(prompt, (prompt - cached) + rules.read * cached)
