"""The LiteLLM hook's work in this process (no LiteLLM needed): a request rewritten in place, its
answer fed back and written to the ledger, failing open, conversations kept apart per key."""

from __future__ import annotations

import asyncio
import copy
import json
from types import SimpleNamespace
from typing import Any

import pytest

from dialect_fixtures import claude_code_request, codex_request, request_tokens
from tomc._gateway.proxy.metering.ledger import UsageLedger
from tomc._litellm.compaction import HookSettings, LiteLLMCompactor

MEMORY = "[TOMC memory"


def litellm_data(body: dict[str, Any], call_id: str, key_hash: str = "key-a") -> dict[str, Any]:
    """``data`` as LiteLLM hands it to a pre-call hook on its Anthropic route."""
    return {
        **copy.deepcopy(body),
        "litellm_call_id": call_id,
        "litellm_metadata": {"user_api_key_hash": key_hash},
        "proxy_server_request": {"headers": {}, "body": copy.deepcopy(body)},
    }


def answer(prompt_tokens: int) -> SimpleNamespace:
    usage = SimpleNamespace(prompt_tokens=prompt_tokens, completion_tokens=20)
    return SimpleNamespace(usage=usage)


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def compactor_for(body: dict[str, Any]) -> LiteLLMCompactor:
    target = max(2048, request_tokens("messages", body) * 3 // 4)
    settings = HookSettings(context_target=target)
    return LiteLLMCompactor(settings, ledger=UsageLedger(None))


def test_a_request_is_rewritten_in_place_and_its_answer_is_booked():
    body = claude_code_request(12, thinking=False)
    compactor = compactor_for(body)

    async def scenario() -> dict[str, Any]:
        data = litellm_data(body, "call-1")
        await compactor.prepare(data, "anthropic_messages")
        await compactor.finish("call-1", answer(request_tokens("messages", data)), 200)
        status = await compactor.status()
        await compactor.aclose()
        return {"data": data, "status": status}

    done = run(scenario())
    data = done["data"]
    assert MEMORY in json.dumps(data["messages"]) and data["messages"] != body["messages"]
    logged = data["litellm_metadata"]["spend_logs_metadata"]["tomc"]
    assert logged["decision"] == "compiled"
    # TOMC's own count under the gateway's names, and no "saved" figure: the request is not
    # billed yet (LiteLLM's spend log has the provider's usage beside it).
    assert logged["tomc_tokens_before"] > logged["tomc_tokens_after"] > 0
    assert not {"tokens_saved", "tokens_before", "tokens_after"} & set(logged)
    assert data["litellm_metadata"]["user_api_key_hash"] == "key-a"  # LiteLLM's own kept
    (conversation,) = done["status"]["conversations"]
    assert conversation["requests"] == 1 and conversation["conversation"].startswith("key-a/")
    # The figures of /status.json, under its names: one account of savings, the ledger's.
    assert "tokens_saved" not in done["status"] and "tokens_saved" not in conversation
    assert conversation["tomc_tokens_before"] > conversation["tomc_tokens_after"]
    assert done["status"]["traffic"]["method"].startswith("docs/agents/traffic.md#")
    assert conversation["last_request"]["provider"]["prompt_tokens"] > 0
    assert done["status"]["traffic"]["totals"]["requests"] == 1


def test_what_the_hook_cannot_read_goes_out_as_it_came():
    compactor = LiteLLMCompactor(HookSettings(), ledger=UsageLedger(None))
    broken = {"model": "claude-opus-4-8", "messages": "not a list", "litellm_call_id": "c"}
    untouched = copy.deepcopy(broken)
    other_route = {"input": "embed me", "litellm_call_id": "d"}

    async def scenario() -> None:
        await compactor.prepare(broken, "anthropic_messages")
        await compactor.prepare(other_route, "aembedding")
        await compactor.finish("c", answer(10), 200)  # nothing pending: nothing happens
        await compactor.aclose()

    run(scenario())
    assert broken == untouched and other_route == {"input": "embed me", "litellm_call_id": "d"}
    assert (compactor.requests, compactor.failures) == (1, 1)


def test_the_same_conversation_under_two_keys_is_two_conversations():
    body = claude_code_request(10, thinking=False)
    compactor = compactor_for(body)

    async def scenario() -> dict[str, Any]:
        for call_id, key in (("1", "key-a"), ("2", "key-b")):
            await compactor.prepare(litellm_data(body, call_id, key), "anthropic_messages")
            await compactor.finish(call_id, answer(1000), 200)
        status = await compactor.status()
        await compactor.aclose()
        return status

    status = run(scenario())
    keys = sorted(c["conversation"].split("/")[0] for c in status["conversations"])
    assert keys == ["key-a", "key-b"]


def test_settings_come_from_the_environment_and_a_bad_one_is_named():
    settings = HookSettings.from_env(
        {"TOMC_SESSION_STORE": "redis://cache:6379/0", "TOMC_CONTEXT_TARGET": "off"}
    )
    assert (settings.session_store, settings.context_target) == ("redis://cache:6379/0", "off")
    assert HookSettings.from_env({}).session_store == "memory"
    try:
        HookSettings.from_env({"TOMC_CONTEXT_TARGET": "12"})
    except Exception as exc:  # below the smallest target the session takes
        assert "12" in str(exc)
    else:
        raise AssertionError("a target of 12 tokens was accepted")


TRIGGER = {"type": "input_tokens", "value": 50_000}


def claude_managed(edit: dict[str, Any]) -> dict[str, Any]:
    body = claude_code_request(45, thinking="thinking" in edit["type"])
    return {**body, "context_management": {"edits": [edit]}}


def codex_managed() -> dict[str, Any]:
    management = [{"type": "compaction", "compact_threshold": 50_000}]
    return {**codex_request(40), "context_management": management, "truncation": "auto"}


def codex_compacting() -> dict[str, Any]:
    body = codex_request(40)
    return {**body, "input": [*body["input"], {"type": "compaction_trigger"}]}


COMPACT = {"type": "compact_20260112", "trigger": TRIGGER}
CLEAR_TOOLS = {"type": "clear_tool_uses_20250919", "trigger": TRIGGER}
CASES = {
    "compact_20260112": ("anthropic_messages", "messages", claude_managed(COMPACT), 47_500),
    "clear_tool_uses": ("anthropic_messages", "messages", claude_managed(CLEAR_TOOLS), 47_500),
    "clear_thinking": (
        "anthropic_messages",
        "messages",
        claude_managed({"type": "clear_thinking_20251015"}),
        None,
    ),
    "compact_threshold": ("aresponses", "responses", codex_managed(), 47_500),
    "compaction_trigger": ("aresponses", "responses", codex_compacting(), None),
}


@pytest.mark.parametrize("call_type, api, body, ceiling", list(CASES.values()), ids=list(CASES))
def test_the_providers_context_management_in_the_hook(call_type, api, body, ceiling):
    """The gateway's rules hold in the hook: under the provider's trigger, every field kept;
    an agent's own compaction request untouched."""
    compactor = LiteLLMCompactor(HookSettings(), ledger=UsageLedger(None))
    data = litellm_data(body, "call-1")

    async def scenario() -> None:
        await compactor.prepare(data, call_type)
        await compactor.aclose()

    run(scenario())
    sent = {k: v for k, v in data.items() if k in body}
    for key in ("context_management", "truncation"):
        assert sent.get(key) == body.get(key)
    if ceiling is not None:
        assert request_tokens(api, sent) <= ceiling < request_tokens(api, body)
    else:
        assert sent == body  # nothing to keep it under: sent as it came


def test_a_session_that_fails_hands_its_conversation_back():
    """A failure after the checkout releases it at once (a shared store would otherwise keep the
    conversation leased for every later request to wait on) and counts as a gateway error."""
    from tomc._gateway.proxy.store.memory import LocalConversations, MemorySessionStore

    class Broken:
        def prepare_request(self, *args, **kwargs):
            raise RuntimeError("a bug")

    store = MemorySessionStore(Broken)  # type: ignore[arg-type]
    released: list[str] = []

    class Watched(LocalConversations):
        async def checkout(self, key: str, api: str) -> Any:
            held = await super().checkout(key, api)
            finish = held.finish

            async def finished() -> None:
                released.append(key)
                await finish()

            held.finish = finished  # type: ignore[method-assign]
            return held

    compactor = LiteLLMCompactor(
        HookSettings(), conversations=Watched(store), ledger=UsageLedger(None)
    )
    body = claude_code_request(6, thinking=False)
    data = litellm_data(body, "call-1")

    async def scenario() -> None:
        await compactor.prepare(data, "anthropic_messages")
        await compactor.aclose()

    run(scenario())
    assert len(released) == 1 and compactor.failures == 1
    assert {k: v for k, v in data.items() if k in body} == body  # sent as it came
    (record,) = store.conversations()
    assert record.last_code == "gateway_error"
