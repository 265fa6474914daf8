"""``deploy/``: the compose file hangs together, and its nginx config, run for real by Debian's
nginx on loopback, spreads one conversation over three gateway processes that share Redis."""

from __future__ import annotations

import re

import httpx2
import yaml

from fake_providers import FakeProvider
from team_gateways import NGINX_CONF, ROOT, nginx_in_front, team_gateways

COMPOSE = ROOT / "deploy" / "compose.yaml"


def test_the_compose_file_runs_three_gateways_on_valkey_behind_nginx():
    compose = yaml.safe_load(COMPOSE.read_text("utf-8"))
    services = compose["services"]
    gateways = sorted(name for name in services if name.startswith("gateway-"))
    assert gateways == ["gateway-1", "gateway-2", "gateway-3"]
    for name in gateways:
        service = services[name]
        assert service["build"] == {"context": "..", "dockerfile": "Dockerfile"}
        assert service["environment"]["TOMC_SESSION_STORE"] == "redis://valkey:6379/0"
        assert "TOMC_STATUS_TOKEN" in service["environment"]
        command = service["command"]
        assert command[command.index("--host") + 1] == "0.0.0.0"
        assert "--allow-host" in command
    assert services["valkey"]["image"].startswith("valkey/valkey:")
    nginx = services["nginx"]
    assert nginx["image"].startswith("nginx:")
    mounted = [v.split(":")[0] for v in nginx["volumes"]]
    assert mounted == ["./nginx.conf"] and (COMPOSE.parent / "nginx.conf").is_file()
    upstreams = re.findall(r"server (gateway-\d):8787", NGINX_CONF.read_text("utf-8"))
    assert upstreams == gateways
    assert (ROOT / "Dockerfile").is_file()
    dockerfile = (ROOT / "Dockerfile").read_text("utf-8")
    assert "USER tomc" in dockerfile and "'.[team,bpe]'" in dockerfile


def _conversation(http: httpx2.Client, base: str, name: str, count: int = 12) -> list[int]:
    """``count`` requests of one chat conversation (Codex's ``session_id`` header names it);
    their statuses."""
    messages = [{"role": "system", "content": "You are a coding agent."}]
    statuses = []
    for turn in range(count):
        messages.append({"role": "user", "content": f"{name} step {turn}: run the tests"})
        body = {"model": "gpt-4o", "messages": messages, "user": name}
        answer = http.post(
            f"{base}/v1/chat/completions", json=body, headers={"session_id": f"thread-{name}"}
        )
        statuses.append(answer.status_code)
        messages.append({"role": "assistant", "content": f"ran step {turn}"})
    return statuses


def test_nginx_keeps_a_conversation_on_one_gateway(tmp_path, redis_url):
    with FakeProvider() as fake:
        upstreams = {"openai": fake.base_url, "anthropic": fake.anthropic_url}
        with (
            team_gateways(tmp_path, upstreams, redis_url) as gateways,
            nginx_in_front([g.port for g in gateways], tmp_path / "nginx") as base,
            httpx2.Client(trust_env=False, timeout=30) as http,
        ):
            assert _conversation(http, base, "dev-1") == [200] * 12
            answered = sorted(g.status()["this_process"]["requests"] for g in gateways)
    assert answered == [0, 0, 12]  # hashing on the session header: one replica
    assert fake.last.headers["session_id"] == "thread-dev-1"  # underscores pass


def test_nginx_round_robin_spreads_one_conversation_over_three_gateways(tmp_path, redis_url):
    with FakeProvider() as fake:
        upstreams = {"openai": fake.base_url, "anthropic": fake.anthropic_url}
        with (
            team_gateways(tmp_path, upstreams, redis_url) as gateways,
            nginx_in_front([g.port for g in gateways], tmp_path / "nginx", hashing=False) as base,
            httpx2.Client(trust_env=False, timeout=30) as http,
        ):
            assert _conversation(http, base, "dev-42") == [200] * 12
            answered = [g.status()["this_process"]["requests"] for g in gateways]
            summed = gateways[0].status()
    assert answered == [4, 4, 4]  # round robin: every process served the conversation
    assert [r.body["messages"][-1]["content"] for r in fake.requests] == [
        f"dev-42 step {turn}: run the tests" for turn in range(12)
    ]
    (conversation,) = summed["conversations"]
    assert conversation["requests"] == 12 and conversation["decisions"] == {"fits": 12}
    assert summed["requests"] == 12 and summed["session_store"]["available"]
