"""The status page in a real browser (Debian's Chromium): one cell per header in every table,
the inspector's look, and readable on a phone (nothing wider than the screen but the tables,
which scroll)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dialect_fixtures import chat_agent_request
from gateway_helpers import status_page_gateway
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
    with status_page_gateway(tmp_path, chat_agent_request(14), "sk-test") as (base, gateway):
        deadline = time.monotonic() + 10  # recorded just after the last byte went out
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
