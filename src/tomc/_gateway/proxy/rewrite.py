"""The body a request goes out with: its conversation's session rewrites old history, or the
original bytes go out unchanged.

:func:`readable_body` says whether a body can be rewritten at all (not compressed, not too big,
a JSON object); :func:`rewrite` is the pure step (an exchange, its request view and the
conversation's session in, the bytes and headers to send out); :func:`prepare` checks the
conversation out of the store around it and keeps the fail-open rule: any error inside TOMC
sends the original request bytes unchanged, and says why in the log.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import anyio

from ...chat import AutomaticChatSession, Decision
from ..settings import GatewaySettings
from .exchange import Exchange
from .routing import conversation_of, wire_body
from .store import Checkout, Conversations

__all__ = ["MAX_REWRITE_BYTES", "Rewrite", "prepare", "readable_body", "rewrite"]

logger = logging.getLogger("tomc.gateway")

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


def rewrite(
    exchange: Exchange,
    data: dict[str, Any],
    view: dict[str, Any],
    session: AutomaticChatSession,
    *,
    target: int | None,
    settings: GatewaySettings,
) -> Rewrite:
    """The session's answer for one request (``view`` is :func:`.routing.request_view` of its
    JSON ``data``): the original bytes when it keeps the request as it is, else the rewritten
    body in the format's own shape, compact JSON."""
    assert exchange.dialect is not None, "only a request in a known format is rewritten"
    prepared = session.prepare_request(
        view,
        api=exchange.dialect.name,
        context_target=target,
        thinking_prefix=exchange.options.thinking_prefix or settings.thinking_prefix,
        cache_ttl_s=settings.cache_ttl_s,
    )
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
    when the body could not be read); a session's decision is recorded in the conversation."""
    unchanged = Rewrite(exchange.body)
    dialect = exchange.dialect
    data = readable_body(exchange)
    if dialect is None or data is None:
        return unchanged, None
    checkout = conversation = None
    try:
        # The view names the model, also when the URL does.
        view, key = conversation_of(dialect, exchange.path, exchange.headers, data)
        target, source = exchange.options.context_target(
            settings, dialect.name, exchange.headers, view
        )
        checkout = await conversations.checkout(key, dialect.name)
        conversation = checkout.conversation
        if conversation is None:
            logger.info(
                "forwarding a %s request unchanged: session store unavailable", dialect.name
            )
            return unchanged, checkout
        conversation.target_source = source
        step = partial(rewrite, exchange, data, view, conversation.session)
        done = await anyio.to_thread.run_sync(partial(step, target=target, settings=settings))
    except Exception as exc:  # fail open: the agent's request must go out as it came
        logger.warning(
            "forwarding a %s request unchanged: TOMC failed (%s: %s)",
            dialect.name,
            type(exc).__name__,
            exc,
            exc_info=True,
        )
        if conversation is not None and checkout is not None:
            conversation.record(None, time.monotonic())
            checkout.changed()
        return unchanged, checkout
    decision = done.decision
    assert decision is not None
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
    return done, checkout
