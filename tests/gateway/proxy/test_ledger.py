"""The usage ledger: figures of what went through the gateway, kept across restarts.

Unit tests on :class:`UsageLedger` itself, then the gateway over real loopback HTTP with the
official SDKs against the fake provider: usage in three formats, streamed or not, upstream
errors, a restart, a ledger that cannot be written, and ``tomc run`` followed by
``tomc gateway status`` once the gateway has stopped.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest

from dialect_fixtures import chat_agent_request, claude_code_request, codex_request, request_tokens
from fake_providers import BINDING_BETA, FakeProvider, ProviderError, Reply, Usage
from gateway_helpers import free_port, isolated_env, make_fake_agent, stop_leftover_gateway
from gateway_helpers import ledger_entry as entry
from tomc._gateway.local.status import gateway_status
from tomc._gateway.proxy.app import Gateway, create_gateway_app
from tomc._gateway.proxy.metering.ledger import LedgerEntry, UsageLedger, ledger_path, read_traffic
from tomc._gateway.proxy.metering.usage import ANTHROPIC, OPENAI, ProviderUsage
from tomc._gateway.settings import GatewaySettings, save_settings
from tomc._http.server import AppServer
from tomc.chat import AutomaticChatSession

SECRET = "sk-ant-ledger-secret-77"
OPENAI_SECRET = "sk-openai-ledger-secret-77"


# ---------------------------------------------------------------------- the ledger alone


def test_figures_add_up_and_the_direct_estimate_follows_the_conversation(tmp_path):
    ledger = UsageLedger(ledger_path(tmp_path))
    ledger.record(entry())  # 1,000 tokens written to the cache: billed 1,250
    # Rewritten: 4,000 -> 2,000 by TOMC's count; the provider saw 2,000 (1,000 read back).
    usage = ProviderUsage(ANTHROPIC, 2000, cache_read_tokens=1000, cache_write_tokens=1000)
    ledger.record(
        entry(at=1_800_000_060.0, action="compiled", code="compiled", tokens_before=4000,
              tokens_after=2000, usage=usage)
    )  # fmt: skip
    ledger.record(entry(api="", conversation="", status=404, usage=None))  # e.g. a bad path
    ledger.record(entry(status=429, usage=None, action=None, code=None, tokens_before=0,
                        tokens_after=0, at=1_800_000_090.0))  # fmt: skip
    assert ledger.flush(5)
    traffic = ledger.traffic()
    totals = traffic["totals"]
    assert totals["requests"] == 3 and totals["rewritten"] == 1
    assert totals["conversations"] == 1
    assert totals["requests_with_usage"] == 2
    assert (totals["tomc_tokens_before"], totals["tomc_tokens_after"]) == (5000, 3000)
    assert (totals["prompt_tokens"], totals["cache_read_tokens"]) == (3000, 1000)
    assert totals["cache_write_tokens"] == 2000
    billed = 1250 + (0.1 * 1000 + 1.25 * 1000)
    # Direct: the first cost what it cost; the second was 2,000 x 4,000 / 2,000 = 4,000
    # tokens, 1,000 of them cached 60 s earlier (read at 0.1), 3,000 written (1.25).
    direct = 1250 + (0.1 * 1000 + 1.25 * 3000)
    assert totals["billed_input"] == pytest.approx(billed)
    assert totals["direct_input"] == pytest.approx(direct)
    assert totals["billed_saved"] == pytest.approx(direct - billed)
    assert totals["upstream_errors"] == {"404": 1, "429": 1}
    (conversation,) = traffic["conversations"]
    assert conversation["upstream_errors"] == {"429": 1}
    assert conversation["context_target"] is None
    assert traffic["series"][-1]["direct_input"] == pytest.approx(direct)
    assert traffic["persistent"] and traffic["ledger"] == str(ledger_path(tmp_path))
    ledger.close()


def test_the_file_is_private_and_survives_a_new_ledger(tmp_path):
    ledger = UsageLedger(ledger_path(tmp_path))
    ledger.record(entry())
    ledger.close()
    path = ledger_path(tmp_path)
    if sys.platform != "win32":  # POSIX file modes
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = UsageLedger(path)
    again.record(entry(at=1_800_000_100.0))
    assert again.flush(5)
    assert again.traffic()["totals"]["requests"] == 2
    assert read_traffic(tmp_path)["totals"]["requests"] == 2  # read while it is open
    again.close()
    assert read_traffic(tmp_path)["totals"]["requests"] == 2
    assert read_traffic(tmp_path / "elsewhere") is None


def test_an_unusable_file_leaves_the_ledger_in_memory(tmp_path, caplog):
    blocker = tmp_path / "home"
    blocker.write_text("a file where the gateway folder should be")
    ledger = UsageLedger(ledger_path(blocker))
    assert not ledger.persistent and ledger.problem
    ledger.record(entry())
    assert ledger.flush(5)
    assert ledger.traffic()["totals"]["requests"] == 1
    assert ledger.traffic()["ledger"] is None
    corrupt = ledger_path(tmp_path / "corrupt")
    corrupt.parent.mkdir(parents=True)
    corrupt.write_bytes(b"not a database" * 100)
    assert not UsageLedger(corrupt).persistent
    assert "usage ledger" in caplog.text


def test_a_failing_write_is_logged_and_dropped(tmp_path, monkeypatch, caplog):
    ledger = UsageLedger(ledger_path(tmp_path))

    def explode(*args: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("tomc._gateway.proxy.metering.ledger._store", explode)
    ledger.record(entry())
    assert ledger.flush(5)
    assert ledger.dropped == 1 and "disk full" in caplog.text
    monkeypatch.undo()
    ledger.record(entry())
    assert ledger.flush(5)
    assert ledger.traffic()["totals"]["requests"] == 1


# ---------------------------------------------------------------------- through the gateway


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    with FakeProvider() as provider:
        yield provider


@contextmanager
def gateway_on(
    fake: FakeProvider, home: Path | None, **options: Any
) -> Iterator[tuple[str, Gateway]]:
    settings = GatewaySettings(
        upstreams={
            "anthropic": fake.anthropic_url,
            "openai": fake.base_url,
            "chatgpt": fake.chatgpt_url,
        },
        context_target=options.pop("context_target", None),
    )
    gateway = Gateway(settings, timeout=httpx2.Timeout(10.0, read=5.0), home=home, **options)
    app = create_gateway_app(settings, gateway=gateway)
    with AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server:
        yield server.url.rstrip("/"), gateway


def claude(base: str, **headers: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=SECRET,
        base_url=base,
        max_retries=0,
        timeout=30.0,
        http_client=httpx2.Client(trust_env=False),
        default_headers={"x-claude-code-session-id": "ledger-session", **headers},
    )


def gpt(base: str) -> openai.OpenAI:
    return openai.OpenAI(
        api_key=OPENAI_SECRET,
        base_url=f"{base}/v1",
        max_retries=0,
        http_client=httpx2.Client(trust_env=False),
    )


def status_json(base: str, requests: int = 0, errors: int = 0) -> dict[str, Any]:
    """``/status.json`` once the ledger holds ``requests`` requests and ``errors`` errors (a
    request is recorded just after its last byte went out, so a fast client can ask first)."""
    with httpx2.Client(trust_env=False) as http:
        deadline = time.monotonic() + 10
        while True:
            status = http.get(f"{base}/status.json").json()
            totals = (status["traffic"] or {}).get("totals")
            done = totals is None or (
                totals["requests"] >= requests and totals["upstream_error_count"] >= errors
            )
            if done or time.monotonic() > deadline:
                return status
            time.sleep(0.02)


def test_usage_of_all_three_formats_is_kept_across_a_restart(fake, tmp_path):
    fake.configure(usage=Usage(input_tokens=900, cache_write_tokens=100, cache_read_tokens=9000))
    body = claude_code_request(2, thinking=False)
    codex = codex_request(3, stream=True)
    chat = chat_agent_request(4)
    with gateway_on(fake, tmp_path) as (base, _):
        list(claude(base).messages.create(**body, stream=True))
        claude(base).messages.create(**body)
        list(gpt(base).responses.create(**codex))
        gpt(base).responses.create(**{**codex, "stream": False})
        gpt(base).chat.completions.create(**chat)
        stream = gpt(base).chat.completions.create(
            **chat, stream=True, stream_options={"include_usage": True}
        )
        list(stream)
        before = status_json(base, 6)["traffic"]
    assert before["totals"]["requests"] == 6
    assert before["totals"]["requests_with_usage"] == 6
    assert before["totals"]["prompt_tokens"] == 6 * 10_000
    by_api = {c["api"]: c for c in before["conversations"]}
    assert set(by_api) == {"messages", "responses", "chat"}
    anthropic_billed = 900 + 1.25 * 100 + 0.1 * 9000
    openai_billed = 1000 + 0.1 * 9000
    assert by_api["messages"]["billed_input"] == pytest.approx(2 * anthropic_billed)
    assert by_api["responses"]["billed_input"] == pytest.approx(2 * openai_billed)
    assert by_api["chat"]["billed_input"] == pytest.approx(2 * openai_billed)
    assert by_api["messages"]["cache_write_tokens"] == 200
    assert by_api["responses"]["output_tokens"] == 2 * Usage().output_tokens
    # Nothing was rewritten: direct is exactly what was billed.
    assert before["totals"]["direct_input"] == before["totals"]["billed_input"]

    with gateway_on(fake, tmp_path) as (base, gateway):
        after = status_json(base)["traffic"]
        assert gateway.status()["conversations"] == []  # live sessions start afresh
        claude(base).messages.create(**body)
        again = status_json(base, 7)["traffic"]
    assert after["totals"] == before["totals"]
    assert after["ledger"] == str(tmp_path / "gateway" / "usage.sqlite3")
    assert again["totals"]["requests"] == 7
    cli = gateway_status(home=tmp_path, environ={"HOME": str(tmp_path)})
    assert cli.traffic is not None and cli.traffic["totals"]["requests"] == 7
    assert "traffic (since" in cli.to_text()
    assert "7 requests in 3 conversations" in cli.to_text()
    assert cli.to_dict()["traffic"]["totals"]["billed_input"] == again["totals"]["billed_input"]


def test_a_model_with_cache_prices_of_its_own_is_billed_at_them(fake):
    """Claude Opus 5.5 reads its cache at 0.05x, DeepSeek's deepseek-flash at 0.02x: the ledger,
    the live conversation and the total bill each at its model's prices."""
    fake.configure(usage=Usage(input_tokens=900, cache_write_tokens=100, cache_read_tokens=9000))
    body = {**claude_code_request(2, thinking=False), "model": "claude-opus-5-5"}
    chat = {**chat_agent_request(4), "model": "deepseek-flash"}
    with gateway_on(fake, None) as (base, gateway):
        claude(base).messages.create(**body)
        gpt(base).chat.completions.create(**chat)
        status = status_json(base, 2)
        live = {c["api"]: c["last_request"] for c in gateway.status()["conversations"]}
    by_api = {c["api"]: c for c in status["traffic"]["conversations"]}
    opus, deepseek = 900 + 1.25 * 100 + 0.05 * 9000, 1000 + 0.02 * 9000
    assert by_api["messages"]["billed_input"] == pytest.approx(opus)
    assert by_api["chat"]["billed_input"] == pytest.approx(deepseek)
    assert status["traffic"]["totals"]["billed_input"] == pytest.approx(opus + deepseek)
    assert live["messages"]["provider"]["billed_input"] == pytest.approx(opus, abs=0.1)
    assert live["chat"]["provider"]["billed_input"] == pytest.approx(deepseek, abs=0.1)


def test_rewritten_requests_are_counted_and_estimated_direct(fake):
    body = chat_agent_request(14)
    limit = int(request_tokens("chat", body) * 0.6)
    # The rewritten prefix is cached from the second request on, as the provider would do.
    fake.script(
        Reply(usage=Usage(input_tokens=1234)),
        Reply(usage=Usage(input_tokens=34, cache_read_tokens=1200)),
    )
    with gateway_on(fake, None, context_target=limit) as (base, _):
        gpt(base).chat.completions.create(**body)
        gpt(base).chat.completions.create(**body)
        status = status_json(base, 2)
    (conversation,) = status["traffic"]["conversations"]
    assert conversation["requests"] == 2 and conversation["rewritten"] == 2
    before, after = conversation["tomc_tokens_before"], conversation["tomc_tokens_after"]
    assert before > after
    assert conversation["billed_input"] == pytest.approx(1234 + 34 + 0.1 * 1200)
    # Direct: each prompt scaled by TOMC's before/after; the second finds the first cached.
    ratio = before / after  # the same for both requests (the frozen memory is reused)
    cached = (1234 * ratio) // 128 * 128
    expected = 1234 * ratio + (1234 * ratio - cached) + 0.1 * cached
    assert conversation["direct_input"] == pytest.approx(expected, abs=0.2)
    assert conversation["direct_input"] > conversation["billed_input"]
    assert status["traffic"]["persistent"] is False  # no home: in memory only
    assert status["conversations"][0]["context_target"] == limit
    assert conversation["context_target"] == limit


def test_upstream_errors_are_counted_by_status(fake):
    body = claude_code_request(2, thinking=False)
    with gateway_on(fake, None) as (base, _):
        fake.configure(error=ProviderError(429, "Slow down", "rate_limit_error"))
        for _ in range(2):
            with pytest.raises(anthropic.RateLimitError):
                claude(base).messages.create(**body)
        fake.configure(error=ProviderError(529, "Overloaded", "overloaded_error"))
        with pytest.raises(anthropic.APIStatusError):
            claude(base).messages.create(**body)
        fake.configure(error=ProviderError(400, "bad"))
        with pytest.raises(anthropic.BadRequestError):
            claude(base).messages.count_tokens(model=body["model"], messages=body["messages"])
        fake.configure(error=None)
        claude(base).messages.create(**body)
        traffic = status_json(base, 4, 4)["traffic"]
    assert traffic["totals"]["upstream_errors"] == {"400": 1, "429": 2, "529": 1}
    assert traffic["totals"]["upstream_error_count"] == 4
    (conversation,) = traffic["conversations"]
    assert conversation["upstream_errors"] == {"429": 2, "529": 1}  # count_tokens: no session
    assert conversation["requests"] == 4 and conversation["requests_with_usage"] == 1


def test_dropped_thinking_blocks_are_counted(fake):
    dropped = {"type": "thinking_dropped", "path": "messages.1.content.0", "reason": "x"}
    fake.configure(input_transformations=(dropped, dropped))
    body = claude_code_request(2, thinking=False)
    with gateway_on(fake, None) as (base, _):
        client = claude(base, **{"anthropic-beta": BINDING_BETA})
        list(client.messages.create(**body, stream=True))
        client.messages.create(**body)
        claude(base).messages.create(**body)  # without the beta nothing is reported
        traffic = status_json(base, 3)["traffic"]
    assert traffic["totals"]["thinking_dropped"] == 4


class BrokenLedger(UsageLedger):
    def record(self, entry: LedgerEntry) -> None:
        raise RuntimeError("ledger on fire")

    def traffic(self, *, limit: int = 20) -> dict[str, Any]:
        raise RuntimeError("ledger on fire")


def test_a_broken_ledger_never_fails_a_request(fake, tmp_path, caplog):
    body = claude_code_request(2, thinking=False)
    with gateway_on(fake, None, ledger=BrokenLedger()) as (base, _):
        answer = claude(base).messages.create(**body)
        streamed = list(claude(base).messages.create(**body, stream=True))
        status = status_json(base)
        with httpx2.Client(trust_env=False) as http:
            page = http.get(f"{base}/status")
    assert answer.content and streamed[-1].type == "message_stop"
    assert status["traffic"] is None and status["conversations"][0]["requests"] == 2
    assert page.status_code == 200 and "could not be read" in page.text
    assert "ledger on fire" in caplog.text
    # A home whose gateway folder cannot be created: the gateway serves from memory.
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("x")
    with gateway_on(fake, blocker) as (base, _):
        claude(base).messages.create(**body)
        traffic = status_json(base, 1)["traffic"]
    assert traffic["persistent"] is False and traffic["totals"]["requests"] == 1


# ---------------------------------------------------------------------- tomc run, then status


def test_figures_of_a_tomc_run_gateway_remain_after_it_stops(fake, tmp_path):
    env = isolated_env(tmp_path)
    bin_dir = tmp_path / "bin"
    make_fake_agent(bin_dir, "claude")
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["FAKE_AGENT_DIR"] = str(tmp_path / "records")
    env["FAKE_AGENT_MESSAGE"] = "a question nobody should see in the status"
    (tmp_path / "records").mkdir()
    home = Path(env["TOMC_HOME"])
    save_settings(GatewaySettings(upstreams={"anthropic": fake.anthropic_url}), home)
    port = free_port()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tomc", "run", "--port", str(port), "claude"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        stop_leftover_gateway(home)
    assert done.returncode == 0, done.stderr
    assert "stopped the TOMC gateway" in done.stderr
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "records").glob("*.json")]
    assert record["message_status"] == 200
    shown = subprocess.run(
        [sys.executable, "-m", "tomc", "gateway", "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    traffic = json.loads(shown.stdout)["traffic"]
    assert traffic["totals"]["requests"] == 1
    assert traffic["totals"]["billed_input"] == Usage().input_tokens
    text = subprocess.run(
        [sys.executable, "-m", "tomc", "gateway", "status"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert "1 requests in 1 conversations" in text
    assert env["FAKE_AGENT_MESSAGE"] not in shown.stdout + text
    assert "sk-fake-agent" not in shown.stdout + text


def test_openai_usage_billing_constant_matches():
    assert ProviderUsage(OPENAI, 2048, cache_read_tokens=1024).billed_input == 1024 + 102.4


# ---------------------------------------------------------------------- the gateway's own errors


@contextmanager
def gateway_to_nowhere(home: Path) -> Iterator[tuple[str, Gateway, str]]:
    """A gateway (with a usage ledger in ``home``) whose upstreams are a port nobody listens
    on; yields its base URL, the gateway and that upstream."""
    upstream = f"http://127.0.0.1:{free_port()}"
    settings = GatewaySettings(upstreams={"anthropic": upstream, "openai": f"{upstream}/v1"})
    gateway = Gateway(settings, home=home)
    app = create_gateway_app(settings, gateway=gateway)
    with AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server:
        yield server.url.rstrip("/"), gateway, upstream


def test_the_gateways_own_502s_are_counted_per_conversation_and_in_total(tmp_path):
    body = claude_code_request(2, thinking=False)
    with gateway_to_nowhere(tmp_path) as (base, _, upstream):
        for _ in range(2):
            with pytest.raises(anthropic.InternalServerError) as raised:
                claude(base).messages.create(**body)
        with pytest.raises(openai.InternalServerError):
            gpt(base).models.list()  # a path only forwarded: no conversation
        status = status_json(base)
        page = " ".join(httpx2.get(f"{base}/status", timeout=30).text.split())
    assert raised.value.status_code == 502
    assert f"{upstream}/v1/messages" in raised.value.body["error"]["message"]
    traffic = status["traffic"]
    totals = traffic["totals"]
    assert (totals["gateway_errors"], totals["gateway_error_kinds"]) == (3, {"unreachable": 3})
    assert totals["upstream_error_count"] == 0  # the upstream never answered
    assert (totals["requests"], totals["conversations"]) == (2, 1)
    (conversation,) = traffic["conversations"]
    assert conversation["conversation"].startswith("claude:ledger-session|")
    assert conversation["gateway_errors"] == 2
    assert conversation["gateway_error_kinds"] == {"unreachable": 2}
    assert conversation["requests"] == 2 and conversation["tomc_tokens_after"] == 0  # none sent
    (live,) = status["conversations"]
    assert live["conversation"] == conversation["conversation"] and live["gateway_errors"] == 2
    # The page says the same, in total and on the conversation's row.
    assert "Gateway errors: 3 (unreachable ×3)." in page
    assert 'data-label="gateway errors"><span class="v">2<' in page
    # What `tomc gateway status` reads once the gateway has stopped.
    kept = read_traffic(tmp_path)
    assert kept is not None and kept["totals"]["gateway_errors"] == 3
    assert kept["conversations"][0]["gateway_errors"] == 2


def test_a_failure_inside_tomc_is_a_gateway_error_of_its_conversation(fake, monkeypatch):
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("session bug")

    monkeypatch.setattr(AutomaticChatSession, "prepare_request", explode)
    body = claude_code_request(2, thinking=False)
    with gateway_on(fake, None) as (base, _):
        answer = claude(base).messages.create(**body)  # sent unchanged, answered upstream
        status = status_json(base, 1)
    assert answer.content
    totals = status["traffic"]["totals"]
    assert totals["gateway_error_kinds"] == {"tomc_failed": 1} and totals["requests"] == 1
    (conversation,) = status["traffic"]["conversations"]
    assert conversation["gateway_errors"] == 1 and conversation["requests_with_usage"] == 1
    assert status["conversations"][0]["gateway_errors"] == 1


def test_a_body_that_is_not_json_goes_out_unchanged_in_no_conversation(fake, tmp_path):
    raw = b'{"model": "claude-opus-4-8", "messages": [ this is not JSON'
    body = claude_code_request(2, thinking=False)
    with (
        gateway_on(fake, tmp_path) as (base, _),
        httpx2.Client(trust_env=False) as http,
    ):
        refused = http.post(
            f"{base}/v1/messages",
            content=raw,
            headers={"x-api-key": SECRET, "content-type": "application/json"},
        )
        claude(base).messages.create(**body)  # one real conversation beside it
        status = status_json(base, 2, 1)
    assert fake.requests[0].raw == raw  # relayed byte for byte
    assert refused.status_code == 400  # the provider's own answer, passed on
    traffic = status["traffic"]
    names = [c["conversation"] for c in traffic["conversations"]]
    assert len(names) == 1 and names[0].startswith("claude:ledger-session|")  # no nameless row
    totals = traffic["totals"]
    assert (totals["conversations"], totals["requests"]) == (1, 2)  # counted in the totals
    assert totals["upstream_errors"] == {"400": 1} and totals["gateway_errors"] == 0
    assert [c["conversation"] for c in status["conversations"]] == names
    kept = read_traffic(tmp_path)
    assert kept is not None and [c["conversation"] for c in kept["conversations"]] == names


def test_a_file_from_before_gateway_errors_were_kept_reads_as_none(tmp_path):
    ledger = UsageLedger(ledger_path(tmp_path))
    ledger.record(entry())
    ledger.close()
    with sqlite3.connect(ledger_path(tmp_path)) as older:  # as an earlier TOMC left it
        older.execute("DROP TABLE gateway_errors")
    kept = read_traffic(tmp_path)  # `tomc gateway status` reads it without writing
    assert kept is not None and kept["totals"]["gateway_errors"] == 0
    assert kept["conversations"][0]["gateway_error_kinds"] == {}
    again = UsageLedger(ledger_path(tmp_path))  # the gateway adds the table when it opens it
    again.record(LedgerEntry.of_gateway_error("messages", entry().conversation, 502, "closed"))
    assert again.flush(5)
    assert again.traffic()["totals"]["gateway_error_kinds"] == {"closed": 1}
    again.close()
