"""The web source inspector: ``tomc serve`` serves one page and a small JSON API.

:func:`create_app` and :func:`inspector_routes` build the Starlette application (or just its
routes, to mount in a larger local app); :func:`make_server` binds it with uvicorn.
"""

from __future__ import annotations

from ._app import create_app, inspector_routes
from ._server import InspectorServer, make_server, serve

__all__ = ["InspectorServer", "create_app", "inspector_routes", "make_server", "serve"]
