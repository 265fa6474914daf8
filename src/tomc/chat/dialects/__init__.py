"""Wire-format dialects: Chat Completions, Anthropic Messages, OpenAI Responses.

The session policy exists once and works on neutral entries; a dialect reads its format into
them and splices the rewritten history back, and tells the gateway what it needs of the wire.
See :class:`Dialect`. :data:`DIALECTS` is the registry: a new format is one module and one
entry there, or a :func:`register_dialect` call.

A format of one's own imports only names listed here: :class:`BaseDialect` gives defaults for
everything but reading and writing its history items (``items``, ``read``, ``fixed_text``,
``output_reserve``, ``memory_item``, ``validate``) and its wire facts (``name``,
``items_key``, ``adjacent_results``, ``upstreams``, ``paths``, ``billing``, ``response_usage``,
``event_usage``, ``error_body``); :class:`Entry` and its kinds (``USER``, ``ASSISTANT``, ...)
are the neutral items a format reads its history into; :func:`pairing_problems`,
:func:`canonical_digest`, :func:`token_count` and :func:`whole_prompt_usage` are the helpers
the built-in formats use. ``tests/chat/dialects/gemini_like.py`` is such a format.
"""

from __future__ import annotations

from .._conversation import (
    ASSISTANT,
    COMPACTION,
    INSTRUCTION,
    REASONING,
    TOOL,
    USER,
    Entry,
    ToolCall,
    ToolOutput,
    pairing_problems,
)
from ._base import BaseDialect, Dialect, PassThrough, canonical_digest
from ._pricing import ANTHROPIC_BILLING, OPENAI_BILLING, CacheBilling, CachePricing, CacheTerms
from ._registry import (
    DEFAULT_DIALECT,
    DIALECTS,
    billing_rules,
    dialect_for,
    guess_dialects,
    register_dialect,
    unregister_dialect,
)
from ._wire import Upstream, WireUsage, whole_prompt_usage
from ._wire import count as token_count

__all__ = [
    "ANTHROPIC_BILLING",
    "ASSISTANT",
    "COMPACTION",
    "DEFAULT_DIALECT",
    "DIALECTS",
    "INSTRUCTION",
    "OPENAI_BILLING",
    "REASONING",
    "TOOL",
    "USER",
    "BaseDialect",
    "CacheBilling",
    "CachePricing",
    "CacheTerms",
    "Dialect",
    "Entry",
    "PassThrough",
    "ToolCall",
    "ToolOutput",
    "Upstream",
    "WireUsage",
    "billing_rules",
    "canonical_digest",
    "dialect_for",
    "guess_dialects",
    "pairing_problems",
    "register_dialect",
    "token_count",
    "unregister_dialect",
    "whole_prompt_usage",
]
