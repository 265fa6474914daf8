"""What the gateway needs of a wire format beside its history: where its requests go, and the
usage its answers report, in the same terms for every format.

A dialect names its :class:`Upstream` endpoints and reads usage into :class:`WireUsage`; the
gateway joins paths to the configured base URLs and prices the figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["Upstream", "WireUsage", "count", "first_user_content", "whole_prompt_usage"]


@dataclass(frozen=True)
class Upstream:
    """One endpoint a format's requests go to.

    ``kind`` names it in the gateway's settings (``anthropic``, ``openai``, ...), ``url`` is its
    default base URL, and ``prefix`` the start of a client's path that the base URL already
    carries (``/v1`` for OpenAI, whose base URL is ``https://api.openai.com/v1``).
    """

    kind: str
    url: str
    prefix: str = ""

    def join(self, base: str, path: str) -> str:
        """``base`` (this kind's configured URL, without a trailing slash) and the client's
        ``path``, less the prefix the base URL already carries."""
        prefix = self.prefix
        if prefix and (path == prefix or path.startswith(prefix + "/")):
            path = path[len(prefix) :]
        return base + path


def count(value: Any) -> int | None:
    """A token figure as a provider reports it: a non-negative int (not a bool), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


@dataclass(frozen=True)
class WireUsage:
    """Usage figures as one answer or stream event reports them; ``None`` where it reports none.

    ``uncached_tokens`` is the part of the prompt neither read from nor written to a cache
    (Anthropic's ``input_tokens``; OpenAI's ``input_tokens`` less its cached part), so the whole
    prompt is the sum of the three input figures. ``thinking_dropped`` counts the thinking
    blocks the provider dropped (Anthropic's ``input_transformations``), when it says.
    """

    uncached_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None
    thinking_dropped: int | None = None

    @property
    def prompt_tokens(self) -> int | None:
        """The whole prompt, or ``None`` until its uncached part is known."""
        if self.uncached_tokens is None:
            return None
        return self.uncached_tokens + (self.cache_read_tokens or 0) + (self.cache_write_tokens or 0)

    def then(self, later: WireUsage) -> WireUsage:
        """These figures updated by a later event's: each figure it reports replaces this one."""
        values = {}
        for name in (f.name for f in fields(self)):
            value = getattr(later, name)
            values[name] = value if value is not None else getattr(self, name)
        return WireUsage(**values)


def whole_prompt_usage(
    prompt: Any, cached: Any = None, written: Any = None, output: Any = None
) -> WireUsage | None:
    """The figures of a format that reports the whole prompt and its cached parts (OpenAI's
    ``input_tokens`` and ``cached_tokens``); ``None`` when the prompt is not a count. Parts are
    capped at what is left of the prompt."""
    whole = count(prompt)
    if whole is None:
        return None
    read = min(whole, count(cached) or 0)
    write = min(whole - read, count(written) or 0)
    return WireUsage(whole - read - write, read, write, count(output))


def first_user_content(items: Any) -> Any:
    """The content of the first ``role: "user"`` item of a history (a string history is its
    own first turn): with the instructions, what names a conversation its client does not."""
    if isinstance(items, str):
        return items
    for item in items or ():
        if isinstance(item, Mapping) and item.get("role") == "user":
            return item.get("content")
    return None
