"""The gateway application: proxy routes, status, and the web source inspector in one app.

``POST /v1/messages`` (Claude Code adds ``?beta=true``), ``POST /v1/responses`` and
``POST /v1/chat/completions`` go through the conversation's :class:`AutomaticChatSession`, which
rewrites only old history (and only when the request would not fit, or the frozen memory is
reused); every other path (``/v1/messages/count_tokens``, ``/v1/responses/compact``,
``/v1/models``, ...) is forwarded untouched. ``GET /healthz`` answers the launcher, ``GET
/status`` and ``/status.json`` show each conversation's decisions, rebuilds and TOMC's own
counts, and the usage ledger's account of savings and traffic
(:mod:`tomc._gateway.proxy.metering.ledger`; never message text or credentials), and the
inspector keeps its page and API. What a browser asks for by itself (``/favicon.ico``,
``/robots.txt``, ...: :func:`~.routing.browser_path`) is answered here, never forwarded nor
counted.

The gateway's own errors (the upstream not reached, a dropped connection, no answer in time, a
failure inside) are counted in the conversation's figures and in the usage ledger
(``gateway_errors``), apart from the errors the upstream answered.

Conversations live in a session store (:mod:`tomc._gateway.proxy.store`): this process's
memory, or a store shared by every gateway process. Beyond loopback the status page and the
inspector want a token (:mod:`tomc._gateway.proxy.access`).

Failing open is the rule: a body that is not JSON, a compressed body, or any error inside TOMC
sends the original request bytes unchanged, and says why in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import AsyncIterator, Collection, Coroutine, Mapping
from functools import partial
from typing import Any

import anyio
import httpx2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import Scope

from ... import __version__
from ..._http.hosts import HostCheck
from ..._http.origins import OriginCheck
from ..._http.redact import install_redaction
from ..._http.server import LOOPBACK_HOSTS
from ...web._app import inspector_routes, misdirected
from ..agents.limits import agent_defaults
from ..settings import GatewaySettings
from .access import StatusAccess
from .exchange import Exchange, read_exchange
from .live_settings import LiveSettings
from .metering.ledger import Ledger, LedgerEntry, UsageLedger, ledger_path
from .metering.meter import Meter
from .metering.savings import shown_live, shown_traffic
from .options import SESSION_OPTIONS, TARGET_HEADER, THINKING_HEADER, RequestOptions, new_session
from .relay import (
    FailedRelay,
    RelayFailure,
    client_gone,
    error_response,
    forward_headers,
    relay,
    upstream_client,
)
from .rewrite import MAX_REWRITE_BYTES, prepare
from .routing import api_for_path, browser_path, error_api
from .status_page import render_status_page
from .stop import StopSwitch
from .store import Conversations, StoreURL, open_conversations, store_url
from .store.memory import LocalConversations, MemorySessionStore, SessionStore

__all__ = [
    "MAX_REWRITE_BYTES",
    "SERVICE_NAME",
    "SESSION_OPTIONS",
    "TARGET_HEADER",
    "THINKING_HEADER",
    "Gateway",
    "RequestOptions",
    "create_gateway_app",
    "new_session",
]

logger = logging.getLogger("tomc.gateway")

#: What ``GET /healthz`` names, so a launcher can tell this gateway from another program.
SERVICE_NAME = "tomc-gateway"
_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_ORIGINS_WHY = (
    "the gateway answers web pages only from origins allowed with `tomc gateway serve "
    '--allow-origin ORIGIN` or "allow_origins" in its settings.json'
)
#: The gateway error of a failure inside the gateway that left a request unanswered upstream.
INTERNAL_ERROR = "internal"
#: A browser asks for the site's icon on every page view unless told it may keep the answer.
_BROWSER_CACHE = {"cache-control": "public, max-age=86400"}


class Gateway:
    """The proxy's state, and the wiring of one request: read it into an exchange
    (:mod:`.exchange`), prepare its body (:mod:`.rewrite`), relay it (:mod:`.relay`) and meter
    it (:mod:`.metering`).

    ``store`` keeps this process's conversations (default: a new in-memory one);
    ``session_store`` is a ``--session-store`` URL naming a shared store instead. With a
    ``home``, upstreams saved there later are picked up while it runs, except the ``pinned``
    (command-line) options; the usage ledger is kept there too (in the shared store when there
    is one).
    """

    def __init__(
        self,
        settings: GatewaySettings,
        *,
        store: SessionStore | None = None,
        session_store: str | StoreURL | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        timeout: httpx2.Timeout | None = None,
        home: str | os.PathLike[str] | None = None,
        ledger: Ledger | None = None,
        pinned: Mapping[str, Any] | None = None,
    ) -> None:
        self._settings = LiveSettings(settings, home, pinned)
        url = session_store if isinstance(session_store, StoreURL) else store_url(session_store)
        #: This process's sessions (``None`` with a shared store).
        self.store: SessionStore | None = None
        self.conversations: Conversations
        if url.scheme == "memory":
            # A store has a length, so an empty one is false: compare with None.
            self.store = store if store is not None else MemorySessionStore(new_session)
            self.conversations = LocalConversations(self.store, url)
        else:
            self.conversations = open_conversations(url, new_session)
        # What went through: in a shared store, summed over every process, when there is one;
        # else kept across restarts in <home>/gateway/usage.sqlite3 (in memory without a home).
        if ledger is None:
            ledger = self.conversations.open_ledger()
        if ledger is None:
            ledger = UsageLedger(ledger_path(home) if home is not None else None)
        self.ledger: Ledger = ledger
        # Store bookkeeping that runs after a request's answer (saving, counting).
        self._tasks: set[asyncio.Task[None]] = set()
        self._transport = transport
        self._timeout = timeout or httpx2.Timeout(connect=30.0, read=600.0, write=120.0, pool=30.0)
        self.client: httpx2.AsyncClient | None = None
        self.started = time.monotonic()
        self.requests = 0
        self.passthrough_paths = 0

    @property
    def settings(self) -> GatewaySettings:
        """The settings in force (see :meth:`refresh_settings`)."""
        return self._settings.current

    def refresh_settings(self) -> None:
        """Pick up upstreams (and other settings) saved since the gateway started."""
        self._settings.refresh()

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        async with upstream_client(self._transport, self._timeout) as client:
            self.client = client
            try:
                yield
            finally:
                self.client = None
                if self._tasks:  # conversations still being saved
                    await asyncio.wait(self._tasks, timeout=10)
                await self.ledger.aclose()  # first: a shared ledger writes with the store's client
                await self.conversations.close()

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run store bookkeeping after the answer, without holding the request back."""
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def proxy(self, request: Request) -> Response:
        """Answer one request: rewritten when TOMC can help, else forwarded unchanged."""
        self.requests += 1
        settings = self._settings.refresh()
        assert self.client is not None, "the gateway's lifespan has not started"
        exchange = await read_exchange(request, settings)
        rewrite, checkout = await prepare(exchange, self.conversations, settings)
        if exchange.dialect is None:
            self.passthrough_paths += 1
        meter = Meter(
            exchange,
            checkout,
            ledger=self.ledger,
            conversations=self.conversations,
            spawn=self._spawn,
        )
        response = await relay(
            self.client,
            method=exchange.method,
            url=exchange.url,
            headers=forward_headers(exchange.items, rewrite.headers),
            body=rewrite.body,
            api=exchange.answers,
            sniffer=meter.sniffer,
            on_done=meter.done,
            disconnected=partial(client_gone, request.receive),
        )
        if isinstance(response, FailedRelay):
            self._count_failure(exchange, meter, response.failure)
        meter.relayed(response)
        return response

    def _count_failure(self, exchange: Exchange, meter: Meter, failure: RelayFailure) -> None:
        """No upstream answer to relay (the gateway answered itself): one of the gateway's own
        errors, in the conversation's figures (before the meter hands it back) and the ledger.
        The meter records nothing then: nothing was relayed."""
        conversation, decision = meter.conversation, meter.decision
        if conversation is not None and meter.checkout is not None:
            conversation.note_gateway_error()
            meter.checkout.changed()
        entry = LedgerEntry.of_gateway_error(
            exchange.api or "",
            conversation.key if conversation is not None else "",
            failure.status,
            failure.kind,
            decision.model if decision is not None else "",
        )
        self._record(entry)

    def count_internal_error(self, method: str, path: str) -> None:
        """A failure inside the gateway left a request unanswered upstream (it got a 502): one of
        the gateway's own errors, outside any conversation (where it failed is unknown)."""
        api = api_for_path(path) if method == "POST" else None
        self._record(LedgerEntry.of_gateway_error(api or "", "", 502, INTERNAL_ERROR))

    def _record(self, entry: LedgerEntry) -> None:
        """Hand ``entry`` to the ledger; only bookkeeping, so never raises (the client is
        answered all the same)."""
        try:
            self.ledger.record(entry)
        except Exception as exc:
            logger.warning("usage not recorded (%s: %s)", type(exc).__name__, exc)

    # ---------------------------------------------------------------- status

    async def live_status(self) -> dict[str, Any]:
        """The live figures of :meth:`status`, read from the session store."""
        return await self.conversations.status()

    def status(
        self,
        *,
        traffic_limit: int = 20,
        live: Mapping[str, Any] | None = None,
        traffic: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Live figures, and ``traffic``: the ledger's totals, latest conversations and chart
        series (kept across restarts). Waits briefly for finished requests to be stored.

        ``live`` comes from :meth:`live_status` and ``traffic`` from the ledger's ``read``; without
        ``live`` (callable from any thread) only an in-process store and the SQLite ledger can
        be read."""
        now = time.monotonic()
        if live is None:
            local = isinstance(self.conversations, LocalConversations)
            if not local or not isinstance(self.ledger, UsageLedger):
                raise TypeError("a shared store's status is read with live_status() first")
            live = self.conversations.snapshot()
            traffic = self.ledger.settled_traffic(traffic_limit)
        live = {"requests": self.requests, "passthrough_paths": self.passthrough_paths, **live}
        return {
            "service": SERVICE_NAME,
            "version": __version__,
            "port": self.settings.port,
            "uptime_s": round(now - self.started, 1),
            "upstreams": dict(self.settings.upstreams),
            "thinking_prefix": self.settings.thinking_prefix,
            "context_target": (
                "per agent default"
                if self.settings.context_target is None
                else self.settings.context_target
            ),
            "agent_defaults": agent_defaults(),
            **shown_live(live),  # one account of savings: the ledger's (see .metering.savings)
            "this_process": {
                "pid": os.getpid(),
                "requests": self.requests,
                "passthrough_paths": self.passthrough_paths,
            },
            "traffic": shown_traffic(traffic),
        }


def _browser_answer(path: str) -> Response:
    """The gateway's own answer to a browser's request of ``path`` (:func:`browser_path`): no
    icon (204, kept a day), a robots.txt that keeps crawlers out, nothing else (404)."""
    if path == "/robots.txt":
        return PlainTextResponse("User-agent: *\nDisallow: /\n", headers=_BROWSER_CACHE)
    if path.endswith((".ico", ".png")):
        return Response(status_code=204, headers=_BROWSER_CACHE)
    return Response(status_code=404)


async def _proxied(gateway: Gateway, request: Request) -> Response:
    """Any other path: relayed by ``gateway``, else answered with an error in the shape of the
    client's API (the last line of defence), or locally for a browser's own request."""
    path = request.url.path
    if browser_path(path):  # a browser's own request, not an agent's: never forwarded
        return _browser_answer(path)
    try:
        return await gateway.proxy(request)
    except ClientDisconnect:  # gone while sending its body: nobody to answer
        logger.info("client left while sending %s %s", request.method, path)
        return Response(status_code=499)
    except Exception as exc:
        logger.error("gateway error on %s %s", request.method, path, exc_info=exc)
        gateway.count_internal_error(request.method, path)
        headers = {name.lower(): value for name, value in request.headers.items()}
        return error_response(
            error_api(path, headers),
            502,
            f"TOMC gateway error ({type(exc).__name__})",
            "api_error",
        )


def create_gateway_app(
    settings: GatewaySettings | None = None,
    *,
    gateway: Gateway | None = None,
    home: str | os.PathLike[str] | None = None,
    pinned: Mapping[str, Any] | None = None,
    session_store: str | StoreURL | None = None,
    allowed_hosts: Collection[str] | None = LOOPBACK_HOSTS,
    status_token: str | None = None,
    stop: StopSwitch | None = None,
) -> Starlette:
    """The gateway application (see the module docstring). With ``home``, settings saved there
    later are picked up while it runs, except the ``pinned`` ones (command-line options).

    ``session_store`` is a ``--session-store`` URL; ``allowed_hosts`` the Host names it answers
    (``None``: any); ``status_token`` guards the status page and the inspector; ``stop``
    answers ``POST /_tomc/stop`` (:mod:`.stop`; without it that path answers 404).

    Log records of the gateway and the libraries under it are redacted from here on
    (:func:`~tomc._http.redact.install_redaction`)."""
    install_redaction()
    settings = settings or GatewaySettings()
    gateway = gateway or Gateway(settings, home=home, pinned=pinned, session_store=session_store)

    async def status() -> dict[str, Any]:
        live = await gateway.live_status()
        traffic = await gateway.ledger.read(20)
        return await anyio.to_thread.run_sync(partial(gateway.status, live=live, traffic=traffic))

    async def healthz(request: Request) -> JSONResponse:
        return JSONResponse(
            {"status": "ok", "service": SERVICE_NAME, "version": __version__, "port": settings.port}
        )

    async def status_json(request: Request) -> JSONResponse:
        return JSONResponse(await status())

    async def status_page(request: Request) -> HTMLResponse:
        return HTMLResponse(render_status_page(await status()))

    async def proxy(request: Request) -> Response:
        return await _proxied(gateway, request)

    def allowed_origins() -> tuple[str, ...]:
        gateway.refresh_settings()
        return gateway.settings.allow_origins

    def refuse(scope: Scope, message: str) -> Response:  # in the shape of the path's API
        return error_response(api_for_path(scope["path"]), 403, message, "permission_error")

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET", "HEAD"]),
            Route("/status", status_page, methods=["GET", "HEAD"]),
            Route("/status.json", status_json, methods=["GET", "HEAD"]),
            (stop or StopSwitch(None)).route(),
            *inspector_routes(),
            Route("/{path:path}", proxy, methods=_METHODS),
        ],
        middleware=[
            Middleware(HostCheck, allowed=allowed_hosts, refuse=misdirected),
            Middleware(OriginCheck, allowed=allowed_origins, refuse=refuse, why=_ORIGINS_WHY),
            Middleware(StatusAccess, token=status_token),
        ],
        lifespan=gateway.lifespan,
    )
