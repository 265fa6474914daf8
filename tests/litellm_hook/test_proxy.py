"""TOMC inside a real LiteLLM proxy (``litellm --config config.yaml``, pinned, as a process) in
front of the fake provider, driven by the official SDKs: compaction as the gateway does it, on
each route; per-key settings; two proxies sharing a conversation through redis-server; a hook
that fails lets the request through unchanged; usage reaches the ledger."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from dialect_fixtures import chat_agent_request, claude_code_request, codex_request, request_tokens
from fake_providers import FakeProvider
from litellm_server import CLAUDE_MODEL, MASTER_KEY, OPENAI_MODEL, config_text, litellm_proxy
from redis_server import running_redis
from tomc._gateway.proxy.app import Gateway, create_gateway_app
from tomc._gateway.proxy.metering.ledger import read_traffic
from tomc._gateway.settings import GatewaySettings
from tomc._http.server import AppServer
from tomc._litellm.compaction import HookSettings, LiteLLMCompactor

MEMORY = "[TOMC memory"


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


def claude(base: str, key: str = MASTER_KEY) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=key, base_url=base, max_retries=0, timeout=60.0)


def chat_client(base: str) -> openai.OpenAI:
    return openai.OpenAI(api_key=MASTER_KEY, base_url=f"{base}/v1", max_retries=0, timeout=60.0)


def claude_bodies(count: int = 6) -> list[dict[str, Any]]:
    return [claude_code_request(turns, thinking=False) for turns in range(8, 8 + count)]


def target_for(api: str, body: dict[str, Any]) -> int:
    return max(2048, request_tokens(api, body) * 3 // 4)


def received(fake: FakeProvider, start: int, path: str) -> list[Any]:
    return [r.body for r in fake.requests[start:] if r.path.endswith(path)]


def through_gateway(fake: FakeProvider, bodies: list[dict[str, Any]], target: int) -> list[Any]:
    """What the provider got for ``bodies`` sent through ``tomc gateway``'s app."""
    settings = GatewaySettings(
        upstreams={"anthropic": fake.anthropic_url, "openai": fake.base_url},
        context_target=target,
    )
    gateway = Gateway(settings, timeout=httpx2.Timeout(30.0))
    app = create_gateway_app(settings, gateway=gateway)
    start = len(fake.requests)
    with AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server:
        client = claude(server.url.rstrip("/"))
        for body in bodies:
            client.messages.create(**body)
    return received(fake, start, "/v1/messages")


SPEND_PROBE = """
import json
from litellm.integrations.custom_logger import CustomLogger


class Probe(CustomLogger):
    async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
        metadata = kwargs["standard_logging_object"]["metadata"]
        with open("spend_logs_metadata.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps(metadata.get("spend_logs_metadata")) + "\\n")


probe = Probe()
"""


def test_a_long_claude_conversation_is_compacted_as_the_gateway_does(fake, tmp_path):
    bodies = claude_bodies()
    target = target_for("messages", bodies[0])
    env = {"TOMC_CONTEXT_TARGET": str(target)}
    start = len(fake.requests)
    # A second callback reads what LiteLLM hands its loggers and keeps in its spend logs.
    config = config_text(fake.root_url, '["tomc.litellm.hook", "spend_probe.probe"]')
    files = {"spend_probe.py": SPEND_PROBE}
    with litellm_proxy(tmp_path / "proxy", config, env, files=files) as base:
        client = claude(base)
        answers = [client.messages.create(**body) for body in bodies]
    via_litellm = received(fake, start, "/v1/messages")
    assert len(via_litellm) == len(bodies) and all(a.content for a in answers)
    assert all(MEMORY in json.dumps(sent["messages"]) for sent in via_litellm)
    assert all(request_tokens("messages", sent) <= target for sent in via_litellm)
    via_gateway = through_gateway(fake, bodies, target)
    assert [sent["messages"] for sent in via_litellm] == [s["messages"] for s in via_gateway]
    logged = (tmp_path / "proxy" / "spend_logs_metadata.jsonl").read_text().splitlines()
    decisions = [json.loads(line)["tomc"]["decision"] for line in logged]
    assert len(decisions) == len(bodies) and set(decisions) <= {"compiled", "reused"}
    # Usage reached the ledger, with TOMC's decision beside the provider's figures.
    traffic = read_traffic(tmp_path / "proxy" / "tomc-home")
    assert traffic is not None and traffic["totals"]["requests"] == len(bodies)


def test_chat_completions_and_responses_are_compacted_too(fake, tmp_path):
    chat_body = {**chat_agent_request(turns=14), "model": OPENAI_MODEL}
    codex_body = {**codex_request(turns=12), "model": OPENAI_MODEL}
    for name in ("reasoning", "include"):  # gpt-4o takes no reasoning settings
        codex_body.pop(name)
    target = min(target_for("chat", chat_body), target_for("responses", codex_body))
    env = {"TOMC_CONTEXT_TARGET": str(target)}
    start = len(fake.requests)
    with litellm_proxy(tmp_path / "proxy", config_text(fake.root_url), env) as base:
        client = chat_client(base)
        client.chat.completions.create(**chat_body)
        client.responses.create(**codex_body)
    chat = received(fake, start, "/chat/completions")
    responses = received(fake, start, "/responses")
    assert len(chat) == 1 and MEMORY in json.dumps(chat[0]["messages"])
    assert request_tokens("chat", chat[0]) <= target
    assert len(responses) == 1 and MEMORY in json.dumps(responses[0]["input"])
    assert request_tokens("responses", responses[0]) <= target


FAILING_HOOK = """
from tomc.litellm import TomcHook


async def _boom(*args, **kwargs):
    raise RuntimeError("a bug in the hook")


hook = TomcHook()
hook.compactor._prepare = _boom
"""


def test_a_failing_hook_lets_the_request_through_unchanged(fake, tmp_path):
    bodies = claude_bodies(2)
    env = {"TOMC_CONTEXT_TARGET": str(target_for("messages", bodies[0]))}
    sent: dict[str, list[Any]] = {}
    for name, callbacks, files in (
        ("alone", None, {}),
        ("failing", "failing_hook.hook", {"failing_hook.py": FAILING_HOOK}),
    ):
        start = len(fake.requests)
        config = config_text(fake.root_url, callbacks)
        with litellm_proxy(tmp_path / name, config, env, files=files) as base:
            client = claude(base)
            for body in bodies:
                assert client.messages.create(**body).content
        sent[name] = received(fake, start, "/v1/messages")
    assert sent["failing"] == sent["alone"]
    assert MEMORY not in json.dumps(sent["failing"])
    log = (tmp_path / "failing" / "litellm.log").read_text(errors="replace")
    assert "TOMC failed (RuntimeError: a bug in the hook)" in log  # it ran, and failed open


CUSTOM_AUTH = """
from litellm.proxy._types import UserAPIKeyAuth

SETTINGS = {"sk-off": ({"tomc": {"context_target": "off"}}, {}),
            "sk-team": ({}, {"tomc": {"context_target": TARGET}})}


async def user_api_key_auth(request, api_key):
    key_metadata, team_metadata = SETTINGS.get(api_key, ({}, {}))
    return UserAPIKeyAuth(api_key=api_key, metadata=key_metadata, team_metadata=team_metadata)
"""


def test_a_key_or_team_setting_wins_over_the_hook_default(fake, tmp_path):
    bodies = claude_bodies(2)
    target = target_for("messages", bodies[0])
    env = {"TOMC_CONTEXT_TARGET": str(target)}
    config = config_text(fake.root_url, general="  custom_auth: custom_auth.user_api_key_auth")
    files = {"custom_auth.py": CUSTOM_AUTH.replace("TARGET", str(target))}
    sent: dict[str, list[Any]] = {}
    with litellm_proxy(tmp_path / "proxy", config, env, files=files) as base:
        for key in ("sk-off", "sk-team"):
            start = len(fake.requests)
            client = claude(base, key)
            for body in bodies:
                client.messages.create(**body)
            sent[key] = received(fake, start, "/v1/messages")
    assert MEMORY not in json.dumps(sent["sk-off"])  # "off" for that key
    assert all(MEMORY in json.dumps(s["messages"]) for s in sent["sk-team"])


def test_two_proxies_share_a_conversation_through_redis(fake, tmp_path):
    bodies = claude_bodies(4)
    target = target_for("messages", bodies[0])
    with contextmanager(running_redis)(tmp_path / "redis") as redis:
        env = {"TOMC_CONTEXT_TARGET": str(target), "TOMC_SESSION_STORE": redis.url}
        config = config_text(fake.root_url)
        with (
            litellm_proxy(tmp_path / "one", config, env) as one,
            litellm_proxy(tmp_path / "two", config, env) as two,
        ):
            for index, body in enumerate(bodies):  # alternately through each proxy
                claude(one if index % 2 == 0 else two).messages.create(**body)

        async def shared_status() -> dict[str, Any]:
            compactor = LiteLLMCompactor(HookSettings(session_store=redis.url))
            try:
                return await compactor.status()
            finally:
                await compactor.aclose()

        status = asyncio.run(shared_status())
    (conversation,) = status["conversations"]
    assert conversation["requests"] == len(bodies)
    assert status["traffic"]["totals"]["requests"] == len(bodies)
    # The second proxy reused the memory the first one built: one rebuild in all.
    assert conversation["decisions"].get("reused", 0) >= 1, conversation


def test_the_hook_runs_on_a_stock_litellm_process(fake, tmp_path):
    """The documented lines, nothing else: ``callbacks: tomc.litellm.hook``."""
    config = config_text(fake.root_url)
    assert "callbacks: tomc.litellm.hook" in config
    with litellm_proxy(tmp_path / "proxy", config) as base:
        answer = claude(base).messages.create(
            model=CLAUDE_MODEL, max_tokens=16, messages=[{"role": "user", "content": "hi"}]
        )
        assert answer.content
    log = (tmp_path / "proxy" / "litellm.log").read_text(errors="replace")
    assert "Traceback" not in log


def test_a_server_compaction_edit_is_never_reached_through_the_proxy(fake, tmp_path):
    """With ``compact_20260112`` at 50,000 tokens, LiteLLM and the provider find the request
    already under it: one request upstream, no summary call, the edit kept."""
    edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 50_000}}
    body = claude_code_request(45, thinking=False)
    assert request_tokens("messages", body) > 50_000
    start = len(fake.requests)
    with litellm_proxy(tmp_path / "proxy", config_text(fake.root_url)) as base:
        claude(base).messages.create(**body, extra_body={"context_management": {"edits": [edit]}})
    (sent,) = received(fake, start, "/v1/messages")
    assert sent["context_management"] == {"edits": [edit]}
    assert request_tokens("messages", sent) <= 47_500
