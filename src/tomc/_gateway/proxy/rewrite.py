"""The body a request goes out with: its conversation's session rewrites old history, or the
original bytes go out unchanged.

:func:`readable_body` says whether a body can be rewritten at all (not compressed, not too big,
a JSON object); :func:`decide` asks a checked-out conversation's session about a request and
records the decision (the LiteLLM hook uses it too); :func:`prepare` checks the conversation out
of the store around it and keeps the fail-open rule: any error inside TOMC sends the original
request bytes unchanged, and says why in the log.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, TypeVar

import anyio

from ...chat import Decision, PreparedRequest
from ...chat.dialects import Dialect
from ..settings import GatewaySettings
from .exchange import Exchange
from .routing import conversation_of, wire_body
from .store import Checkout, Conversations

__all__ = ["MAX_REWRITE_BYTES", "Rewrite", "decide", "prepare", "readable_body"]

logger = logging.getLogger("tomc.gateway")
T = TypeVar("T")

#: Largest request body the gateway reads to rewrite (a bigger one is forwarded untouched).
MAX_REWRITE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class Rewrite:
    """What a request goes out with: ``body`` (the original bytes when unchanged), ``headers``
    to add, and the session's ``decision`` (``None`` when no session decided)."""

    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    decision: Decision | None = None


def readable_body(exchange: Exchange) -> dict[str, Any] | None:
    """The request's JSON object, or ``None`` (logged) when it must go out as it came."""
    api = exchange.api
    if exchange.headers.get("content-encoding", "identity") != "identity":
        logger.info("forwarding a %s request unchanged: its body is compressed", api)
        return None
    if len(exchange.body) > MAX_REWRITE_BYTES:
        size = len(exchange.body)
        logger.info("forwarding a %s request unchanged: body over %d bytes", api, size)
        return None
    try:
        data = json.loads(exchange.body)
    except (ValueError, RecursionError):
        logger.info("forwarding a %s request unchanged: its body is not JSON", api)
        return None
    return data if isinstance(data, dict) else None


async def decide(
    checkout: Checkout,
    dialect: Dialect,
    view: dict[str, Any],
    *,
    target: int | None,
    source: str,
    thinking_prefix: str | None,
    settings: GatewaySettings,
    then: Callable[[PreparedRequest], T],
) -> T | None:
    """Ask the checked-out conversation's session about ``view`` in a worker thread, with
    ``then`` applied to its answer there too (encoding a body stays off the event loop); the
    decision is recorded in the conversation, a failure as a gateway error before it is raised.
    ``None`` when the store gave no conversation (the request goes out unchanged)."""
    conversation = checkout.conversation
    if conversation is None:
        logger.info("forwarding a %s request unchanged: session store unavailable", dialect.name)
        return None
    conversation.target_source = source

    def work() -> tuple[Decision, T]:
        prepared = conversation.session.prepare_request(
            view,
            api=dialect.name,
            context_target=target,
            thinking_prefix=thinking_prefix or settings.thinking_prefix,
            cache_ttl_s=settings.cache_ttl_s,
        )
        return prepared.decision, then(prepared)

    try:
        decision, done = await anyio.to_thread.run_sync(work)
    except Exception:
        conversation.record(None, time.monotonic())
        checkout.changed()
        raise
    conversation.record(decision, time.monotonic())
    checkout.changed()
    logger.info(
        "%s %s: %s (%s -> %s tokens)",
        dialect.name,
        decision.action,
        decision.code,
        decision.tokens_before,
        decision.tokens_after,
    )
    return done


def _encoded(
    exchange: Exchange, data: dict[str, Any], view: dict[str, Any], prepared: PreparedRequest
) -> Rewrite:
    """The session's answer as the bytes to send: the original ones when it kept the request,
    else the rewritten body in the format's own shape, compact JSON."""
    if prepared.body is view:
        return Rewrite(exchange.body, {}, prepared.decision)
    sent = wire_body(data, view, prepared.body)
    encoded = json.dumps(sent, ensure_ascii=False, separators=(",", ":"))
    body = encoded.encode("utf-8", "surrogatepass")
    return Rewrite(body, dict(prepared.headers), prepared.decision)


async def prepare(
    exchange: Exchange, conversations: Conversations, settings: GatewaySettings
) -> tuple[Rewrite, Checkout | None]:
    """What the request goes out with, and its conversation checked out of the store (``None``
    for a request in no known format or whose body could not be read)."""
    unchanged = Rewrite(exchange.body)
    dialect = exchange.dialect
    if dialect is None:  # forwarded as it is: its body is never read
        return unchanged, None
    data = readable_body(exchange)
    if data is None:
        return unchanged, None
    checkout = None
    try:
        # The view names the model, also when the URL does.
        view, key = conversation_of(dialect, exchange.path, exchange.headers, data)
        target, source = exchange.options.context_target(
            settings, dialect.name, exchange.headers, view
        )
        checkout = await conversations.checkout(key, dialect.name)
        done = await decide(
            checkout,
            dialect,
            view,
            target=target,
            source=source,
            thinking_prefix=exchange.options.thinking_prefix,
            settings=settings,
            then=partial(_encoded, exchange, data, view),
        )
    except Exception as exc:  # fail open: the agent's request must go out as it came
        logger.warning(
            "forwarding a %s request unchanged: TOMC failed (%s: %s)",
            dialect.name,
            type(exc).__name__,
            exc,
            exc_info=True,
        )
        return unchanged, checkout
    return (done if done is not None else unchanged), checkout
