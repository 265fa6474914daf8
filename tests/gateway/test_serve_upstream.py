"""``tomc gateway serve --upstream NAME=URL``: a real gateway process relays to the fake provider
the flag names, over loopback, ahead of the settings file (kind by kind, also after the file
changes); a bad value is refused before anything binds, with an error naming the flag."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import httpx2
import pytest
from click.testing import CliRunner

from fake_providers import FakeProvider
from gateway_helpers import free_port, gateway, isolated_env, wait_for
from tomc._cli import main
from tomc._core.errors import InvalidOptionError
from tomc._gateway.health import probe
from tomc._gateway.settings import GatewaySettings, parse_upstream, with_options

DEAD = "http://127.0.0.1:9"  # the discard port: nothing answers there


def _settings_file(home: Path, upstreams: dict[str, str]) -> Path:
    path = home / "gateway" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"upstreams": upstreams}), encoding="utf-8")
    return path


def test_the_flag_wins_over_the_settings_file_kind_by_kind(tmp_path):
    env = isolated_env(tmp_path)
    home = Path(env["TOMC_HOME"])
    # The file sends OpenAI's and Anthropic's requests nowhere; the flags send them to the fake.
    path = _settings_file(home, {"openai": DEAD, "anthropic": DEAD, "chatgpt": f"{DEAD}/codex"})
    port = free_port()
    with FakeProvider() as fake:
        flags = [
            "--upstream",
            f"openai={fake.base_url}",
            "--upstream",
            f"anthropic={fake.root_url}",
        ]
        with gateway(port, args=flags, env=env, stderr=subprocess.PIPE) as process:
            base = f"http://127.0.0.1:{port}"
            chat = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
            answer = httpx2.post(f"{base}/v1/chat/completions", json=chat, timeout=30)
            assert answer.status_code == 200, answer.text
            assert answer.json()["choices"][0]["message"]["content"] == fake.reply.text
            messages = {**chat, "model": "claude-opus-4-8", "max_tokens": 16}
            headers = {"anthropic-version": "2023-06-01", "x-api-key": "sk-test"}
            answer = httpx2.post(f"{base}/v1/messages", json=messages, headers=headers, timeout=30)
            assert answer.status_code == 200, answer.text
            assert [r.path for r in fake.requests] == ["/v1/chat/completions", "/v1/messages"]
            upstreams = httpx2.get(f"{base}/status.json", timeout=30).json()["upstreams"]
            assert upstreams == {
                "openai": fake.base_url,
                "anthropic": fake.root_url,
                "chatgpt": f"{DEAD}/codex",  # not named by a flag: the file's
            }
            # A change to the file reaches the kinds no flag names, and only those (read again
            # when a request comes, at most once a second).
            time.sleep(1.1)
            _settings_file(home, {"openai": DEAD, "chatgpt": f"{DEAD}/changed"})
            expected = {**upstreams, "chatgpt": f"{DEAD}/changed"}

            def reloaded() -> bool:
                answer = httpx2.post(f"{base}/v1/chat/completions", json=chat, timeout=30)
                assert answer.status_code == 200, answer.text  # still the flag's upstream
                return httpx2.get(f"{base}/status.json").json()["upstreams"] == expected

            wait_for(reloaded)
            assert all(r.path.startswith("/v1/") for r in fake.requests)
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert f"upstreams from --upstream: openai={fake.base_url}" in stderr
    assert path.exists()


@pytest.mark.parametrize(
    "value, message",
    [
        ("openai", "--upstream expects NAME=URL, got 'openai'"),
        ("=http://127.0.0.1:1/v1", "--upstream expects NAME=URL, got '=http://127.0.0.1:1/v1'"),
        ("openai=", "--upstream expects NAME=URL, got 'openai='"),
        (
            "nosuch=http://127.0.0.1:1",
            "unknown NAME 'nosuch'; use one of: anthropic, chatgpt, openai",
        ),
        ("openai=ftp://127.0.0.1/v1", "the URL must be http:// or https:// with a host"),
        ("openai=127.0.0.1:8790/v1", "the URL must be http:// or https:// with a host"),
        ("openai=http:///v1", "the URL must be http:// or https:// with a host"),
    ],
)
def test_a_bad_upstream_is_refused_naming_the_flag(tmp_path, value, message):
    port = free_port()
    result = CliRunner().invoke(
        main,
        ["gateway", "serve", "--port", str(port), "--upstream", value],
        env={"TOMC_HOME": str(tmp_path / "tomc")},
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert not probe(port).answering  # refused before anything bound


def test_parse_upstream_and_with_options():
    assert parse_upstream(" openai = https://llm.example/v1 ") == (
        "openai",
        "https://llm.example/v1",
    )
    with pytest.raises(InvalidOptionError, match="--upstream expects NAME=URL"):
        parse_upstream("https://llm.example/v1")
    saved = GatewaySettings(upstreams={"openai": DEAD, "anthropic": DEAD}, port=9000)
    merged = with_options(saved, {"upstreams": {"openai": "http://127.0.0.1:1/v1"}, "port": 1})
    assert merged.upstream("openai") == "http://127.0.0.1:1/v1"
    assert merged.upstream("anthropic") == DEAD and merged.port == 1
    assert with_options(saved, {}) == saved
