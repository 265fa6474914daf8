"""The dialects by name, the one a request body implies, and registering another."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._core.errors import InvalidOptionError
from ._anthropic_messages import AnthropicMessages
from ._base import Dialect
from ._chat_completions import ChatCompletions
from ._openai_responses import OpenAIResponses
from ._pricing import OPENAI_BILLING, CacheBilling

__all__ = [
    "DEFAULT_DIALECT",
    "DIALECTS",
    "billing_rules",
    "dialect_for",
    "guess_dialects",
    "register_dialect",
    "unregister_dialect",
]

#: Every known format by name, in the order a guess tries them.
DIALECTS: dict[str, Dialect] = {
    "chat": ChatCompletions(),
    "messages": AnthropicMessages(),
    "responses": OpenAIResponses(),
}
_BUILT_IN = frozenset(DIALECTS)
#: The format taken when nothing names one: a body no format claims, and in the gateway a path
#: no format serves or owns (its upstream and error shape).
DEFAULT_DIALECT = "chat"
# A body no format claims is tried as these, in order (what most clients speak).
_UNCLAIMED = (DEFAULT_DIALECT, "messages")


def register_dialect(dialect: Dialect) -> Dialect:
    """Add a format to :data:`DIALECTS` under its ``name`` (the session's ``api=`` and the
    gateway's routing, usage and errors then know it); returns it."""
    if not isinstance(getattr(dialect, "name", None), str) or not dialect.name:
        raise InvalidOptionError(f"a dialect needs a name, not {getattr(dialect, 'name', None)!r}")
    if dialect.name in DIALECTS:
        raise InvalidOptionError(f"a dialect named {dialect.name!r} is already registered")
    DIALECTS[dialect.name] = dialect
    return dialect


def unregister_dialect(name: str) -> None:
    """Remove a format :func:`register_dialect` added (the built-in ones stay)."""
    if name in _BUILT_IN or name not in DIALECTS:
        raise InvalidOptionError(f"no registered dialect {name!r} can be removed")
    del DIALECTS[name]


def guess_dialects(request: Mapping[str, Any]) -> list[Dialect]:
    """The formats a request body may be in, most likely first: those whose keys it carries
    (``input`` -> Responses, ``messages`` -> Chat Completions or Anthropic), else
    Chat Completions and Anthropic Messages."""
    claimed = [dialect for dialect in DIALECTS.values() if dialect.claims(request)]
    return claimed or [DIALECTS[name] for name in _UNCLAIMED]


def dialect_for(api: str | None, request: Mapping[str, Any]) -> Dialect:
    """The named dialect, or the first one a request body's keys imply (``input`` ->
    Responses)."""
    if api is None:
        return guess_dialects(request)[0]
    dialect = DIALECTS.get(api)
    if dialect is None:
        raise InvalidOptionError(
            f"api must be one of {', '.join(map(repr, DIALECTS))}, not {api!r}"
        )
    return dialect


def billing_rules(family: str) -> CacheBilling:
    """How the billing family ``family`` (a dialect's ``billing``) bills cached input: the
    ``cache_billing`` of a registered dialect of that family; OpenAI's rules (writes not told
    apart) for a family no dialect describes."""
    for dialect in DIALECTS.values():
        rules = getattr(dialect, "cache_billing", None)
        if isinstance(rules, CacheBilling) and rules.family == family:
            return rules
    return OPENAI_BILLING
