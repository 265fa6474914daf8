"""The providers' own context management through the gateway, one test per mechanism: what the
provider receives keeps every field the agent sent, stays under the size at which the provider
would compact or clear, keeps compaction items byte-identical, and an agent's own compaction
request goes out as it came."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from dialect_fixtures import claude_code_request, codex_request, request_tokens
from fake_providers import FakeProvider
from gateway_helpers import serve_gateway
from tomc.chat.dialects._provider_context import CEILING_SHARE

TRIGGER = 50_000
CEILING = int(TRIGGER * CEILING_SHARE)


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@pytest.fixture
def base(fake: FakeProvider) -> Iterator[str]:
    with serve_gateway(fake.root_url) as (server, _):
        yield server.url.rstrip("/")


def claude_body(edit: dict[str, Any] | None) -> dict[str, Any]:
    body = claude_code_request(45, thinking=edit is not None and "thinking" in edit["type"])
    if edit is not None:
        body["context_management"] = {"edits": [edit]}
    return body


def send_claude(base: str, body: dict[str, Any]) -> None:
    client = anthropic.Anthropic(api_key="sk-ant", base_url=base, max_retries=0, timeout=30.0)
    fields = {k: v for k, v in body.items() if k != "context_management"}
    extra = {k: v for k, v in body.items() if k == "context_management"}
    client.messages.create(**fields, extra_body=extra)


@pytest.mark.parametrize(
    "edit",
    [
        {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": TRIGGER}},
        {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": TRIGGER}},
    ],
    ids=["compact_20260112", "clear_tool_uses_20250919"],
)
def test_a_claude_request_stays_under_the_edits_trigger(fake, base, edit):
    body = claude_body(edit)
    assert request_tokens("messages", body) > TRIGGER
    send_claude(base, body)
    sent = fake.last.body
    assert sent["context_management"] == body["context_management"]
    assert request_tokens("messages", sent) <= CEILING
    assert "[TOMC memory" in json.dumps(sent["messages"])


def test_clearing_thinking_is_left_to_the_provider(fake, base):
    edit = {"type": "clear_thinking_20251015", "keep": "all"}
    body = claude_body(edit)
    send_claude(base, body)
    sent = fake.last.body
    assert sent["context_management"] == body["context_management"]
    # Under the model's window, no ceiling: TOMC has no reason to rewrite this request.
    assert sent["messages"] == body["messages"]


def test_a_claude_compaction_block_reaches_the_provider_byte_identical(fake, base):
    edit = {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": TRIGGER}}
    body = claude_body(edit)
    messages = body["messages"]
    at = next(
        i
        for i, m in enumerate(messages)
        if i > 4 and m["role"] == "assistant" and "tool_use" not in str(m["content"])
    )
    summary = {"type": "compaction", "content": "Summary: retries capped at 5 in retry.py."}
    content = messages[at]["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
    messages[at] = {"role": "assistant", "content": [summary, *blocks]}
    send_claude(base, body)
    sent = fake.last
    assert json.dumps(messages[at], separators=(",", ":")).encode() in sent.raw
    assert sent.body["messages"][: at + 1] == messages[: at + 1]
    assert request_tokens("messages", sent.body) <= CEILING


def responses_client(base: str) -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url=f"{base}/v1", max_retries=0, timeout=30.0)


def test_a_responses_request_stays_under_its_compaction_threshold(fake, base):
    body = codex_request(40)
    management = [{"type": "compaction", "compact_threshold": TRIGGER}]
    responses_client(base).responses.create(
        **body, extra_body={"context_management": management, "truncation": "auto"}
    )
    sent = fake.last.body
    assert sent["context_management"] == management and sent["truncation"] == "auto"
    assert request_tokens("responses", sent) <= CEILING


def test_truncation_alone_changes_nothing_tomc_does(fake, base):
    body = codex_request(12)
    responses_client(base).responses.create(**body, extra_body={"truncation": "auto"})
    sent = fake.last.body
    assert sent["truncation"] == "auto" and sent["input"] == body["input"]


@pytest.mark.parametrize("path", ["/v1/responses", "/v1/responses/compact"])
def test_an_agents_own_compaction_goes_out_byte_identical(fake, base, path):
    body = codex_request(40)
    if path == "/v1/responses":
        body["input"] = [*body["input"], {"type": "compaction_trigger"}]
    raw = json.dumps(body, separators=(",", ":")).encode()
    headers = {"content-type": "application/json", "authorization": "Bearer sk-test"}
    answer = httpx2.post(f"{base}{path}", content=raw, headers=headers, timeout=30.0)
    assert answer.status_code == 200
    assert fake.last.path == path and fake.last.raw == raw
