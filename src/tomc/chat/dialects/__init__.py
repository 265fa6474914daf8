"""Wire-format dialects: Chat Completions, Anthropic Messages, OpenAI Responses.

The session policy exists once and works on neutral entries; a dialect reads its format into
them and splices the rewritten history back, and tells the gateway what it needs of the wire.
See :class:`Dialect`. :data:`DIALECTS` is the registry: a new format is one module and one
entry there, or a :func:`register_dialect` call.
"""

from __future__ import annotations

from ._base import Dialect, PassThrough
from ._pricing import CachePricing
from ._registry import (
    DEFAULT_DIALECT,
    DIALECTS,
    dialect_for,
    guess_dialects,
    register_dialect,
    unregister_dialect,
)
from ._wire import Upstream, WireUsage

__all__ = [
    "DEFAULT_DIALECT",
    "DIALECTS",
    "CachePricing",
    "Dialect",
    "PassThrough",
    "Upstream",
    "WireUsage",
    "dialect_for",
    "guess_dialects",
    "register_dialect",
    "unregister_dialect",
]
