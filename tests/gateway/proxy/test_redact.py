"""Secrets never reach a log line: query values, credentials and cookies are masked in what the
gateway, its HTTP client (httpx2, httpcore2) and uvicorn's access log write, at every level."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys

import httpx2
import pytest

from gateway_helpers import SERVE, free_port, serve_gateway, wait_for
from raw_http import RawUpstream, json_answer
from tomc._gateway.health import probe
from tomc._http.redact import RedactingFilter, redact

QUERY_KEY = "AIzaQueryKey0123456789abcdefghijklmnopq"
BEARER = "sk-proj-bearer-0123456789abcdef"
GOOG_KEY = "goog-header-secret-42"
COOKIE = "cookie-secret-42"
SECRETS = (QUERY_KEY, BEARER, GOOG_KEY, COOKIE)


@pytest.mark.parametrize(
    ("line", "kept"),
    [
        (f"GET /v1/models?key={QUERY_KEY}&beta=true HTTP/1.1", "/v1/models?key=***&beta=true"),
        (f"http://h/v1?api_key={QUERY_KEY}&token=t0k3n", "http://h/v1?api_key=***&token=***"),
        (f"Authorization: Bearer {BEARER}", "Authorization: Bearer ***"),
        (f"headers={{'authorization': 'Bearer {BEARER}'}}", "'authorization': 'Bearer ***'"),
        (f"(b'x-goog-api-key', b'{GOOG_KEY}')", "(b'x-goog-api-key', b'***')"),
        (f"x-api-key={GOOG_KEY}", "x-api-key=***"),
        (f"(b'set-cookie', b'session={COOKIE}; Path=/')", "(b'set-cookie', b'***')"),
        (f"Cookie: a=1; session={COOKIE}", "Cookie: ***"),
        (f"the key {BEARER} was used", "the key sk-*** was used"),
    ],
)
def test_redact_masks_secrets_and_keeps_the_rest(line: str, kept: str) -> None:
    masked = redact(line)
    assert kept in masked
    assert not any(secret in masked for secret in SECRETS)
    assert redact(masked) == masked


def test_redact_leaves_ordinary_text_alone() -> None:
    line = "messages compiled: fits (1200 -> 1200 tokens) on /v1/messages?beta=true"
    assert redact(line) == line


def test_the_filter_masks_records_and_leaves_clean_ones_as_they_are() -> None:
    def record(msg: str, *args: object) -> logging.LogRecord:
        made = logging.LogRecord("httpx2", logging.DEBUG, __file__, 1, msg, args, None)
        RedactingFilter().filter(made)
        return made

    url = f"http://h/v1/models?key={QUERY_KEY}"
    assert record("HTTP Request: %s %s", "GET", url).getMessage() == (
        "HTTP Request: GET http://h/v1/models?key=***"
    )
    clean = record('%s - "%s %s" %d', "127.0.0.1:5", "GET", "/v1/models", 200)
    assert clean.args == ("127.0.0.1:5", "GET", "/v1/models", 200)  # formatters may read them
    broken = record("%s and %s", BEARER)  # one argument short
    assert BEARER not in broken.getMessage()
    try:
        raise ValueError(f"refused {url}")
    except ValueError:
        failed = logging.LogRecord("tomc", logging.ERROR, __file__, 1, "x", None, sys.exc_info())
    RedactingFilter().filter(failed)
    assert QUERY_KEY not in (failed.exc_text or "") and "key=***" in (failed.exc_text or "")


def request_with_secrets(base: str) -> None:
    headers = {"Authorization": f"Bearer {BEARER}", "x-goog-api-key": GOOG_KEY}
    with httpx2.Client(trust_env=False) as http:
        answer = http.get(f"{base}/v1/models?key={QUERY_KEY}&beta=true", headers=headers)
    assert answer.status_code == 200


def secret_answer(request) -> bytes:
    return json_answer(b'{"data":[]}', f"Set-Cookie: session={COOKIE}; Path=/")


def test_no_log_line_of_a_request_holds_a_secret(caplog, monkeypatch) -> None:
    with (
        RawUpstream(secret_answer) as upstream,
        serve_gateway(upstream.url, verbose=True) as (server, _),
    ):
        # Another server in this test process may have turned uvicorn's access log off.
        monkeypatch.setattr(logging.getLogger("uvicorn.access"), "propagate", True)
        with caplog.at_level(logging.DEBUG):
            request_with_secrets(server.url.rstrip("/"))
    assert upstream.requests[0].target == f"/v1/models?key={QUERY_KEY}&beta=true"
    names = {record.name for record in caplog.records}
    assert {"uvicorn.access", "httpx2", "httpcore2.http11"} <= names
    for secret in SECRETS:
        assert secret not in caplog.text
    assert "/v1/models?key=***&beta=true" in caplog.text


def test_verbose_serve_writes_no_secret(tmp_path) -> None:
    port = free_port()
    with RawUpstream(secret_answer) as upstream:
        settings = tmp_path / "gateway" / "settings.json"
        settings.parent.mkdir()
        settings.write_text(
            f'{{"upstreams": {{"anthropic": "{upstream.url}", "openai": "{upstream.url}/v1"}}}}'
        )
        argv = [*SERVE, "--port", str(port), "--home", str(tmp_path), "--verbose"]
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for(lambda: probe(port).answering or process.poll() is not None)
            request_with_secrets(f"http://127.0.0.1:{port}")
        finally:
            # Ctrl-C's signal; Windows has none to send to a process: TerminateProcess there.
            process.send_signal(signal.SIGINT if sys.platform != "win32" else signal.SIGTERM)
            _, err = process.communicate(timeout=10)
    log = err.decode()
    assert "GET /v1/models?key=***&beta=true" in log  # the access line is there, masked
    assert "HTTP Request:" in log
    for secret in SECRETS:
        assert secret not in log
