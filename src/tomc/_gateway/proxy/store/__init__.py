"""Where the gateway keeps its conversations: ``--session-store memory`` or a shared kind.

Each kind is one module of this package that names its URL schemes in ``SCHEMES`` and opens
itself with ``open_conversations(url, factory)``: ``memory`` (this process) and ``redis``
(Redis or Valkey; the client library is imported only when such a store is opened). Adding a
kind is adding a module and naming it in :data:`KINDS` (explicitly, so that the import graph,
and the structure tests that guard it, see it). See :mod:`.base` for the URL's options.
"""

from __future__ import annotations

from types import ModuleType

from . import memory, redis
from .base import (
    Checkout,
    Conversations,
    SessionFactory,
    StoreOptions,
    StoreUnavailableError,
    StoreURL,
    parse_store_url,
)

__all__ = [
    "DEFAULT_STORE",
    "KINDS",
    "Checkout",
    "Conversations",
    "StoreOptions",
    "StoreURL",
    "StoreUnavailableError",
    "open_conversations",
    "store_kinds",
    "store_url",
]

DEFAULT_STORE = "memory"
#: Every kind module, each naming its URL schemes in ``SCHEMES``.
KINDS: tuple[ModuleType, ...] = (memory, redis)


def store_kinds() -> dict[str, ModuleType]:
    """URL scheme -> the kind module that serves it."""
    return {scheme: kind for kind in KINDS for scheme in kind.SCHEMES}


def store_url(text: str | None) -> StoreURL:
    """Parse a ``--session-store`` value (``None``: the default); a clear error otherwise."""
    return parse_store_url(text or DEFAULT_STORE, store_kinds())


def open_conversations(url: StoreURL | str | None, factory: SessionFactory) -> Conversations:
    """The conversations of the store ``url`` names, each session made by ``factory``."""
    parsed = url if isinstance(url, StoreURL) else store_url(url)
    return store_kinds()[parsed.scheme].open_conversations(parsed, factory)
