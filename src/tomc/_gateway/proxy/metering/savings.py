"""The one account of savings every status surface shows, under the same names everywhere.

The account is the usage ledger's (:mod:`.traffic`): what the provider billed for the input TOMC
sent (``billed_input``), against an estimate of what the same requests would have been billed
going direct (``direct_input``, shown as "estimated direct"), and their difference
(``billed_saved``, ``billed_saved_share``). The status page, ``/status.json``, ``tomc gateway
status`` and the LiteLLM hook's figures use these names, and the page and the command print the
same sentence (:meth:`Savings.sentence`).

Two other figures exist and are never shown as savings, because neither is a bill:

- TOMC's own count (``tomc_tokens_before`` / ``tomc_tokens_after``): its tokenizer's estimate of
  each prompt before and after its rewrite, without the provider's framing or its cache;
- a session's own cost estimate (``tomc_cost_estimate``): what its policy priced before sending,
  in that same count, to decide when to rebuild. It once appeared on the status page as a
  second "billed vs direct" beside the ledger's, with other numbers for the same conversation:
  it is the session's forecast, the ledger holds what the provider reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "BILLED",
    "DIRECT",
    "METHOD_DOC",
    "METHOD_TEXT",
    "OWN_COUNT",
    "SAVED",
    "UNITS",
    "Savings",
    "shown_live",
    "shown_traffic",
]

#: Where the direct estimate is explained (the section of the traffic page that says how).
METHOD_DOC = "docs/agents/traffic.md#billed-input-and-the-direct-estimate"
#: The labels every surface uses for the account's figures and for TOMC's own count.
BILLED = "billed input"
DIRECT = "estimated direct"
SAVED = "saved"
OWN_COUNT = "TOMC's own count"
UNITS = "uncached-input-token equivalents, not money"
#: The estimate's method in brief (the status page shows it one click away; the doc above
#: says the same at length).
METHOD_TEXT = (
    "Billed input weighs the provider's reported input tokens by their price relative to an "
    "uncached input token: Anthropic input + 1.25 x cache writes + 0.1 x cache reads; OpenAI "
    "uncached input + 0.1 x cached; a model whose profile gives cache prices of its own "
    "(Claude Opus 5.5 reads at 0.05, DeepSeek at 0.02 and bills no writes) at those. Going "
    "direct is an estimate, per request: a request TOMC sent unchanged cost what it cost; a "
    "rewritten one's original prompt is the reported prompt times TOMC's own count before / "
    "after the rewrite, with the conversation's previous direct prompt read from the cache if"
    " it came within 5 minutes (or the model's longer retention), at the provider's cache "
    "prices. Output, which TOMC does not change, is left out."
)


def _n(value: float) -> str:
    return f"{value:,.0f}"


@dataclass(frozen=True)
class Savings:
    """Billed input against the estimated direct input, for the totals or one conversation."""

    billed_input: float
    direct_input: float

    @classmethod
    def of(cls, figures: Mapping[str, Any]) -> Savings:
        """From the ledger's figures (its ``totals`` or one of its ``conversations``)."""
        return cls(float(figures["billed_input"]), float(figures["direct_input"]))

    @property
    def saved(self) -> float:
        return self.direct_input - self.billed_input

    @property
    def share(self) -> float:
        """The saved share of the direct estimate (negative: TOMC cost more)."""
        return self.saved / self.direct_input if self.direct_input > 0 else 0.0

    def saved_text(self) -> str:
        """``"90,017 saved (11%)"``, or what it cost above direct when it did."""
        if round(self.saved) < 0:
            return f"{_n(-self.saved)} more than direct ({-self.share:.0%})"
        return f"{_n(self.saved)} {SAVED} ({self.share:.0%})"

    def sentence(self) -> str:
        """The account in one line, as every surface prints it."""
        return (
            f"{BILLED} {_n(self.billed_input)} against {_n(self.direct_input)} {DIRECT}: "
            f"{self.saved_text()}"
        )


# Live conversations' figures (the session store's) under the account's names: TOMC's count as
# TOMC's, and no "saved" key beside the ledger's.
_LIVE_RENAMED = {
    "tokens_without_tomc": "tomc_tokens_before",
    "tokens_sent": "tomc_tokens_after",
    "account": "tomc_cost_estimate",
}
_LIVE_DROPPED = frozenset({"tokens_saved", "saved_share"})


def _live_conversation(conversation: Mapping[str, Any]) -> dict[str, Any]:
    shown = {}
    for key, value in conversation.items():
        if key in _LIVE_DROPPED:
            continue
        if key == "account" and isinstance(value, Mapping):
            value = {
                "sent": value.get("billed"),
                "direct": value.get("direct"),
                "cache_misses": value.get("cache_misses", 0),
            }
        shown[_LIVE_RENAMED.get(key, key)] = value
    return shown


def shown_live(live: Mapping[str, Any]) -> dict[str, Any]:
    """The session store's live figures as ``/status.json`` shows them: each conversation's
    TOMC count named as such (``tomc_tokens_before`` / ``tomc_tokens_after``), its session's
    forecast as ``tomc_cost_estimate`` (``sent`` / ``direct``), and no ``tokens_saved``: the
    savings are the ledger's (``traffic``)."""
    shown = {key: value for key, value in live.items() if key not in _LIVE_DROPPED}
    if isinstance(live.get("conversations"), list):
        shown["conversations"] = [_live_conversation(c) for c in live["conversations"]]
    return shown


def shown_traffic(traffic: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ledger's figures as ``/status.json`` shows them: as read, with where the direct
    estimate's method is written (``method``) and its units."""
    if traffic is None:
        return None
    return {**traffic, "method": METHOD_DOC, "units": UNITS}
