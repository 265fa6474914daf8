"""Cross-site requests: a web page can make a browser send simple requests (a POST with
``Content-Type: text/plain``) to 127.0.0.1, and ask for more with a CORS preflight. The gateway
refuses both unless the page's origin is allowed; SDKs and agent CLIs send no ``Origin`` and
pass, and so do the gateway's own pages (same origin)."""

from __future__ import annotations

import json
import subprocess

import anthropic
import httpx2
import pytest

from dialect_fixtures import claude_code_request
from gateway_helpers import SERVE, free_port, serve_gateway, wait_for
from raw_http import RawUpstream, json_answer
from tomc._core.errors import InvalidOptionError
from tomc._gateway.health import probe
from tomc._gateway.settings import GatewaySettings, load_settings, save_settings

EVIL = "https://evil.example"
APP = "https://app.example"
KEY = "sk-ant-origin-test"


def post(base: str, path: str, headers: dict[str, str], body: bytes = b"{}") -> httpx2.Response:
    with httpx2.Client(trust_env=False) as http:
        return http.post(f"{base}{path}", content=body, headers=headers)


def preflight(base: str, origin: str) -> httpx2.Response:
    headers = {
        "Origin": origin,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "x-api-key, content-type, anthropic-version",
    }
    with httpx2.Client(trust_env=False) as http:
        return http.options(f"{base}/v1/messages", headers=headers)


def test_a_cross_site_post_is_refused_in_the_clients_error_shape() -> None:
    body = json.dumps(claude_code_request(2, thinking=False)).encode()
    with RawUpstream() as upstream, serve_gateway(upstream.url) as (server, _):
        base = server.url.rstrip("/")
        simple = {"Origin": EVIL, "Content-Type": "text/plain", "x-api-key": KEY}
        refused = post(base, "/v1/messages", simple, body)
        chat = post(base, "/v1/chat/completions", {"Origin": EVIL}, body)
        status = httpx2.get(f"{base}/status.json", headers={"Origin": EVIL}, trust_env=False)
        assert upstream.requests == []
        direct = post(base, "/v1/messages", {"Content-Type": "application/json", "x-api-key": KEY})
        assert direct.status_code == 200 and len(upstream.requests) == 1  # no Origin: an SDK
    assert refused.status_code == 403
    error = refused.json()
    assert error["type"] == "error" and error["error"]["type"] == "permission_error"
    assert EVIL in error["error"]["message"] and "--allow-origin" in error["error"]["message"]
    assert chat.status_code == 403 and chat.json()["error"]["type"] == "permission_error"
    assert status.status_code == 403
    assert "access-control-allow-origin" not in refused.headers


def test_a_preflight_is_refused_and_never_forwarded() -> None:
    def cors(request) -> bytes:  # an upstream that would grant any page
        return json_answer(b"{}", "Access-Control-Allow-Origin: *")

    with RawUpstream(cors) as upstream, serve_gateway(upstream.url) as (server, _):
        answer = preflight(server.url.rstrip("/"), EVIL)
        no_origin = preflight(server.url.rstrip("/"), "")
    assert answer.status_code == 403 and no_origin.status_code == 403
    assert "access-control-allow-origin" not in answer.headers
    assert upstream.requests == []


def test_the_gateways_own_pages_are_same_origin() -> None:
    with RawUpstream() as upstream, serve_gateway(upstream.url) as (server, _):
        base = server.url.rstrip("/")
        own = {"Origin": base, "Content-Type": "application/json"}
        compiled = post(base, "/api/compile", own, b'{"history":"a\\nb\\n","task":"a?"}')
        other_port = post(base, "/api/compile", {**own, "Origin": "http://127.0.0.1:1"})
        named = {"Origin": f"http://localhost:{server.port}", "Host": f"localhost:{server.port}"}
        with httpx2.Client(trust_env=False) as http:
            status = http.get(f"{base}/status.json", headers=named)
    assert compiled.status_code == 200
    assert other_port.status_code == 403  # another local server is another site
    assert status.status_code == 200


def test_an_allowed_origin_gets_a_preflight_answer_and_its_requests_through() -> None:
    def cors(request) -> bytes:
        payload = json.dumps(
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-opus-4-8",
                "content": [{"type": "text", "text": "hi"}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                "usage": {"input_tokens": 5, "output_tokens": 1},
            }
        ).encode()
        return json_answer(payload, "Access-Control-Allow-Origin: *", "Vary: Accept-Encoding")

    with (
        RawUpstream(cors) as upstream,
        serve_gateway(upstream.url, allow_origins=(APP,)) as (server, _),
    ):
        base = server.url.rstrip("/")
        answer = preflight(base, APP)
        assert upstream.requests == []
        refused = preflight(base, EVIL)
        client = anthropic.Anthropic(
            api_key=KEY,
            base_url=base,
            max_retries=0,
            timeout=30.0,  # also spares the SDK its refusal of large max_tokens
            default_headers={"Origin": APP},
            http_client=httpx2.Client(trust_env=False),
        )
        raw = client.messages.with_raw_response.create(**claude_code_request(2, thinking=False))
    assert answer.status_code == 204
    assert answer.headers["access-control-allow-origin"] == APP
    assert "POST" in answer.headers["access-control-allow-methods"]
    assert answer.headers["access-control-allow-headers"] == (
        "x-api-key, content-type, anthropic-version"
    )
    assert refused.status_code == 403
    assert raw.http_response.status_code == 200
    assert raw.headers.get_list("access-control-allow-origin") == [APP]
    assert raw.headers.get_list("vary") == ["Accept-Encoding, Origin"]
    assert upstream.requests[-1].header("origin") == [APP]


def test_allowed_origins_are_a_setting(tmp_path) -> None:
    save_settings(GatewaySettings(allow_origins=("https://App.Example/",)), tmp_path)
    assert load_settings(tmp_path).allow_origins == (APP,)
    for bad in ("app.example", "https://app.example/path", "*", "null"):
        with pytest.raises(InvalidOptionError, match="allow_origins"):
            GatewaySettings(allow_origins=(bad,))


def test_serve_takes_allow_origin(tmp_path) -> None:
    port = free_port()
    argv = [*SERVE, "--port", str(port), "--home", str(tmp_path), "--allow-origin", APP]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: probe(port).answering or process.poll() is not None)
        base = f"http://127.0.0.1:{port}"
        assert preflight(base, APP).status_code == 204
        assert preflight(base, EVIL).status_code == 403
    finally:
        process.terminate()
        process.wait(10)
