"""The gateway application: proxy routes, status, and the web source inspector in one app.

``POST /v1/messages`` (Claude Code adds ``?beta=true``), ``POST /v1/responses`` and
``POST /v1/chat/completions`` go through the conversation's :class:`AutomaticChatSession`, which
rewrites only old history (and only when the request would not fit, or the frozen memory is
reused); every other path (``/v1/messages/count_tokens``, ``/v1/responses/compact``,
``/v1/models``, ...) is forwarded untouched. ``GET /healthz`` answers the launcher, ``GET
/status`` and ``/status.json`` show each conversation's decisions, rebuilds and estimated
savings, and the usage ledger's traffic (:mod:`tomc._gateway.proxy.ledger`; never message text or
credentials), and the inspector keeps its page and API.

Conversations live in a session store (:mod:`tomc._gateway.proxy.store`): this process's
memory, or a store shared by every gateway process. Beyond loopback the status page and the
inspector want a token (:mod:`tomc._gateway.proxy.access`).

Failing open is the rule: a body that is not JSON, a compressed body, or any error inside TOMC
sends the original request bytes unchanged, and says why in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Collection, Coroutine, Mapping
from dataclasses import replace
from functools import partial
from typing import Any

import anyio
import httpx2
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ... import __version__
from ...chat import AutomaticChatSession, Decision
from ...chat.dialects import DIALECTS
from ...web._app import LOOPBACK_HOSTS, HostCheck, inspector_routes
from ..agents.limits import OWN_PREFIX, TARGET_HEADER, THINKING_HEADER, agent_defaults
from ..settings import SETTINGS_FILE, GatewaySettings, gateway_dir, load_settings
from .access import StatusAccess
from .ledger import Ledger, LedgerEntry, UsageLedger, ledger_path
from .options import SESSION_OPTIONS, RequestOptions, new_session
from .origins import OriginCheck
from .redact import install_redaction
from .relay import (
    UsageSniffer,
    client_gone,
    error_response,
    forward_headers,
    relay,
    upstream_client,
)
from .routing import (
    api_for_path,
    compaction_api,
    conversation_key,
    request_view,
    route_request,
    wire_body,
)
from .sessions import ConversationRecord, MemorySessionStore, SessionStore
from .status_page import render_status_page
from .store import Checkout, Conversations, StoreURL, open_conversations, store_url
from .store.memory import LocalConversations

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
#: Largest request body the gateway reads to rewrite (a bigger one is forwarded untouched).
MAX_REWRITE_BYTES = 64 * 1024 * 1024
_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class Gateway:
    """The proxy's state: settings, the upstream HTTP client and the conversation store.

    ``session_store`` is a ``--session-store`` URL (default: this process's memory, where
    ``store`` may be given); ``conversations`` replaces the store altogether.
    """

    def __init__(
        self,
        settings: GatewaySettings,
        *,
        store: SessionStore | None = None,
        session_store: str | StoreURL | None = None,
        conversations: Conversations | None = None,
        session_factory: Callable[[], AutomaticChatSession] | None = None,
        transport: httpx2.AsyncBaseTransport | None = None,
        timeout: httpx2.Timeout | None = None,
        home: str | os.PathLike[str] | None = None,
        ledger: Ledger | None = None,
        pinned: Mapping[str, Any] | None = None,
    ) -> None:
        self.settings = settings
        # Options given on the command line win over the settings file, also after a reload.
        self._pinned = dict(pinned or {})
        # With a home, upstreams recorded there later (`tomc gateway activate`) take effect
        # without a restart: the settings file is checked at most once a second.
        self._settings_file = gateway_dir(home) / SETTINGS_FILE if home is not None else None
        self._settings_stamp = self._stamp()
        self._checked_at = 0.0
        factory = session_factory or new_session
        url = session_store if isinstance(session_store, StoreURL) else store_url(session_store)
        #: This process's sessions (``None`` with a shared store).
        self.store: SessionStore | None = None
        if conversations is None and url.scheme == "memory":
            # A store has a length, so an empty one is false: compare with None.
            self.store = store if store is not None else MemorySessionStore(factory)
            conversations = LocalConversations(self.store, url)
        self.conversations = conversations or open_conversations(url, factory)
        # What went through: in a shared store, summed over every process, when there is one;
        # else kept across restarts in <home>/gateway/usage.sqlite3 (in memory without a home).
        self.ledger: Ledger = ledger or self._open_ledger(home)
        # Store bookkeeping that runs after a request's answer (saving, counting).
        self._tasks: set[asyncio.Task[None]] = set()
        self._transport = transport
        self._timeout = timeout or httpx2.Timeout(connect=30.0, read=600.0, write=120.0, pool=30.0)
        self.client: httpx2.AsyncClient | None = None
        self.started = time.monotonic()
        self.requests = 0
        self.passthrough_paths = 0

    def _open_ledger(self, home: str | os.PathLike[str] | None) -> Ledger:
        opener = getattr(self.conversations, "open_ledger", None)
        if opener is not None:
            return opener()
        return UsageLedger(ledger_path(home) if home is not None else None)

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

    def _count(self, **figures: int) -> None:
        """Figures outside a conversation: summed in a shared store, kept here otherwise."""
        if self.conversations.shared:
            self._spawn(self.conversations.count(Counter(figures)))

    # ---------------------------------------------------------------- settings

    def _stamp(self) -> int | None:
        if self._settings_file is None:
            return None
        try:
            return self._settings_file.stat().st_mtime_ns
        except OSError:
            return None

    def refresh_settings(self) -> None:
        """Pick up upstreams (and other settings) saved since the gateway started."""
        now = time.monotonic()
        if self._settings_file is None or now - self._checked_at < 1.0:
            return
        self._checked_at = now
        stamp = self._stamp()
        if stamp == self._settings_stamp:
            return
        self._settings_stamp = stamp
        try:
            fresh = load_settings(self._settings_file.parent.parent)
        except Exception as exc:  # keep serving with what worked
            logger.warning("gateway settings not reloaded: %s", exc)
            return
        self.settings = replace(fresh, **{**self._pinned, "port": self.settings.port})
        logger.info("gateway settings reloaded: upstreams %s", dict(self.settings.upstreams))

    # ---------------------------------------------------------------- proxying

    async def proxy(self, request: Request) -> Response:
        self.requests += 1
        self.refresh_settings()
        assert self.client is not None, "the gateway's lifespan has not started"
        path = request.url.path
        # TOMC's own per-request options (x-tomc-*) are read here and never forwarded.
        items = [(n, v) for n, v in request.headers.items() if not n.lower().startswith(OWN_PREFIX)]
        headers = {name.lower(): value for name, value in request.headers.items()}
        options = RequestOptions.from_headers(headers)
        headers = {
            name: value for name, value in headers.items() if not name.startswith(OWN_PREFIX)
        }
        route = route_request(path, request.url.query, headers, self.settings)
        body = await request.body()
        prepared_body, add, checkout = body, {}, None
        api = route.api if request.method == "POST" else None
        if api is not None:
            prepared_body, add, checkout = await self._rewrite(api, headers, body, options, path)
        else:
            self.passthrough_paths += 1
            self._count(passthrough_paths=1)
        conversation = checkout.conversation if checkout is not None else None
        if api is not None and conversation is None:
            self._count(unprepared=1)
        # Read now: _rewrite recorded it and nothing ran since (no await in between).
        decision = conversation.last_decision if conversation is not None else None
        sniffer = UsageSniffer(api, DIALECTS[api].prompt_tokens) if api is not None else None
        compact_api = compaction_api(path) if request.method == "POST" else None
        finished = False

        def done(prompt_tokens: int | None, status: int) -> None:
            nonlocal finished
            finished = True
            if conversation is not None and prompt_tokens is not None and status < 400:
                conversation.session.observe_usage(prompt_tokens)
                checkout.changed()
            self._record_usage(api, conversation, decision, sniffer, status)
            if checkout is not None:  # saved and released once the answer is out
                self._spawn(self._hand_back(checkout, conversation))
            if compact_api is not None and status < 400:
                self._spawn(self._note_compaction(compact_api, headers, body, path))

        response = await relay(
            self.client,
            method=request.method,
            url=route.url,
            headers=forward_headers(items, add),
            body=prepared_body,
            api=route.api,
            sniffer=sniffer,
            on_done=done,
            disconnected=partial(client_gone, request.receive),
        )
        if checkout is not None and not finished and not isinstance(response, StreamingResponse):
            self._spawn(checkout.finish())  # the upstream was not reached: hand it back now
        return response

    async def _rewrite(
        self,
        api: str,
        headers: dict[str, str],
        body: bytes,
        options: RequestOptions | None = None,
        path: str = "",
    ) -> tuple[bytes, dict[str, str], Checkout | None]:
        """The body to send, headers to add, and the conversation checked out for it; the
        original body on any failure."""
        if headers.get("content-encoding", "identity") != "identity":
            logger.info("forwarding a %s request unchanged: its body is compressed", api)
            return body, {}, None
        if len(body) > MAX_REWRITE_BYTES:
            logger.info("forwarding a %s request unchanged: body over %d bytes", api, len(body))
            return body, {}, None
        try:
            data = json.loads(body)
        except (ValueError, RecursionError):
            logger.info("forwarding a %s request unchanged: its body is not JSON", api)
            return body, {}, None
        if not isinstance(data, dict):
            return body, {}, None
        options = options or RequestOptions()
        checkout = conversation = None
        try:
            view = request_view(api, path, data)  # with the model, also when the URL names it
            target, source = options.context_target(self.settings, api, headers, view)
            checkout = await self.conversations.checkout(conversation_key(api, headers, view), api)
            conversation = checkout.conversation
            if conversation is None:
                logger.info("forwarding a %s request unchanged: session store unavailable", api)
                return body, {}, checkout
            conversation.target_source = source
            prepared = await anyio.to_thread.run_sync(
                partial(
                    conversation.session.prepare_request,
                    view,
                    api=api,
                    context_target=target,
                    thinking_prefix=options.thinking_prefix or self.settings.thinking_prefix,
                    cache_ttl_s=self.settings.cache_ttl_s,
                )
            )
        except Exception as exc:  # fail open: the agent's request must go out as it came
            logger.warning(
                "forwarding a %s request unchanged: TOMC failed (%s: %s)",
                api,
                type(exc).__name__,
                exc,
                exc_info=True,
            )
            if conversation is not None:
                conversation.record(None, time.monotonic())
                checkout.changed()
            return body, {}, checkout
        decision = prepared.decision
        conversation.record(decision, time.monotonic())
        checkout.changed()
        logger.info(
            "%s %s: %s (%s -> %s tokens)",
            api,
            decision.action,
            decision.code,
            decision.tokens_before,
            decision.tokens_after,
        )
        if prepared.body is view:
            return body, {}, checkout
        sent = wire_body(data, view, prepared.body)
        encoded = json.dumps(sent, ensure_ascii=False, separators=(",", ":"))
        return encoded.encode("utf-8", "surrogatepass"), dict(prepared.headers), checkout

    def _record_usage(
        self,
        api: str | None,
        conversation: ConversationRecord | None,
        decision: Decision | None,
        sniffer: UsageSniffer | None,
        status: int,
    ) -> None:
        """Hand a finished request's figures to the ledger (never fails the request)."""
        if api is None and status < 400:
            return  # a path only forwarded counts only when the upstream refused it
        try:
            usage = sniffer.usage if sniffer is not None and status < 400 else None
            key = conversation.key if conversation is not None else ""
            if usage is not None and conversation is not None:  # the request's account
                conversation.note_usage(usage)
            self.ledger.record(LedgerEntry.of_request(api or "", key, status, decision, usage))
        except Exception as exc:  # only bookkeeping
            logger.warning("usage not recorded (%s: %s)", type(exc).__name__, exc)

    async def _hand_back(self, checkout: Checkout, conversation: ConversationRecord | None) -> None:
        """Release the conversation once the ledger holds its request: a shared ledger's next
        direct estimate of it, in whichever process, starts from this one."""
        if conversation is not None:
            try:
                await self.ledger.written(conversation.key)
            except Exception as exc:  # only bookkeeping: the lease must go back regardless
                logger.warning("usage ledger not awaited (%s: %s)", type(exc).__name__, exc)
        await checkout.finish()

    async def _note_compaction(
        self, api: str, headers: dict[str, str], body: bytes, path: str
    ) -> None:
        """The agent compacted through its own endpoint: its session cools down as after a
        native compaction."""
        try:
            view = request_view(api, path, json.loads(body))
            checkout = await self.conversations.checkout(conversation_key(api, headers, view), api)
        except Exception:  # only bookkeeping: never fail the request for it
            return
        if checkout.conversation is not None:
            checkout.conversation.session.note_compaction(f"{api} compact endpoint")
            checkout.changed()
        await checkout.finish()

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
            **live,
            "this_process": {
                "pid": os.getpid(),
                "requests": self.requests,
                "passthrough_paths": self.passthrough_paths,
            },
            "traffic": traffic,
        }


def create_gateway_app(
    settings: GatewaySettings | None = None,
    *,
    gateway: Gateway | None = None,
    home: str | os.PathLike[str] | None = None,
    pinned: Mapping[str, Any] | None = None,
    session_store: str | StoreURL | None = None,
    allowed_hosts: Collection[str] | None = LOOPBACK_HOSTS,
    status_token: str | None = None,
) -> Starlette:
    """The gateway application (see the module docstring). With ``home``, settings saved there
    later are picked up while it runs, except the ``pinned`` ones (command-line options).

    ``session_store`` is a ``--session-store`` URL; ``allowed_hosts`` the Host names it answers
    (``None``: any); ``status_token`` guards the status page and the inspector.

    Log records of the gateway and the libraries under it are redacted from here on
    (:func:`~tomc._gateway.proxy.redact.install_redaction`)."""
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
        try:
            return await gateway.proxy(request)
        except ClientDisconnect:  # gone while sending its body: nobody to answer
            logger.info("client left while sending %s %s", request.method, request.url.path)
            return Response(status_code=499)
        except Exception as exc:  # the last line of defence: answer in the client's shape
            logger.error("gateway error on %s %s", request.method, request.url.path, exc_info=exc)
            api = api_for_path(request.url.path)
            return error_response(
                api, 502, f"TOMC gateway error ({type(exc).__name__})", "api_error"
            )

    def allowed_origins() -> tuple[str, ...]:
        gateway.refresh_settings()
        return gateway.settings.allow_origins

    return Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET", "HEAD"]),
            Route("/status", status_page, methods=["GET", "HEAD"]),
            Route("/status.json", status_json, methods=["GET", "HEAD"]),
            *inspector_routes(),
            Route("/{path:path}", proxy, methods=_METHODS),
        ],
        middleware=[
            Middleware(HostCheck, allowed=allowed_hosts),
            Middleware(OriginCheck, allowed=allowed_origins),
            Middleware(StatusAccess, token=status_token),
        ],
        lifespan=gateway.lifespan,
    )
