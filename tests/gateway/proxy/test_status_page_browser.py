"""The status page in a real browser (Debian's Chromium): one cell per header in every table,
the inspector's look, and readable on a phone (nothing wider than the screen but the tables,
which scroll)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx2
import openai
import pytest

from dialect_fixtures import chat_agent_request, request_tokens
from fake_providers import FakeProvider, Reply, Usage
from tomc._gateway.proxy.app import Gateway, create_gateway_app
from tomc._gateway.settings import GatewaySettings
from tomc.web._server import AppServer
from web_screenshot import CHROMIUM, CHROMIUM_ARGS

PHONE = {"width": 390, "height": 844}


def _browser():
    if not CHROMIUM.exists():
        if os.environ.get("TOMC_REQUIRE_BROWSER") == "1":
            pytest.fail(f"TOMC_REQUIRE_BROWSER=1 but {CHROMIUM} is missing")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    return sync_playwright()


def test_the_status_page_has_one_cell_per_header_and_fits_a_phone(tmp_path: Path) -> None:
    body = chat_agent_request(14)
    with FakeProvider() as fake:
        fake.script(
            Reply(usage=Usage(input_tokens=1234)),
            Reply(usage=Usage(input_tokens=34, cache_read_tokens=1200)),
        )
        settings = GatewaySettings(
            upstreams={"openai": fake.base_url, "anthropic": fake.anthropic_url},
            context_target=int(request_tokens("chat", body) * 0.6),
        )
        gateway = Gateway(settings, home=tmp_path)
        app = create_gateway_app(settings, gateway=gateway)
        with AppServer(app, "127.0.0.1", 0, quiet=True, lifespan="on") as server:
            base = server.url.rstrip("/")
            client = openai.OpenAI(
                api_key="sk-test",
                base_url=f"{base}/v1",
                max_retries=0,
                http_client=httpx2.Client(trust_env=False),
            )
            client.chat.completions.create(**body)
            client.chat.completions.create(**body)
            deadline = time.monotonic() + 10
            while gateway.status()["traffic"]["totals"]["requests"] < 2:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            with _browser() as playwright:
                chromium = playwright.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
                )
                try:
                    context = chromium.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
                    page = context.new_page()
                    fetched: list[str] = []
                    page.on("request", lambda request: fetched.append(request.url))
                    page.goto(f"{base}/status")
                    tables = page.evaluate(
                        """() => [...document.querySelectorAll('table')].map(t => ({
                            header: t.rows[0].cells.length,
                            rows: [...t.rows].slice(1).map(r => r.cells.length),
                            texts: [...t.rows[0].cells].map(c => c.textContent),
                        }))"""
                    )
                    page_width = page.evaluate("document.documentElement.scrollWidth")
                    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
                    account = page.locator("table").nth(1).locator("tr").nth(1).locator("td")
                    shown = account.nth(7).text_content()
                    page.screenshot(path=str(tmp_path / "status-phone.png"), full_page=True)
                finally:
                    chromium.close()
    assert len(tables) == 2
    for table in tables:
        assert table["rows"] and all(n == table["header"] for n in table["rows"]), table
    assert "billed vs direct (TOMC's estimate)" in tables[1]["texts"]
    assert shown is not None and "x)" in shown  # e.g. "1,234 vs 1,234 (1.00x)"
    assert page_width <= PHONE["width"]  # only the tables scroll sideways
    assert background == "rgb(246, 247, 249)"  # the inspector's --bg
    assert all(url.startswith(base) for url in fetched), fetched
