"""Where the gateway keeps its conversations: ``--session-store memory`` or a shared kind.

Each kind is one module of this package that names its URL schemes in ``SCHEMES`` and opens
itself with ``open_conversations(url, factory)``: ``memory`` (this process) and ``redis``
(Redis or Valkey). Adding a kind is adding a module. See :mod:`.base` for the URL's options.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache
from types import ModuleType

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


@cache
def store_kinds() -> dict[str, ModuleType]:
    """URL scheme -> the kind module that serves it (every module here naming ``SCHEMES``)."""
    kinds: dict[str, ModuleType] = {}
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        for scheme in getattr(module, "SCHEMES", ()):
            kinds[scheme] = module
    return kinds


def store_url(text: str | None) -> StoreURL:
    """Parse a ``--session-store`` value (``None``: the default); a clear error otherwise."""
    return parse_store_url(text or DEFAULT_STORE, store_kinds())


def open_conversations(url: StoreURL | str | None, factory: SessionFactory) -> Conversations:
    """The conversations of the store ``url`` names, each session made by ``factory``."""
    parsed = url if isinstance(url, StoreURL) else store_url(url)
    return store_kinds()[parsed.scheme].open_conversations(parsed, factory)
