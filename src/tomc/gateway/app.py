"""The gateway application: proxy routes, status, and the web source inspector in one app."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from .. import __version__
from ..web.app import LOOPBACK_HOSTS, HostCheck, inspector_routes
from .settings import GatewaySettings

__all__ = ["SERVICE_NAME", "create_gateway_app"]

#: What ``GET /healthz`` names, so a launcher can tell this gateway from another program.
SERVICE_NAME = "tomc-gateway"


def create_gateway_app(settings: GatewaySettings | None = None) -> Starlette:
    """The gateway: ``GET /healthz`` and the inspector (proxy routes are being added)."""
    settings = settings or GatewaySettings()

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse(
            {"status": "ok", "service": SERVICE_NAME, "version": __version__, "port": settings.port}
        )

    return Starlette(
        routes=[Route("/healthz", healthz, methods=["GET", "HEAD"]), *inspector_routes()],
        middleware=[Middleware(HostCheck, allowed=LOOPBACK_HOSTS)],
    )
