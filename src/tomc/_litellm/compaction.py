"""TOMC inside a LiteLLM proxy: the same sessions, targets, memory blocks, stores, leases, usage
ledger and fail-open rule as the gateway, driven by LiteLLM's hook calls instead of HTTP.

:class:`LiteLLMCompactor` does the work and imports nothing of LiteLLM (so it is tested on its
own); :mod:`tomc.litellm` wraps it in LiteLLM's ``CustomLogger``. One request:

1. :meth:`~LiteLLMCompactor.prepare` (LiteLLM's pre-call hook): the conversation is checked out
   of the store (held until the answer is in, as in the gateway), its session decides, and a
   rewritten history replaces the one in LiteLLM's ``data``; the decision goes into the
   request's ``spend_logs_metadata`` (``tomc``), which LiteLLM's spend logs and callbacks keep;
2. :meth:`~LiteLLMCompactor.finish` (the success or failure event): the provider's reported
   prompt size goes back to the session, the usage ledger gets its entry, and the conversation
   is handed back.

Any error inside TOMC leaves ``data`` as it came (the request goes out unchanged) and is logged;
nothing here raises into LiteLLM.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .._gateway.proxy.metering.ledger import Ledger, LedgerEntry, UsageLedger, ledger_path
from .._gateway.proxy.metering.savings import shown_live, shown_traffic
from .._gateway.proxy.options import RequestOptions, new_session
from .._gateway.proxy.rewrite import decide
from .._gateway.proxy.routing import conversation_of
from .._gateway.proxy.store import Checkout, Conversations, open_conversations
from .._gateway.settings import GatewaySettings, parse_context_target
from .._home import default_home
from ..chat import Decision
from ..chat.dialects import Dialect
from .requests import (
    apply_body,
    client_body,
    client_headers,
    dialect_of,
    key_settings,
    metadata_of,
    note_in_spend_logs,
    usage_of,
)

__all__ = ["HookSettings", "LiteLLMCompactor"]

logger = logging.getLogger("tomc.litellm")

#: A checkout whose answer never came (another hook refused the request after this one) is
#: handed back after this long.
_ABANDONED_S = 15 * 60.0


@dataclass(frozen=True)
class HookSettings:
    """The hook's settings: ``session_store`` (``memory`` or a ``redis://`` URL, as
    ``--session-store``), the default ``context_target`` (``None``: each agent's default;
    ``"off"``), ``thinking_prefix``, and ``home`` (where the usage ledger lives with a memory
    store). :meth:`from_env` reads ``TOMC_SESSION_STORE``, ``TOMC_CONTEXT_TARGET``,
    ``TOMC_THINKING_PREFIX`` and ``TOMC_HOME``."""

    session_store: str = "memory"
    context_target: int | str | None = None
    thinking_prefix: str = GatewaySettings.thinking_prefix
    home: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> HookSettings:
        env = os.environ if environ is None else environ
        return cls(
            session_store=env.get("TOMC_SESSION_STORE", "").strip() or "memory",
            context_target=parse_context_target(env.get("TOMC_CONTEXT_TARGET", "").strip()),
            thinking_prefix=env.get("TOMC_THINKING_PREFIX", "").strip()
            or GatewaySettings.thinking_prefix,
            home=env.get("TOMC_HOME") or None,
        )

    def gateway_settings(self) -> GatewaySettings:
        return GatewaySettings(
            context_target=self.context_target, thinking_prefix=self.thinking_prefix
        )


@dataclass
class _Pending:
    """A request between its pre-call hook and its answer."""

    dialect: Dialect
    checkout: Checkout
    decision: Decision | None
    started: float = field(default_factory=time.monotonic)


class LiteLLMCompactor:
    """The work of the LiteLLM hook (see the module docstring). ``conversations`` and
    ``ledger`` replace the ones the settings name (tests)."""

    def __init__(
        self,
        settings: HookSettings | None = None,
        *,
        conversations: Conversations | None = None,
        ledger: Ledger | None = None,
    ) -> None:
        self.settings = settings or HookSettings.from_env()
        self._gateway_settings = self.settings.gateway_settings()
        self._conversations = conversations
        self._ledger = ledger
        self._pending: dict[str, _Pending] = {}
        self.requests = 0
        self.failures = 0

    @property
    def conversations(self) -> Conversations:
        if self._conversations is None:  # opened on first use: a Redis client needs the loop
            self._conversations = open_conversations(self.settings.session_store, new_session)
        return self._conversations

    @property
    def ledger(self) -> Ledger:
        if self._ledger is None:
            ledger = self.conversations.open_ledger()
            if ledger is None:
                home = self.settings.home or default_home()
                ledger = UsageLedger(ledger_path(home))
            self._ledger = ledger
        return self._ledger

    async def prepare(
        self,
        data: dict[str, Any],
        call_type: str,
        key_metadata: object = None,
        team_metadata: object = None,
    ) -> None:
        """Rewrite ``data``'s history in place when its session decides to; never raises."""
        dialect = dialect_of(call_type)
        call_id = data.get("litellm_call_id")
        if dialect is None or not isinstance(call_id, str):
            return
        self.requests += 1
        self._drop_abandoned()
        try:
            await self._prepare(data, dialect, call_id, key_metadata, team_metadata)
        except Exception as exc:  # fail open: the request goes out as it came
            self.failures += 1
            logger.warning(
                "litellm %s request sent unchanged: TOMC failed (%s: %s)",
                dialect.name,
                type(exc).__name__,
                exc,
                exc_info=True,
            )

    async def _prepare(
        self,
        data: dict[str, Any],
        dialect: Dialect,
        call_id: str,
        key_metadata: object,
        team_metadata: object,
    ) -> None:
        headers = client_headers(data)
        view = client_body(data, dialect)
        view, key = conversation_of(dialect, "", headers, view)
        # Conversations of different keys never meet, even with the same opening turns.
        tenant = metadata_of(data).get("user_api_key_hash")
        if isinstance(tenant, str) and tenant:
            key = f"{tenant[:16]}/{key}"
        own = key_settings(key_metadata, team_metadata)
        options = RequestOptions.from_headers(headers)
        if own.target is not None:
            options = RequestOptions(own.target, None, options.thinking_prefix)
        target, source = options.context_target(self._gateway_settings, dialect.name, headers, view)
        if own.target is not None:
            source = own.source
        checkout = await self.conversations.checkout(key, dialect.name)
        try:  # handed back at once if anything below fails
            prepared = await decide(
                checkout,
                dialect,
                view,
                target=target,
                source=source,
                thinking_prefix=options.thinking_prefix,
                settings=self._gateway_settings,
                then=lambda answer: answer,
            )
            if prepared is None:
                await checkout.finish()
                return
            decision = prepared.decision
            if prepared.body is not view:
                apply_body(data, view, prepared.body)
                for name, value in prepared.headers.items():  # a beta the rewrite relies on
                    extra = data.setdefault("extra_headers", {})
                    extra[name] = ",".join(filter(None, (extra.get(name), value)))
            # TOMC's own count, named as in the gateway's figures: not a saving (the request
            # is not billed yet; LiteLLM's spend log has the provider's usage beside it).
            note_in_spend_logs(
                data,
                {
                    "decision": decision.code,
                    "tomc_tokens_before": decision.tokens_before,
                    "tomc_tokens_after": decision.tokens_after,
                    "context_target": decision.context_target,
                    "target_source": source,
                },
            )
        except Exception:
            await checkout.finish()
            raise
        self._pending[call_id] = _Pending(dialect, checkout, decision)

    async def finish(self, call_id: object, response: object, status: int) -> None:
        """The answer of ``call_id`` is in (``status`` 200 with its ``response``, else the
        error's status): usage to the session and the ledger, the conversation handed back.
        Never raises."""
        pending = self._pending.pop(call_id, None) if isinstance(call_id, str) else None
        if pending is None:
            return
        conversation = pending.checkout.conversation
        try:
            usage = usage_of(response, pending.dialect) if status < 400 else None
            if conversation is not None and usage is not None:
                usage = conversation.priced(usage, pending.decision)
                conversation.session.observe_usage(usage.prompt_tokens)
                conversation.note_usage(usage)
                pending.checkout.changed()
            key = conversation.key if conversation is not None else ""
            name = pending.dialect.name
            self.ledger.record(LedgerEntry.of_request(name, key, status, pending.decision, usage))
            if conversation is not None:
                await self.ledger.written(conversation.key)
        except Exception as exc:  # only bookkeeping
            logger.warning("litellm usage not recorded (%s: %s)", type(exc).__name__, exc)
        finally:
            await pending.checkout.finish()

    def _drop_abandoned(self) -> None:
        now = time.monotonic()
        for call_id, pending in list(self._pending.items()):
            if now - pending.started > _ABANDONED_S:
                del self._pending[call_id]
                asyncio.get_running_loop().create_task(pending.checkout.finish())

    async def status(self) -> dict[str, Any]:
        """The figures of the gateway's ``/status.json`` for the conversations this hook
        served (summed over every process with a shared store), and its ledger's traffic."""
        live = await self.conversations.status()
        traffic = await self.ledger.read(20)
        return {
            "service": "tomc-litellm-hook",
            "session_store": self.settings.session_store,
            "this_process": {"requests": self.requests, "failures": self.failures},
            **shown_live(live),
            "traffic": shown_traffic(traffic),
        }

    async def aclose(self) -> None:
        for pending in self._pending.values():
            await pending.checkout.finish()
        self._pending.clear()
        if self._ledger is not None:
            await self._ledger.aclose()
        if self._conversations is not None:
            await self._conversations.close()
