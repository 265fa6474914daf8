"""Serving the gateway application: what ``tomc gateway serve`` runs, and tests run the same way.

The gateway's server differs from the inspector's in two ways: the application's lifespan runs
(it opens and closes the upstream HTTP client), and answers keep their own ``Date`` (a relayed
answer carries its upstream's, and uvicorn would add a second one).
"""

from __future__ import annotations

from starlette.types import ASGIApp

from ..._http.deadlines import BODY_IDLE_TIMEOUT_S, HEADER_TIMEOUT_S
from ..._http.server import AppServer

__all__ = ["gateway_server"]


def gateway_server(
    app: ASGIApp,
    host: str,
    port: int,
    *,
    quiet: bool = False,
    verbose: bool = False,
    header_timeout_s: float = HEADER_TIMEOUT_S,
    body_timeout_s: float = BODY_IDLE_TIMEOUT_S,
) -> AppServer:
    """Bind ``app`` (:func:`~tomc._gateway.proxy.app.create_gateway_app`) on ``host:port``
    (``0``: a free port) without serving yet; slow clients are cut after the timeouts."""
    return AppServer(
        app,
        host,
        port,
        quiet=quiet,
        verbose=verbose,
        lifespan="on",
        app_date=True,
        header_timeout_s=header_timeout_s,
        body_timeout_s=body_timeout_s,
    )
