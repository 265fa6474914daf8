"""A stop request the gateway answers: how ``tomc run`` stops the gateway it started.

Signals do not stop a gateway gracefully everywhere: on Windows ``os.kill`` is
TerminateProcess (no shutdown, no last log line), and a gateway started detached has no console
to send Ctrl-Break to. So ``tomc run`` starts its gateway with a secret in
:data:`STOP_TOKEN_ENV` (kept in its private ``run-gateway.json``), and stops it with
``POST /_tomc/stop`` carrying the secret in :data:`STOP_HEADER`: the server finishes the
requests it is answering, runs the application's shutdown (the ledger and the session store
are closed) and logs its last line. Without the secret the path answers 403; on a gateway
started without one (``tomc gateway serve`` by hand, a login entry), 404. It is never
forwarded upstream.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable

from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

__all__ = ["STOP_HEADER", "STOP_PATH", "STOP_TOKEN_ENV", "StopSwitch"]

STOP_PATH = "/_tomc/stop"
STOP_HEADER = "x-tomc-stop-token"
#: The variable that hands the secret to a gateway ``tomc run`` starts.
STOP_TOKEN_ENV = "TOMC_GATEWAY_STOP_TOKEN"


class StopSwitch:
    """The secret a stop request must carry and what stopping does (the server's, connected
    once it exists: the application is built before the server that serves it)."""

    def __init__(self, token: str | None) -> None:
        self.token = token or None
        self.requested = False
        self._stop: Callable[[], None] | None = None

    def connect(self, stop: Callable[[], None]) -> None:
        self._stop = stop

    def route(self) -> Route:
        return Route(STOP_PATH, self._answer, methods=["POST"])

    async def _answer(self, request: Request) -> JSONResponse:
        if self.token is None or self._stop is None:
            return _error(404, "this gateway takes no stop request (tomc run did not start it)")
        given = request.headers.get(STOP_HEADER, "")
        if not hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8")):
            return _error(403, f"a stop request needs the gateway's secret in {STOP_HEADER}")
        self.requested = True
        # After the answer is out: the server then stops taking requests and shuts down.
        return JSONResponse({"status": "stopping"}, 202, background=BackgroundTask(self._stop))


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": {"type": "stop_refused", "message": message}}, status)
