"""The web source inspector: ``tomc serve`` serves one page and a small JSON API."""

from __future__ import annotations

from .server import make_server, serve

__all__ = ["make_server", "serve"]
