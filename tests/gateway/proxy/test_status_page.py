"""The ``GET /status`` page: figures and a server-side SVG chart, never text or credentials."""

from __future__ import annotations

import json
import logging
import re
import time

import anthropic
import httpx2

from dialect_fixtures import chat_agent_request, request_tokens
from gateway_helpers import status_page_gateway
from tomc._gateway.proxy.status_page import savings_chart

SECRET = "sk-openai-page-secret-99"
ANTHROPIC_SECRET = "sk-ant-page-secret-99"


def points(svg: str, kind: str) -> list[tuple[float, float]]:
    match = re.search(rf'<polyline class="{kind}"[^>]*points="([^"]+)"', svg, re.S)
    assert match, f"no {kind} line"
    return [tuple(map(float, pair.split(","))) for pair in match.group(1).split()]


def test_the_chart_draws_cumulative_billed_against_direct():
    series = [
        {"t": 1_800_000_000, "billed_input": 0.0, "direct_input": 0.0},
        {"t": 1_800_000_060, "billed_input": 1000.0, "direct_input": 1000.0},
        {"t": 1_800_000_120, "billed_input": 1500.0, "direct_input": 4000.0},
    ]
    svg = savings_chart(series, width=400, height=200)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    billed, direct = points(svg, "billed"), points(svg, "direct")
    assert len(billed) == len(direct) == 3
    # The same x positions; y grows upwards (smaller), direct ends at the top of the plot.
    assert [x for x, _ in billed] == [x for x, _ in direct]
    assert direct[-1][1] < billed[-1][1] < billed[0][1]
    assert direct[-1][1] == min(y for _, y in billed + direct)
    assert "1,500 through TOMC, 4,000 estimated direct (2,500 saved)" in svg
    assert "<script" not in svg and "href" not in svg
    assert "No usage" in savings_chart([])
    assert "No usage" in savings_chart(series[:1])


def test_the_page_shows_the_chart_and_figures_only(tmp_path, caplog):
    body = chat_agent_request(14)
    secret_text = body["messages"][1]["content"][:40]
    limit = int(request_tokens("chat", body) * 0.6)
    caplog.set_level(logging.INFO, logger="tomc.gateway")
    with status_page_gateway(tmp_path, body, SECRET) as (base, gateway):
        # The two chat requests went through; one more from a hostile client.
        hostile = anthropic.Anthropic(
            api_key=ANTHROPIC_SECRET,
            base_url=base,
            max_retries=0,
            http_client=httpx2.Client(trust_env=False),
            default_headers={"x-claude-code-session-id": "<script>alert(1)</script>"},
        )
        hostile.messages.create(
            model="claude-opus-4-8",
            max_tokens=10,
            messages=[{"role": "user", "content": "private words here"}],
        )
        deadline = time.monotonic() + 10  # recorded just after the last byte went out
        while gateway.status()["traffic"]["totals"]["requests"] < 3:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        with httpx2.Client(trust_env=False) as http:
            page = http.get(f"{base}/status")
            status = http.get(f"{base}/status.json").text
    assert page.status_code == 200
    # At --verbose the log has each request's provider side: what its cache read and wrote.
    logged = [r.getMessage() for r in caplog.records if r.name == "tomc.gateway"]
    assert any("provider counted 1,234 prompt tokens (1,200 read" in m for m in logged), logged
    html = page.text
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="savings-chart"' in html
    assert len(points(html, "billed")) >= 2 and len(points(html, "direct")) >= 2
    assert "billed through TOMC" in html and "estimated direct" in html
    assert "Traffic and savings" in html and "Live conversations" in html
    assert f"Context target: {limit}." in html and f"<td>{limit:,}</td>" in html
    # Each live conversation's latest request: TOMC's decision and time, the provider's figures.
    (chat,) = [c for c in json.loads(status)["conversations"] if c["api"] == "chat"]
    last = chat["last_request"]
    assert last["decision"] in ("compiled", "reused") and last["prepare_ms"] > 0
    assert last["provider"]["prompt_tokens"] == 1234
    assert last["provider"]["cache_read_tokens"] == 1200
    assert chat["account"]["direct"] > chat["account"]["billed"] > 0
    traffic = json.loads(status)["traffic"]
    assert f"{traffic['totals']['billed_input']:,.0f} through TOMC" in html
    assert traffic["totals"]["rewritten"] == 2
    for shown in (html, status):
        for secret in (SECRET, ANTHROPIC_SECRET, secret_text, "private words here"):
            assert secret not in shown
    assert "<script>" not in html and "&lt;script&gt;" in html  # escaped, never run
    assert "<link" not in html and " src=" not in html  # nothing fetched
