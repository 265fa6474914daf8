"""One conversation as the gateway keeps it: its session and the figures of its requests.

A :class:`ConversationRecord` holds the conversation's :class:`~tomc.chat.AutomaticChatSession`
(everything its decisions depend on is the session's :class:`~tomc.chat.ConversationState`,
plain data saved as JSON) and the figures the status page shows, never message text. Session
stores (:mod:`tomc._gateway.proxy.store`) keep records; every kind hands out the same record.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ...chat import AutomaticChatSession, Decision
from .metering.usage import ProviderUsage

__all__ = ["ConversationRecord"]

logger = logging.getLogger("tomc.gateway")


@dataclass
class ConversationRecord:
    """A conversation's session and what happened to its requests (figures only)."""

    key: str
    api: str
    session: AutomaticChatSession
    created: float
    last_seen: float
    requests: int = 0
    codes: Counter = field(default_factory=Counter)
    tokens_before: int = 0
    tokens_after: int = 0
    #: Requests the gateway failed on (shown as ``gateway_errors``): TOMC failed preparing one
    #: (it went out unchanged), or the gateway answered one itself with an error (the upstream
    #: not reached, the connection dropped, no answer in time). At most one per request.
    failures: int = 0
    last_model: str = ""
    last_code: str = ""
    #: The decision of the latest request (``None`` after a gateway error), for the usage ledger.
    last_decision: Decision | None = None
    #: The last decision's context target (``None``: none applied) and where it came from.
    context_target: int | None = None
    target_source: str = ""
    #: What the provider reported for the latest request, once its answer is in.
    last_usage: ProviderUsage | None = None

    def record(self, decision: Decision | None, now: float) -> None:
        self.requests += 1
        self.last_seen = now
        self.last_decision = decision
        self.last_usage = None
        if decision is None:
            self.failures += 1
            self.last_code = "gateway_error"
            self.codes["gateway_error"] += 1
            return
        self.codes[decision.code] += 1
        self.tokens_before += decision.tokens_before
        self.tokens_after += decision.tokens_after
        self.last_model = decision.model
        self.last_code = decision.code
        self.context_target = getattr(decision, "context_target", None)

    def note_gateway_error(self) -> None:
        """The gateway answered the latest request itself with an error (:meth:`record` ran
        for it): counted, unless TOMC had already failed on that request."""
        if self.last_decision is not None:
            self.failures += 1

    def priced(self, usage: ProviderUsage, decision: Decision | None) -> ProviderUsage:
        """``usage`` billed at the cache prices of the decision's model where the session's
        profiles give it prices of its own (``decision`` ``None``: the family's)."""
        if decision is None or not decision.model:
            return usage
        profile = self.session.profiles.get(decision.model)
        return usage.priced(profile.cache if profile is not None else None)

    def note_usage(self, usage: ProviderUsage) -> None:
        """The provider's side of the latest request: what it counted, read from its cache,
        wrote to it and billed (logged, and shown in the status as ``last_request``)."""
        self.last_usage = usage
        code = self.last_decision.code if self.last_decision is not None else "-"
        logger.info("%s %s: %s", self.key, code, usage.describe())

    def last_request(self) -> dict[str, Any] | None:
        """The latest request's account: TOMC's decision and time, the provider's figures."""
        decision, usage = self.last_decision, self.last_usage
        if decision is None:
            return None
        return {
            "decision": decision.code,
            "rebuild": decision.rebuild,
            "tokens_before": decision.tokens_before,
            "tokens_after": decision.tokens_after,
            "prepare_ms": round(decision.prepare_s * 1000, 1),
            "provider": None
            if usage is None
            else {
                "prompt_tokens": usage.prompt_tokens,
                "cache_read_tokens": usage.cache_read_tokens,
                "cache_write_tokens": usage.cache_write_tokens,
                "billed_input": round(usage.billed_input, 1),
            },
        }

    def to_dict(self, now: float) -> dict[str, Any]:
        saved = self.tokens_before - self.tokens_after
        return {
            "conversation": self.key,
            "api": self.api,
            "model": self.last_model,
            "requests": self.requests,
            "rebuilds": self.session.rebuilds,
            "decisions": dict(sorted(self.codes.items())),
            "last_decision": self.last_code,
            "context_target": self.context_target,
            "target_source": self.target_source,
            "tokens_sent": self.tokens_after,
            "tokens_without_tomc": self.tokens_before,
            "tokens_saved": saved,
            "saved_share": saved / self.tokens_before if self.tokens_before else 0.0,
            "account": _account(self.session),
            "last_request": self.last_request(),
            "gateway_errors": self.failures,
            "idle_s": round(now - self.last_seen, 1),
            "age_s": round(now - self.created, 1),
        }


def _account(session: AutomaticChatSession) -> dict[str, float]:
    """The session's cost account: what it billed against going direct, by its own estimates,
    and how many rewrites the provider then read clearly less of from its cache than priced."""
    account = session.state.account
    return {
        "billed": round(account.sent, 1),
        "direct": round(account.direct, 1),
        "cache_misses": account.cache_misses,
    }
