"""What a provider reports it used for one request, what that input was billed, and what the
same request would have been billed had it gone direct.

Three readers, one result (:class:`ProviderUsage`):

- Anthropic Messages: ``usage`` (``input_tokens`` is only the uncached remainder, beside
  ``cache_creation_input_tokens`` and ``cache_read_input_tokens``; ``output_tokens``) and
  ``input_transformations``, the list of thinking blocks the API dropped (``thinking_dropped``
  entries) or let through (``thinking_mismatch_allowed``), reported with the
  ``thinking-binding-controls-2026-08-01`` beta. A stream reports both in ``message_start``;
  the final ``message_delta`` carries the final ``usage`` figures and, only after a server-side
  model fallback, an ``input_transformations`` list that replaces the first one.
- OpenAI Responses: ``response.usage`` (``input_tokens`` is the whole prompt,
  ``input_tokens_details.cached_tokens`` its cached part, ``output_tokens``), in a stream on
  ``response.completed`` (or ``response.incomplete`` / ``response.failed``).
- Chat Completions: ``usage.prompt_tokens`` with ``prompt_tokens_details.cached_tokens``; a
  stream carries it on its last chunk when the client asked for it (``include_usage``).

Figures are "billed-input token equivalents", not money: input tokens weighted by what the
provider charges for them relative to an uncached input token (:func:`billed_input`).
:func:`estimate_direct` estimates what a rewritten request's original would have been billed.
Everything here is pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ANTHROPIC",
    "CACHE_READ_RATE",
    "CACHE_TTL_S",
    "CACHE_WRITE_RATE",
    "OPENAI",
    "OPENAI_CACHE_MIN",
    "OPENAI_CACHE_STEP",
    "DirectEstimate",
    "ProviderUsage",
    "StreamUsage",
    "billed_input",
    "billing_of",
    "estimate_direct",
    "usage_from_json",
]

#: Billing families: Anthropic (cache writes and reads priced apart) and OpenAI (reads only).
ANTHROPIC = "anthropic"
OPENAI = "openai"
#: Anthropic's price of a (5-minute) cache write, and both providers' price of a cache read,
#: relative to an uncached input token.
CACHE_WRITE_RATE = 1.25
CACHE_READ_RATE = 0.1
#: How long a cached prefix is assumed to live (Anthropic's default TTL; OpenAI's is similar).
CACHE_TTL_S = 300.0
#: OpenAI caches prompts from 1,024 tokens, in steps of 128 tokens.
OPENAI_CACHE_MIN = 1024
OPENAI_CACHE_STEP = 128

_BILLING = {"messages": ANTHROPIC, "responses": OPENAI, "chat": OPENAI}


def billing_of(api: str) -> str:
    """The billing family of a dialect (``messages``, ``responses``, ``chat``)."""
    return _BILLING[api]


def _int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


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


def billed_input(usage: ProviderUsage) -> float:
    """The input a response was billed, in uncached-input-token equivalents (not money).

    - Anthropic: ``input_tokens + 1.25 x cache_creation_input_tokens + 0.1 x
      cache_read_input_tokens`` (every cache write is priced as a 5-minute one);
    - OpenAI: ``(input - cached) + 0.1 x cached`` (writes cost nothing extra).
    """
    read = usage.cache_read_tokens
    if usage.billing == ANTHROPIC:
        return (
            usage.uncached_tokens
            + CACHE_WRITE_RATE * usage.cache_write_tokens
            + (CACHE_READ_RATE * read)
        )
    return max(0, usage.prompt_tokens - read) + CACHE_READ_RATE * read


# ---------------------------------------------------------------------- reading


def _count_dropped(transformations: Any) -> int | None:
    if not isinstance(transformations, list):
        return None
    return sum(
        1
        for entry in transformations
        if isinstance(entry, Mapping) and entry.get("type") == "thinking_dropped"
    )


def _details(usage: Mapping[str, Any], name: str, field: str) -> int:
    details = usage.get(name)
    value = _int(details.get(field)) if isinstance(details, Mapping) else None
    return value or 0


def _openai_usage(usage: Any, whole: str, details: str) -> ProviderUsage | None:
    if not isinstance(usage, Mapping):
        return None
    prompt = _int(usage.get(whole))
    if prompt is None:
        return None
    read = min(prompt, _details(usage, details, "cached_tokens"))
    write = min(prompt - read, _details(usage, details, "cache_write_tokens"))
    output = _int(usage.get("output_tokens" if whole == "input_tokens" else "completion_tokens"))
    return ProviderUsage(OPENAI, prompt, read, write, output)


class _AnthropicFigures:
    """Anthropic's usage as it accumulates over a stream (later figures replace earlier)."""

    _FIELDS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")

    def __init__(self) -> None:
        self.figures: dict[str, int] = {}
        self.dropped: int | None = None

    def update(self, usage: Any, transformations: Any = None) -> None:
        if isinstance(usage, Mapping):
            for name in (*self._FIELDS, "output_tokens"):
                value = _int(usage.get(name))
                if value is not None:
                    self.figures[name] = value
        dropped = _count_dropped(transformations)
        if dropped is not None:
            self.dropped = dropped

    def result(self) -> ProviderUsage | None:
        if "input_tokens" not in self.figures:
            return None
        uncached, write, read = (self.figures.get(name, 0) for name in self._FIELDS)
        return ProviderUsage(
            ANTHROPIC,
            uncached + write + read,
            cache_read_tokens=read,
            cache_write_tokens=write,
            output_tokens=self.figures.get("output_tokens"),
            thinking_dropped=self.dropped,
        )


def usage_from_json(api: str, body: Any) -> ProviderUsage | None:
    """The usage of a whole (non-streamed) JSON answer in ``api``'s format, if it reports one."""
    if not isinstance(body, Mapping):
        return None
    if api == "messages":
        figures = _AnthropicFigures()
        figures.update(body.get("usage"), body.get("input_transformations"))
        return figures.result()
    if api == "responses":
        return _openai_usage(body.get("usage"), "input_tokens", "input_tokens_details")
    if api == "chat":
        return _openai_usage(body.get("usage"), "prompt_tokens", "prompt_tokens_details")
    return None


class StreamUsage:
    """Reads the usage of a stream from its events (parsed ``data:`` payloads), in order.

    ``complete`` turns true once the event that closes the figures has been seen (Anthropic's
    ``message_delta`` with usage, Responses' ``response.completed``, a Chat chunk with usage).
    """

    _RESPONSE_DONE = ("response.completed", "response.incomplete", "response.failed")

    def __init__(self, api: str | None) -> None:
        self.api = api
        self.complete = False
        self._anthropic = _AnthropicFigures()
        self._openai: ProviderUsage | None = None

    def event(self, event: Any) -> None:
        if not isinstance(event, Mapping):
            return
        kind = event.get("type")
        if self.api == "messages":
            if kind == "message_start" and isinstance(event.get("message"), Mapping):
                message = event["message"]
                self._anthropic.update(message.get("usage"), message.get("input_transformations"))
            elif kind == "message_delta":
                self._anthropic.update(event.get("usage"), event.get("input_transformations"))
                self.complete = self.complete or isinstance(event.get("usage"), Mapping)
        elif self.api == "responses":
            if kind in self._RESPONSE_DONE and isinstance(event.get("response"), Mapping):
                found = usage_from_json("responses", event["response"])
                if found is not None:
                    self._openai, self.complete = found, True
        elif self.api == "chat" and event.get("usage"):
            found = usage_from_json("chat", event)
            if found is not None:
                self._openai, self.complete = found, True

    def result(self) -> ProviderUsage | None:
        if self.api == "messages":
            return self._anthropic.result()
        return self._openai


# ---------------------------------------------------------------------- going direct


@dataclass(frozen=True)
class DirectEstimate:
    """What a request would have cost without TOMC: its prompt in provider tokens, and the
    billed input (in the same units as :func:`billed_input`)."""

    prompt_tokens: float
    billed_input: float


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
      :data:`CACHE_TTL_S` (else nothing is cached), and never more than the current prompt;
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
        and 0 <= seconds_since_previous <= CACHE_TTL_S
    )
    cached = min(float(previous_prompt or 0.0), prompt) if fresh else 0.0
    if usage.billing == ANTHROPIC:
        rest_rate = CACHE_WRITE_RATE if caching_seen else 1.0
        return DirectEstimate(prompt, CACHE_READ_RATE * cached + rest_rate * (prompt - cached))
    if cached < OPENAI_CACHE_MIN:
        cached = 0.0
    cached = math.floor(cached / OPENAI_CACHE_STEP) * OPENAI_CACHE_STEP
    return DirectEstimate(prompt, (prompt - cached) + CACHE_READ_RATE * cached)
