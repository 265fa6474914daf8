"""What a provider charges for its prompt cache: per request for the session's account, and by
billing family for the usage book and the simulation.

A :class:`CachePricing` is three facts of one request: what writing a token into the cache costs
and what reading one back costs, both relative to an uncached input token, and how long a cached
prefix lives without use. The session's cost account (:mod:`tomc.chat._account`) prices every
rewrite with them; each dialect reads them from its own request (``cache_pricing``).

- Anthropic Messages: writes 1.25x (2x for a ``"ttl": "1h"`` breakpoint), reads 0.1x; the
  lifetime is the ``ttl`` of the request's last ``cache_control`` breakpoint, 5 minutes when
  it names none (platform.claude.com, prompt caching).
- OpenAI (Responses, Chat Completions): reads 0.1x; writes cost what uncached input costs,
  except on the models that bill cache writes (1.25x: the GPT-5.6 family and later); cached
  prefixes live 5 to 10 minutes without use (in memory, taken here as 10), 24 hours with
  ``"prompt_cache_retention": "24h"`` (developers.openai.com, prompt caching).

A model can have prices of its own (Claude Opus 5.5 reads at 0.05x, DeepSeek at 0.02x and never
bills a write): its profile's :class:`CacheTerms` override the format's figures, for the session's
account and for the gateway's usage book alike.

A :class:`CacheBilling` is how one billing family (a dialect's ``cache_billing``) turns a
provider's reported usage into billed input: the gateway's usage book
(``tomc._gateway.proxy.metering.usage``) and the cache simulation (:mod:`tomc._simulation.simulate`)
both read it from the dialects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANTHROPIC_BILLING",
    "ANTHROPIC_TTL_S",
    "DEFAULT_PRICING",
    "OPENAI_BILLING",
    "OPENAI_TTL_S",
    "CacheBilling",
    "CachePricing",
    "CacheTerms",
    "anthropic_pricing",
    "openai_pricing",
]

#: Anthropic's cache lifetimes by ``ttl`` value, and what a write of each costs.
ANTHROPIC_TTL_S = {"5m": 300.0, "1h": 3600.0}
_ANTHROPIC_WRITE = {"5m": 1.25, "1h": 2.0}
#: OpenAI's lifetimes: in memory (documented as 5 to 10 minutes of inactivity) and extended.
OPENAI_TTL_S = {"in_memory": 600.0, "24h": 86_400.0}
#: OpenAI models whose cache writes are billed at 1.25x: the GPT-5.6 family and later.
_OPENAI_PRICED_WRITES = re.compile(r"^gpt-(?:5\.(?:[6-9]|\d\d)|[6-9])")
CACHE_READ = 0.1


@dataclass(frozen=True)
class CachePricing:
    """A provider's prompt-cache prices for one request (relative to an uncached input token)
    and how long a cached prefix lives without use."""

    write: float
    read: float
    ttl_s: float

    def __post_init__(self) -> None:
        if not (self.write > 0 and 0 <= self.read < self.write and self.ttl_s >= 0):
            raise ValueError(f"cache prices must satisfy 0 <= read < write, ttl >= 0: {self}")


@dataclass(frozen=True)
class CacheTerms:
    """One model's own prompt-cache terms, where they differ from its API format's rules.

    ``read`` and ``write`` are prices relative to an uncached input token; each replaces the
    format's figure for every request to the model (so set ``write`` only where the provider
    has one write price whatever the request asks, as DeepSeek, which bills none). ``ttl_s`` is
    how long the model's default retention keeps a prefix; a request that asks for a longer
    one keeps its own. ``None`` leaves the format's figure.
    """

    read: float | None = None
    write: float | None = None
    ttl_s: float | None = None

    def __post_init__(self) -> None:
        for name in ("read", "write", "ttl_s"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int | float) or value < 0
            ):
                raise ValueError(f"cache {name} must be a non-negative number, not {value!r}")
        if self.write is not None and self.write <= 0:
            raise ValueError(f"cache write must be positive, not {self.write!r}")
        if self.read is not None and self.write is not None and self.read >= self.write:
            raise ValueError(f"cache read ({self.read}) must cost less than a write ({self.write})")

    def price(self, pricing: CachePricing) -> CachePricing:
        """``pricing`` (the format's, for one request) with this model's terms."""
        ttl = pricing.ttl_s if self.ttl_s is None else max(pricing.ttl_s, float(self.ttl_s))
        return CachePricing(
            pricing.write if self.write is None else float(self.write),
            pricing.read if self.read is None else float(self.read),
            ttl,
        )

    def bill(self, rules: CacheBilling) -> CacheBilling:
        """A billing family's rules with this model's prices (its write price only where the
        family tells writes apart)."""
        write = rules.write
        if write is not None and self.write is not None:
            write = float(self.write)
        read = rules.read if self.read is None else float(self.read)
        return CacheBilling(rules.family, write, read, rules.min_prefix, rules.step)


#: A format that says nothing of its cache is priced as the dearest documented one: writes at
#: 1.25x, reads at 0.1x, five minutes.
DEFAULT_PRICING = CachePricing(1.25, CACHE_READ, 300.0)


def anthropic_pricing(breakpoints: list[Mapping[str, Any]]) -> CachePricing:
    """Anthropic's prices for a request whose ``cache_control`` values are ``breakpoints``
    (in prefix order): the last one says how long the history's cache lives."""
    ttl = "5m"
    if breakpoints:
        named = breakpoints[-1].get("ttl")
        if named in ANTHROPIC_TTL_S:
            ttl = str(named)
    return CachePricing(_ANTHROPIC_WRITE[ttl], CACHE_READ, ANTHROPIC_TTL_S[ttl])


def openai_pricing(request: Mapping[str, Any]) -> CachePricing:
    """OpenAI's prices for a Responses or Chat Completions request (its model and
    ``prompt_cache_retention``)."""
    model = request.get("model")
    write = 1.25 if isinstance(model, str) and _OPENAI_PRICED_WRITES.match(model) else 1.0
    retention = request.get("prompt_cache_retention")
    ttl = OPENAI_TTL_S["24h"] if retention == "24h" else OPENAI_TTL_S["in_memory"]
    return CachePricing(write, CACHE_READ, ttl)


@dataclass(frozen=True)
class CacheBilling:
    """How one billing family bills a prompt's cached parts, relative to an uncached token.

    ``write`` is a cache write's price (``None``: a write costs what uncached input costs and
    is not told apart); ``read`` a cache read's; a prefix is cached from ``min_prefix`` tokens
    in whole ``step`` s.
    """

    family: str
    write: float | None
    read: float
    min_prefix: int = 0
    step: int = 1


#: Anthropic: every cache write priced as a 5-minute one, reads at 0.1x.
ANTHROPIC_BILLING = CacheBilling("anthropic", 1.25, CACHE_READ)
#: OpenAI: reads at 0.1x, from 1,024 tokens in steps of 128; writes not told apart.
OPENAI_BILLING = CacheBilling("openai", None, CACHE_READ, min_prefix=1024, step=128)
