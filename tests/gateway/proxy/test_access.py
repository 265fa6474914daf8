"""A gateway served beyond loopback: only the ``--allow-host`` names, the status page and the
inspector behind the status token, API traffic and ``/healthz`` as before."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from fake_providers import FakeProvider
from tomc._core.errors import InvalidOptionError
from tomc._gateway.proxy.access import STATUS_COOKIE, STATUS_HEADER
from tomc._gateway.proxy.app import create_gateway_app
from tomc._gateway.serving import ServeOptions
from tomc._gateway.settings import GatewaySettings
from tomc._http.server import AppServer, allowed_hosts_for

TOKEN = "status-token-4242"
HOST = "tomc.team.example"


@pytest.fixture
def served() -> Iterator[tuple[str, FakeProvider]]:
    with FakeProvider() as fake:
        settings = GatewaySettings(upstreams={"openai": fake.base_url})
        app = create_gateway_app(
            settings, allowed_hosts=allowed_hosts_for("0.0.0.0", [HOST]), status_token=TOKEN
        )
        with AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server:
            yield server.url.rstrip("/"), fake


def get(base: str, path: str, host: str = HOST, **kwargs) -> httpx2.Response:
    headers = {"host": host, **kwargs.pop("headers", {})}
    return httpx2.get(base + path, headers=headers, trust_env=False, **kwargs)


@pytest.mark.parametrize("path", ["/status", "/status.json", "/", "/api/options"])
def test_status_and_inspector_need_the_token(served, path):
    base, _ = served
    refused = get(base, path)
    assert refused.status_code == 401
    assert "status token" in refused.json()["error"]["message"]
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert get(base, path, headers={STATUS_HEADER: "wrong"}).status_code == 401
    assert get(base, path, headers={STATUS_HEADER: TOKEN}).status_code == 200
    assert get(base, path, headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_opening_the_page_with_the_token_sets_a_cookie_and_drops_it_from_the_url(served):
    base, _ = served
    first = get(base, "/status?token=" + TOKEN + "&x=1", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/status?x=1"
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"{STATUS_COOKIE}={TOKEN};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
    page = get(base, "/status", headers={"cookie": f"{STATUS_COOKIE}={TOKEN}"})
    assert page.status_code == 200 and "TOMC gateway" in page.text
    assert get(base, "/status?token=nope", follow_redirects=False).status_code == 401


def test_api_traffic_and_health_checks_need_no_token(served):
    base, fake = served
    assert get(base, "/healthz").status_code == 200
    body = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}
    answer = httpx2.post(
        base + "/v1/chat/completions",
        json=body,
        headers={"host": HOST, "authorization": "Bearer sk-user-own-key"},
        trust_env=False,
    )
    assert answer.status_code == 200
    assert fake.last.headers["authorization"] == "Bearer sk-user-own-key"


def test_only_the_allowed_host_names_are_answered(served):
    base, fake = served
    assert get(base, "/healthz", host=f"{HOST}:8787").status_code == 200
    assert get(base, "/healthz", host="localhost").status_code == 200
    refused = get(base, "/healthz", host="attacker.example")
    assert refused.status_code == 421 and "attacker.example" in refused.text
    before = len(fake.requests)
    post = httpx2.post(
        base + "/v1/chat/completions",
        json={},
        headers={"host": "attacker.example"},
        trust_env=False,
    )
    assert post.status_code == 421 and len(fake.requests) == before  # never forwarded


def test_loopback_keeps_everything_open_and_needs_no_names():
    options = ServeOptions().checked(lambda: "made")
    assert options.status_token is None and options.loopback


def test_beyond_loopback_needs_names_and_gets_a_token():
    with pytest.raises(InvalidOptionError, match="--allow-host NAME"):
        ServeOptions(host="0.0.0.0").checked(lambda: "made")
    made = ServeOptions(host="0.0.0.0", allow_hosts=(" gw.example ", "")).checked(lambda: "made")
    assert made.status_token == "made" and made.allow_hosts == ("gw.example",)
    given = ServeOptions(host="10.1.2.3", allow_hosts=("*",), status_token="mine")
    assert given.checked(lambda: "made").status_token == "mine"
    assert ServeOptions.from_json(made.to_json()) == made


def test_several_workers_need_a_shared_store():
    with pytest.raises(InvalidOptionError, match="--workers 3 needs a shared --session-store"):
        ServeOptions(workers=3).checked(lambda: "t")
    shared = ServeOptions(workers=3, session_store="redis://127.0.0.1:6379/0")
    assert shared.checked(lambda: "t").workers == 3
