"""The web inspector's HTTP API, over real loopback HTTP (httpx, raw sockets) to uvicorn."""

from __future__ import annotations

import json
import logging
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

import tomc
from tomc._http.server import AppServer, allowed_hosts_for
from tomc.web import _server as web_server
from tomc.web._app import MAX_BODY_BYTES, inspector_routes, load_example
from tomc.web._server import make_server


@pytest.fixture(scope="module")
def base() -> Iterator[tuple[str, int]]:
    with make_server("127.0.0.1", 0, quiet=True) as srv:
        yield srv.address


def request(
    base: tuple[str, int],
    method: str,
    path: str,
    body: Any = None,
    *,
    raw: bytes | None = None,
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    sent_headers = dict(headers or {})
    payload = raw
    if body is not None:
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
    if payload is not None:
        sent_headers.setdefault("Content-Type", "application/json")
    host, port = base
    response = httpx.request(
        method, f"http://{host}:{port}{path}", content=payload, headers=sent_headers, timeout=60
    )
    # httpx lower-cases header names; the tests use their canonical case.
    canonical = {
        "-".join(part.capitalize() for part in name.split("-")): value
        for name, value in response.headers.items()
    }
    return response.status_code, canonical, response.content


def get_json(base: tuple[str, int], path: str) -> tuple[int, Any]:
    status, headers, data = request(base, "GET", path)
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    return status, json.loads(data)


def compile_api(base: tuple[str, int], body: Any, prefix: str = "") -> tuple[int, Any]:
    status, headers, data = request(base, "POST", f"{prefix}/api/compile", body)
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    return status, json.loads(data.decode("utf-8"))


def error_of(status_and_data: tuple[int, Any], status: int) -> str:
    got_status, data = status_and_data
    assert got_status == status, data
    assert set(data) == {"error"}
    assert data["error"]["status"] == status
    message = data["error"]["message"]
    assert "Traceback" not in message
    return message


def assert_alive(base: tuple[str, int]) -> None:
    status, data = get_json(base, "/api/health")
    assert (status, data["status"]) == (200, "ok")


# ---- static page ------------------------------------------------------------------------------


def test_page_is_served_with_its_assets_and_no_external_reference(base):
    status, headers, data = request(base, "GET", "/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    page = data.decode("utf-8")
    for element_id in ("history", "task", "budget", "strategy", "counter", "compile", "ledger"):
        assert f'id="{element_id}"' in page
    assets = re.findall(r'(?:src|href)="([^"#]+)"', page)
    assert "static/app.js" in assets and "static/style.css" in assets
    for asset in assets:
        # Relative, so the page also works with its routes mounted under a prefix.
        assert asset.startswith("static/"), f"{asset} is not served by the inspector itself"
        asset_status, _, _ = request(base, "GET", "/" + asset)
        assert asset_status == 200, asset
    # A CDN reference anywhere in the shipped files would break on machines without network.
    for name in ("app.js", "style.css"):
        _, _, text = request(base, "GET", f"/static/{name}")
        assert not re.search(rb"https?://", text), name


@pytest.mark.parametrize(
    ("path", "content_type"),
    [
        ("/static/app.js", "text/javascript; charset=utf-8"),
        ("/static/style.css", "text/css; charset=utf-8"),
        ("/static/favicon.svg", "image/svg+xml"),
        ("/index.html", "text/html; charset=utf-8"),
    ],
)
def test_static_content_types(base, path, content_type):
    status, headers, data = request(base, "GET", path)
    assert status == 200
    assert headers["Content-Type"] == content_type
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert int(headers["Content-Length"]) == len(data) > 0


def test_head_sends_headers_only(base):
    status, headers, data = request(base, "HEAD", "/static/app.js")
    assert status == 200 and data == b""
    assert int(headers["Content-Length"]) > 0


@pytest.mark.parametrize(
    "path",
    [
        "/static/../server.py",
        "/static/%2e%2e/server.py",
        "/static/",
        "/static/missing.js",
        "/static/static/app.js",
        "/nothing",
        "/api/nothing",
    ],
)
def test_unknown_paths_are_404_in_words(base, path):
    status, _, data = request(base, "GET", path)
    assert status == 404
    assert json.loads(data)["error"]["message"].startswith("nothing is served at")
    assert b"import" not in data  # never the source of a module


# ---- read-only endpoints ----------------------------------------------------------------------


def test_health(base):
    assert get_json(base, "/api/health") == (200, {"status": "ok", "version": tomc.__version__})


def test_options_match_the_library(base):
    status, data = get_json(base, "/api/options")
    assert status == 200
    assert set(data["strategies"]) == set(tomc.STRATEGIES)
    assert data["strategies"][0] == data["default_strategy"] == "tomc_raw"
    assert data["counters"] == ["lexical", "bpe:o200k_base", "bpe:cl100k_base"]
    assert data["max_chars"] == tomc.MAX_INTERACTIVE_CHARS == 200_000
    assert data["max_task_chars"] == tomc.MAX_TASK_CHARS == 10_000
    assert data["max_body_bytes"] == MAX_BODY_BYTES


def test_the_page_offers_exactly_the_library_options(base):
    _, _, page = request(base, "GET", "/")
    offered = re.findall(r'<option value="([^"]+)"', page.decode("utf-8"))
    _, options = get_json(base, "/api/options")
    assert set(offered) >= set(options["strategies"]) | set(options["counters"])


def test_example_has_copies_relations_chatter_and_cjk(base):
    status, example = get_json(base, "/api/example")
    assert status == 200
    assert example == load_example()
    lines = example["history"].splitlines()
    assert any(" copies " in line for line in lines)
    assert any(re.search(r"-\[\w+\]->", line) for line in lines)
    assert any(re.search(r"[\u4e00-\u9fff]", line) for line in lines)
    assert example["strategy"] in tomc.STRATEGIES
    assert example["task"]


# ---- compile ----------------------------------------------------------------------------------


def test_compile_example_matches_the_library(base):
    example = load_example()
    body = {key: example[key] for key in ("history", "task", "budget_tokens", "strategy")}
    status, data = compile_api(base, body)
    assert status == 200
    direct = tomc.compile_memory(
        example["history"],
        example["task"],
        budget_tokens=example["budget_tokens"],
        strategy=example["strategy"],
    )
    expected = direct.to_dict()
    for key in ("compiled_memory", "route", "route_reason", "ledger", "memory_tokens"):
        assert data[key] == expected[key], key
    assert [u["id"] for u in data["sources"]] == [f"u{i}" for i in range(len(direct.sources))]
    assert data["input"] == {"format": "text", "max_chars": 200_000}


def test_unit_status_follows_the_ledger(base):
    example = load_example()
    _, data = compile_api(
        base,
        {
            "history": example["history"],
            "task": example["task"],
            "budget_tokens": example["budget_tokens"],
        },
    )
    ledger = data["ledger"]
    packed_text = {r["key"] for r in ledger if r["kind"] == "source" and r["included"]}
    cited = {i for r in ledger if r["kind"] != "source" and r["included"] for i in r["source_ids"]}
    statuses = {u["id"]: u["status"] for u in data["sources"]}
    assert {i for i, s in statuses.items() if s == "kept"} == packed_text
    assert {i for i, s in statuses.items() if s == "record"} == cited - packed_text
    assert all(u["reason"] for u in data["sources"])
    # The example is built so that each status occurs: the page's three colours all matter.
    assert set(statuses.values()) == {"kept", "record", "omitted"}
    # rollback_target copies release_target, which copied deploy_target while it was staging.
    row = next(r for r in ledger if r["kind"] == "state" and r["key"] == "rollback_target")
    texts = {u["id"]: u["text"] for u in data["sources"]}
    assert [texts[i] for i in row["source_ids"]] == [
        "deploy_target = staging",
        "release_target copies deploy_target",
        "rollback_target copies release_target",
    ]


def test_records_only_strategy_marks_cited_units(base):
    status, data = compile_api(
        base,
        {"history": "A = 3\nB copies A\nA = 8\nchatter", "task": "What is B?", "strategy": "tomc"},
    )
    assert status == 200
    assert data["compiled_memory"].startswith("STATE B = 3 (u0,u1)")
    statuses = {u["id"]: u["status"] for u in data["sources"]}
    assert statuses == {"u0": "record", "u1": "record", "u2": "record", "u3": "omitted"}
    assert "state B" in data["sources"][0]["reason"]


def test_every_strategy_and_counter_compiles(base):
    _, options = get_json(base, "/api/options")
    for strategy in options["strategies"]:
        for counter in options["counters"]:
            status, data = compile_api(
                base,
                {
                    "history": "x = 1\nhello there",
                    "task": "What is x?",
                    "strategy": strategy,
                    "counter": counter,
                },
            )
            assert status == 200, (strategy, counter, data)
            assert data["counter"] == counter


def test_chat_messages_as_list_and_as_pasted_json(base):
    messages = [
        {"role": "user", "content": "deploy_target = staging"},
        {"role": "assistant", "content": "Noted.\nrelease copies deploy_target"},
    ]
    status, from_list = compile_api(base, {"history": messages, "task": "What is release?"})
    assert status == 200
    assert from_list["input"]["format"] == "messages"
    assert [u["role"] for u in from_list["sources"]] == ["user", "assistant", "assistant"]
    status, from_text = compile_api(
        base, {"history": json.dumps(messages, indent=1), "task": "What is release?"}
    )
    assert status == 200 and from_text["input"]["format"] == "messages"
    assert from_text["compiled_memory"] == from_list["compiled_memory"]
    # Forced text keeps the JSON as lines; bracketed log lines are never read as JSON.
    _, as_text = compile_api(
        base, {"history": json.dumps(messages), "task": "x?", "history_format": "text"}
    )
    assert as_text["input"]["format"] == "text" and as_text["sources"][0]["role"] is None
    _, log = compile_api(base, {"history": "[10:02] a = 1\n[10:03] done", "task": "a?"})
    assert log["input"]["format"] == "text"


def test_cjk_round_trips_unchanged(base):
    history = "备注：周五之前完成数据库迁移。\n負責者 = 東京チーム\n담당 = 서울팀"
    status, headers, data = request(
        base, "POST", "/api/compile", {"history": history, "task": "負責者は誰？"}
    )
    assert status == 200
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    # Sent as UTF-8, not \u escapes, so a reader of the raw body sees the text too.
    assert "备注".encode() in data and b"\\u5907" not in data
    units = json.loads(data)["sources"]
    assert [u["text"] for u in units] == history.splitlines()


# ---- bad input --------------------------------------------------------------------------------

BAD_BODIES = [
    ([1, 2], "must be a JSON object, not an array"),
    ("text", "must be a JSON object, not a string"),
    ({"task": "x"}, "'history' is required"),
    ({"history": 5, "task": "x"}, "'history' must be a string or a list"),
    ({"history": {"role": "user"}, "task": "x"}, "not an object"),
    ({"history": "a = 1", "task": 3}, "'task' must be a string"),
    ({"history": "a = 1", "task": "x", "budget_tokens": "120"}, "'budget_tokens' must be"),
    ({"history": "a = 1", "task": "x", "budget_tokens": True}, "not a boolean"),
    ({"history": "a = 1", "task": "x", "budget_tokens": 1.5}, "whole number"),
    ({"history": "a = 1", "task": "x", "budget_tokens": -5}, "budget_tokens must be >= 0"),
    ({"history": "a = 1", "task": "x", "strategy": "nope"}, "unknown strategy 'nope'"),
    ({"history": "a = 1", "task": "x", "strategy": 7}, "'strategy' must be a string"),
    ({"history": "a = 1", "task": "x", "counter": "bpe"}, "ambiguous"),
    ({"history": "a = 1", "task": "x", "counter": "words"}, "unknown counter 'words'"),
    ({"history": "a = 1", "task": "x", "uncapped": "yes"}, "'uncapped' must be true or false"),
    ({"history": "a = 1", "task": "x", "history_format": "xml"}, "'history_format' must be"),
    ({"history": "a = 1", "task": "x", "budget": 10}, "unknown field(s): budget"),
    ({"history": "a = 1", "task": ""}, "task is empty"),
    ({"history": "\n  \n", "task": "x"}, "history is empty"),
    ({"history": [], "task": "x"}, "history is empty"),
    ({"history": "a = 1", "task": "x", "history_format": "messages"}, "not a JSON list"),
    ({"history": [{"content": "hi"}], "task": "x"}, "has no 'role'"),
    ({"history": [{"role": "user", "content": 5}], "task": "x"}, "content is a int"),
    (
        {"history": [{"role": "user", "content": [{"type": "image_url"}]}], "task": "x"},
        "only text parts",
    ),
    ({"history": "a = 1\x00", "task": "x"}, "NUL"),
    (
        {"history": "a = 1", "task": "x", "budget_tokens": 10**400},
        "budget_tokens must be at most 1,000,000,000,000, not a number of 401 digits",
    ),
]


@pytest.mark.parametrize(("body", "fragment"), BAD_BODIES)
def test_bad_bodies_are_400_in_words(base, body, fragment):
    message = error_of(compile_api(base, body), 400)
    assert fragment in message
    assert_alive(base)


def test_history_over_the_character_limit_is_413(base):
    limit = tomc.MAX_INTERACTIVE_CHARS
    at_limit = ("x = 1\n" * (limit // 6 + 1))[:limit]
    # The task does not count against the history's limit: a history (or notebook) that fits
    # can be compiled with any task.
    status, _ = compile_api(base, {"history": at_limit, "task": "What is x, and why?"})
    assert status == 200
    message = error_of(compile_api(base, {"history": at_limit + "y", "task": "x?"}), 413)
    assert "history has 200,001 characters" in message and "200,000" in message
    # Chat lists count their message text only, the same rule as the library ...
    chat = [{"role": "user", "content": "z" * limit}]
    assert compile_api(base, {"history": chat, "task": "x", "budget_tokens": 5})[0] == 200
    chat[0]["content"] += "z"
    assert "200,001" in error_of(compile_api(base, {"history": chat, "task": "x"}), 413)
    # ... also when pasted as JSON text, however much JSON surrounds the text.
    pasted = json.dumps([{"role": "user", "content": "z" * limit, "name": "n" * 500}])
    assert len(pasted) > limit
    status, data = compile_api(base, {"history": pasted, "task": "x", "budget_tokens": 5})
    assert status == 200 and data["input"]["format"] == "messages"


def test_task_has_its_own_limit(base):
    task_limit = tomc.MAX_TASK_CHARS
    ok = compile_api(base, {"history": "a = 1", "task": "a" * task_limit})
    assert ok[0] == 200
    message = error_of(compile_api(base, {"history": "a = 1", "task": "a" * (task_limit + 1)}), 413)
    assert "task has 10,001 characters" in message and "10,000" in message


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        (b"{not json", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"history": "a = 1", "task": "x", "budget_tokens": NaN}', "'budget_tokens' must be"),
        # Python's int() refuses literals over 4,300 digits (ValueError): named, not a 500.
        (
            b'{"history": "a = 1", "task": "x", "budget_tokens": 1' + b"0" * 5_000 + b"}",
            "a number with 5,001 digits",
        ),
        (b'{"history": "a = 1", "task": "x", "budget_tokens": 1e400}', "'budget_tokens' must be"),
    ],
)
def test_unreadable_bodies_are_400(base, raw, fragment):
    status, _, data = request(base, "POST", "/api/compile", raw=raw)
    assert status == 400
    assert fragment in json.loads(data)["error"]["message"]
    assert_alive(base)


def test_a_lone_surrogate_round_trips_instead_of_failing_the_reply(base):
    # A JSON \ud800 escape decodes to an unpaired surrogate, which UTF-8 cannot encode.
    raw = b'{"history": "a = 1\\ud800 \xe5\xa4\x87\\nb = 2", "task": "What is a?"}'
    status, _, data = request(base, "POST", "/api/compile", raw=raw)
    assert status == 200
    data.decode("utf-8")  # the reply is valid UTF-8 ...
    units = json.loads(data)["sources"]
    assert units[0]["text"] == "a = 1\ud800 备"  # ... and carries the text exactly as sent
    assert "备".encode() in data


def test_wrong_content_type_is_415(base):
    status, _, data = request(
        base, "POST", "/api/compile", raw=b"history=a", headers={"Content-Type": "text/plain"}
    )
    assert status == 415
    assert "application/json" in json.loads(data)["error"]["message"]


def _read_all(sock: socket.socket) -> bytes:
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _raw_exchange(base: tuple[str, int], data: bytes, *, half_close: bool = False) -> bytes:
    """Send bytes on a fresh connection and read until the server closes it (30 s at most)."""
    with socket.create_connection(base, timeout=30) as sock:
        sock.sendall(data)
        if half_close:
            sock.shutdown(socket.SHUT_WR)
        return _read_all(sock)


def test_missing_length_is_411(base):
    reply = _raw_exchange(
        base,
        b"POST /api/compile HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
    )
    assert reply.startswith(b"HTTP/1.1 411")
    assert b"Content-Length" in reply.split(b"\r\n\r\n", 1)[1]


def test_oversized_body_is_refused_before_it_is_read(base):
    # Announce a gigabyte and send none of it: a server that tried to read the body first
    # would wait for bytes that never come instead of answering.
    with socket.create_connection(base, timeout=30) as sock:
        sock.sendall(
            b"POST /api/compile HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n"
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += sock.recv(4096)
    assert head.startswith(b"HTTP/1.1 413")
    assert_alive(base)


def test_oversized_body_sent_in_full_still_gets_the_413_message(base):
    raw = b'{"history": "' + b"a" * (MAX_BODY_BYTES + 10) + b'", "task": "x"}'
    status, _, data = request(base, "POST", "/api/compile", raw=raw)
    assert status == 413
    assert "over the limit" in json.loads(data)["error"]["message"]
    assert_alive(base)


SHORT_BODY = (
    b"POST /api/compile HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    b"Content-Length: 100\r\n\r\n{}"
)


def test_body_shorter_than_announced_is_400_once_it_stalls():
    # The old server waited 30 s and then answered 500; a stalled body is now a prompt 400.
    with make_server("127.0.0.1", 0, quiet=True, body_timeout_s=0.5) as srv:
        reply = _raw_exchange(srv.address, SHORT_BODY)
        assert reply.startswith(b"HTTP/1.1 400")
        assert b"stopped after 2 of the 100 bytes announced" in reply
        assert_alive(srv.address)


def test_body_cut_short_by_the_client_closes_the_connection(base):
    # The client closes its side with 98 bytes missing: nobody is left to read an answer, so
    # the server closes at once instead of waiting (the module server waits 5 s for a stall).
    reply = _raw_exchange(base, SHORT_BODY, half_close=True)
    assert reply == b""
    assert_alive(base)


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("GET", "/api/compile", "POST"),
        ("PUT", "/api/compile", "POST"),
        ("DELETE", "/", "GET, HEAD"),
        ("POST", "/api/options", "GET, HEAD"),
        ("POST", "/static/app.js", "GET, HEAD"),
    ],
)
def test_wrong_method_is_405(base, method, path, allow):
    status, headers, data = request(base, method, path, raw=b"{}" if method != "GET" else None)
    assert status == 405
    assert headers["Allow"] == allow
    assert json.loads(data)["error"]["type"] == "MethodNotAllowed"


def test_post_to_unknown_path_is_404(base):
    status, _, _ = request(base, "POST", "/api/other", {"history": "a"})
    assert status == 404


# ---- the host check (DNS rebinding) -----------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST", "[::1]"])
def test_loopback_host_names_are_served_with_any_port(base, host):
    for value in (host, f"{host}:{base[1]}", f"{host}:1"):
        status, _, _ = request(base, "GET", "/api/health", headers={"Host": value})
        assert status == 200, value


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8765", "127.0.0.1.evil.example", "[::2]", "10.0.0.1"]
)
def test_other_host_names_are_refused(base, host):
    status, _, data = request(base, "GET", "/api/health", headers={"Host": host})
    assert status == 421
    error = json.loads(data)["error"]
    assert error["type"] == "MisdirectedRequest" and "--allow-host" in error["message"]
    body = {"history": "a", "task": "b"}
    assert request(base, "POST", "/api/compile", body, headers={"Host": host})[0] == 421


def test_allowed_host_names_can_be_added():
    with make_server("127.0.0.1", 0, quiet=True, allowed_hosts=["inspector.lan"]) as srv:
        assert request(srv.address, "GET", "/", headers={"Host": "inspector.lan:80"})[0] == 200
        assert request(srv.address, "GET", "/", headers={"Host": "localhost"})[0] == 200
        assert request(srv.address, "GET", "/", headers={"Host": "evil.example"})[0] == 421


def test_allowed_hosts_follow_the_bind_address():
    loopback = ("127.0.0.1", "localhost", "[::1]")
    assert allowed_hosts_for("127.0.0.1") == loopback
    assert allowed_hosts_for("::1") == loopback
    assert allowed_hosts_for("192.168.1.5") == (*loopback, "192.168.1.5")
    assert allowed_hosts_for("fd00::5") == (*loopback, "[fd00::5]")
    assert allowed_hosts_for("0.0.0.0") is None  # every interface: its names are unknown
    assert allowed_hosts_for("0.0.0.0", ["box.lan"]) == (*loopback, "box.lan")
    assert allowed_hosts_for("127.0.0.1", ["*"]) is None


# ---- the compiler is injected; compiling never blocks the server ------------------------------


def test_an_unexpected_failure_is_500_in_words_and_the_server_lives_on():
    def broken(*args: Any, **kwargs: Any) -> None:
        raise ZeroDivisionError("secret internal detail")

    with make_server("127.0.0.1", 0, quiet=True, compile_fn=broken) as srv:
        message = error_of(compile_api(srv.address, {"history": "a = 1", "task": "x"}), 500)
        assert "unexpected ZeroDivisionError while compiling the history" in message
        assert "secret internal detail" not in message
        assert_alive(srv.address)


def test_a_slow_compile_does_not_block_other_requests():
    started, release = threading.Event(), threading.Event()

    def slow(*args: Any, **kwargs: Any) -> Any:
        started.set()
        assert release.wait(60)
        return tomc.compile_memory(*args, **kwargs)

    with make_server("127.0.0.1", 0, quiet=True, compile_fn=slow) as srv:
        results: list[int] = []
        thread = threading.Thread(
            target=lambda: results.append(
                compile_api(srv.address, {"history": "a = 1", "task": "a?"})[0]
            )
        )
        thread.start()
        assert started.wait(60)
        # The compile is still running: the event loop must answer anyway.
        assert_alive(srv.address)
        assert request(srv.address, "GET", "/api/options")[0] == 200
        release.set()
        thread.join(60)
        assert results == [200]


def test_fifty_concurrent_compiles_all_succeed(base):
    # The stdlib server's listen backlog of 5 reset some of these connections.
    count = 50
    barrier = threading.Barrier(count)
    results: list[Any] = [None] * count

    def one(i: int) -> None:
        barrier.wait(30)
        try:
            results[i] = compile_api(
                base, {"history": f"v = {i}\nw copies v", "task": "w?", "strategy": "tomc"}
            )
        except httpx.HTTPError as exc:  # a reset connection would land here
            results[i] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r[0] if isinstance(r, tuple) else r for r in results] == [200] * count
    assert [r[1]["compiled_memory"].splitlines()[0] for r in results] == [
        f"STATE w = {i} (u0,u1)" for i in range(count)
    ]


def test_routes_mount_in_a_larger_app():
    calls: list[str] = []

    def recording(history: Any, task: str, **kwargs: Any) -> Any:
        calls.append(task)
        return tomc.compile_memory(history, task, **kwargs)

    app = Starlette(routes=[Mount("/inspector", routes=inspector_routes(compile_fn=recording))])
    with AppServer(app, "127.0.0.1", 0, quiet=True) as srv:  # started once, by __enter__
        status, _, page = request(srv.address, "GET", "/inspector/")
        assert status == 200 and b"static/app.js" in page
        assert request(srv.address, "GET", "/inspector/static/app.js")[0] == 200
        status, data = compile_api(
            srv.address, {"history": "a = 1", "task": "a?", "strategy": "tomc"}, "/inspector"
        )
        assert status == 200 and data["compiled_memory"].startswith("STATE a = 1")
    assert calls == ["a?"]


# ---- command line -----------------------------------------------------------------------------


def test_tomc_serve_starts_and_answers():
    code = "import sys; from tomc._cli import main; sys.argv = ['tomc'] + sys.argv[1:]; main()"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        assert match, (line, proc.stderr.read() if proc.poll() is not None else "")
        port = int(match.group(1))
        status, data = get_json(("127.0.0.1", port), "/api/health")
        assert (status, data["status"]) == (200, "ok")
        assert request(("127.0.0.1", port), "GET", "/", headers={"Host": "evil.example"})[0] == 421
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_tomc_serve_reports_a_taken_port():
    from click.testing import CliRunner

    from tomc._cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", "--port", str(port)])
    assert result.exit_code != 0
    assert f"cannot serve on 127.0.0.1:{port}" in result.output


def test_module_exports_a_server_factory():
    srv = web_server.make_server("127.0.0.1", 0, quiet=True)
    try:
        assert srv.url.startswith("http://127.0.0.1:")
        assert srv.socket.getsockname()[1] == srv.address[1] > 0
    finally:
        srv.socket.close()


def test_cross_site_pages_are_refused_and_its_own_page_is_served(base):
    """A page of another origin gets 403 (its preflight too); the inspector's own page, whose
    fetches name the inspector's origin, and clients that send no Origin are served."""
    body = {"history": "A = 1\nA = 2", "task": "What is A?"}
    host, port = base
    status, _, data = request(
        base, "POST", "/api/compile", body, headers={"Origin": "https://evil.example"}
    )
    error = json.loads(data)["error"]
    assert status == 403 and error["type"] == "CrossSiteRequest"
    assert "https://evil.example" in error["message"]
    preflight = {"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"}
    assert request(base, "OPTIONS", "/api/compile", headers=preflight)[0] == 403
    own = {"Origin": f"http://{host}:{port}"}
    assert request(base, "POST", "/api/compile", body, headers=own)[0] == 200
    assert request(base, "POST", "/api/compile", body)[0] == 200


def test_the_inspector_redacts_secrets_in_log_lines(caplog: pytest.LogCaptureFixture):
    """Once the app exists, uvicorn's access lines lose query values and keys."""
    from tomc.web import create_app

    create_app()
    with caplog.at_level("INFO", logger="uvicorn.access"):
        logging.getLogger("uvicorn.access").info(
            "GET /api/health?key=AIzaSECRETSECRET1234 Authorization: Bearer sk-abcdefgh12345678"
        )
    text = caplog.records[-1].getMessage()
    assert "SECRET" not in text and "sk-abcdefgh" not in text and "***" in text
