"""A realistic gateway status for the status surfaces' tests: several conversations with long
keys, figures in the millions, upstream and gateway errors, written through a real usage ledger
(so the figures have the shape both ledgers give) and a live part in the session store's shape.
"""

from __future__ import annotations

from typing import Any

from tomc._gateway.proxy.metering.ledger import LedgerEntry, UsageLedger
from tomc._gateway.proxy.metering.savings import shown_live, shown_traffic
from tomc._gateway.proxy.metering.usage import ANTHROPIC, OPENAI, ProviderUsage

T0 = 1_800_000_000.0

#: Keys as the gateway makes them: a session id or a hash, a tenant prefix, the model.
KEYS = (
    "claude-code:3f2a9c1e-7b4d-4e21-9a6f-0c8d2e5b1a77|claude-opus-4-8",
    "codex:019a7c3e-55b1-7d20-8c4e-2f9e6a1b0d3c|gpt-6.2-sol",
    "0f4e8a9b2c1d7e6f/chat:a1b2c3d4e5f60718293a4b5c|gpt-4o-2024-08-06",
    "claude-code:9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a|claude-haiku-4-5-20251001",
)
MODELS = ("claude-opus-4-8", "gpt-6.2-sol", "gpt-4o-2024-08-06", "claude-haiku-4-5-20251001")
APIS = ("messages", "responses", "chat", "messages")


def _entries(minutes: int) -> list[LedgerEntry]:
    """Requests of the four conversations over ``minutes`` minutes, with errors of both kinds."""
    entries = []
    for step in range(minutes * 3):
        index = step % len(KEYS)
        api, key, model = APIS[index], KEYS[index], MODELS[index]
        billing = ANTHROPIC if api == "messages" else OPENAI
        prompt = 400_000 + 79_193 * step
        rewritten = step % 3 == 1
        usage = ProviderUsage(
            billing,
            prompt,
            cache_read_tokens=prompt * 4 // 5,
            cache_write_tokens=prompt // 10 if billing == ANTHROPIC else 0,
            output_tokens=900 + step,
        )
        entries.append(
            LedgerEntry(
                at=T0 + step * 20,
                api=api,
                conversation=key,
                status=200,
                model=model,
                action="compiled" if rewritten else "passthrough",
                code="compiled" if rewritten else "fits",
                tokens_before=int(prompt * 1.6) if rewritten else prompt,
                tokens_after=prompt,
                usage=usage,
            )
        )
    last = T0 + minutes * 60
    for status, key in ((429, KEYS[0]), (429, KEYS[0]), (529, KEYS[1])):
        entries.append(LedgerEntry(at=last, api=APIS[0], conversation=key, status=status))
    for kind, key in (("unreachable", KEYS[0]), ("unreachable", KEYS[2]), ("timeout", KEYS[2])):
        entries.append(
            LedgerEntry(at=last, api="chat", conversation=key, status=502, gateway_error=kind)
        )
    return entries


def fill_ledger(ledger: UsageLedger, minutes: int = 40) -> UsageLedger:
    """``ledger`` once it has stored the requests of four conversations over ``minutes``."""
    for entry in _entries(minutes):
        ledger.record(entry)
    assert ledger.flush(10)
    return ledger


def ledger_traffic(minutes: int = 40) -> dict[str, Any]:
    """The ledger's figures for those requests (kept in memory)."""
    ledger = fill_ledger(UsageLedger(None), minutes)
    traffic = ledger.traffic(limit=20)
    ledger.close()
    return traffic


def live_status() -> dict[str, Any]:
    """The session store's live figures, as ``Gateway.live_status()`` reads them."""
    return {"tokens_saved": 2_000_000, "conversations": live_conversations()}


def live_conversations() -> list[dict[str, Any]]:
    """Live conversations in the session store's shape (``tokens_without_tomc``, ``account``)."""
    live = []
    for index, (key, api, model) in enumerate(zip(KEYS, APIS, MODELS, strict=True)):
        before, after = 1_490_199 - index * 300_017, 705_831 - index * 120_003
        live.append(
            {
                "conversation": key,
                "api": api,
                "model": model,
                "requests": 1_234 - index * 100,
                "rebuilds": 17 - index,
                "decisions": {"compiled": 12, "fits": 1_100, "reused": 40, "gateway_error": index},
                "last_decision": "reused",
                "context_target": 150_000 if index % 2 == 0 else None,
                "target_source": "settings",
                "tokens_sent": after,
                "tokens_without_tomc": before,
                "tokens_saved": before - after,
                "saved_share": (before - after) / before,
                "account": {"billed": 525_543.0, "direct": 591_726.0},
                "last_request": None,
                "gateway_errors": index,
                "idle_s": 12.5 * index,
                "age_s": 3_600.0,
            }
        )
    return live


def realistic_status(minutes: int = 40) -> dict[str, Any]:
    """A whole ``Gateway.status()`` as ``/status.json`` shows it."""
    live = {"requests": 4_321, "passthrough_paths": 12, **live_status()}
    return {
        "service": "tomc-gateway",
        "version": "0.0.0-test",
        "port": 8787,
        "uptime_s": 7_200.0,
        "upstreams": {"anthropic": "https://api.anthropic.com", "openai": "https://api.openai.com"},
        "thinking_prefix": "passthrough",
        "context_target": "per agent default",
        **shown_live(live),
        "traffic": shown_traffic(ledger_traffic(minutes)),
    }
