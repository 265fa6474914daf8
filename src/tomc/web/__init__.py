"""The web source inspector: ``tomc serve`` serves one page and a small JSON API.

:func:`create_app` and :func:`inspector_routes` build the Starlette application (or just its
routes, to mount in a larger local app); :func:`make_server` binds it with uvicorn.
:class:`AppServer` serves any ASGI app that way, on a socket bound up front (the gateway's too).
"""

from __future__ import annotations

from .._http.server import AppServer
from ._app import create_app, inspector_routes
from ._server import make_server, serve

__all__ = ["AppServer", "create_app", "inspector_routes", "make_server", "serve"]
