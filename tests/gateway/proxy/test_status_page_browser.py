"""The status page in a real browser (Debian's Chromium, driven by Playwright).

A realistic status (four conversations with long keys, figures in the hundreds of millions,
upstream and gateway errors) at 1280 and 1920 pixels: every table fits without sideways scroll,
every header is on screen and not covered, figures are right-aligned in tabular digits, keys are
cut with an ellipsis on one line. On a 390-pixel phone: each row is a card showing every field
under its header's label, keys break only after a separator, and the chart's labels stay
readable (at least 10 px). Then the live gateway's own page on a phone, as a user opens it.
Screenshots go to ``test-artifacts/``.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dialect_fixtures import chat_agent_request
from gateway_helpers import status_page_gateway
from status_fixtures import realistic_status
from tomc._gateway.proxy.status_page import render_status_page
from web_screenshot import launched_chromium

ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts"
PHONE = {"width": 390, "height": 844}
SEPARATORS = "/:|._@-"
#: A long session (drawn as lines) and a short one (bars with their values).
LONG, SHORT = 40, 2


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with launched_chromium() as chromium:
        yield chromium


def open_page(browser: Any, width: int, minutes: int = LONG) -> Any:
    """The page of :func:`realistic_status` in a fresh context ``width`` pixels wide."""
    phone = width <= PHONE["width"]
    context = browser.new_context(
        viewport={"width": width, "height": 900}, is_mobile=phone, has_touch=phone
    )
    page = context.new_page()
    fetched: list[str] = []
    page.on("request", lambda request: fetched.append(request.url))
    page.set_content(render_status_page(realistic_status(minutes)))
    assert fetched == []  # nothing fetched: no script, no font, no image
    return page


# Every table: its headers, and for each header where it is and whether it is the element
# found at its own centre (on screen, not covered), with the page scrolled vertically only.
TABLES_JS = """() => [...document.querySelectorAll('.table-wrap')].map(wrap => {
  const headers = [...wrap.querySelectorAll('thead th')].map(th => {
    const top = th.getBoundingClientRect().top + window.scrollY;
    window.scrollTo(0, Math.max(0, top - 100));
    const r = th.getBoundingClientRect();
    const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
    return {text: th.textContent, left: r.left, right: r.right, width: r.width,
            shown: hit !== null && th.contains(hit)};
  });
  return {client: wrap.clientWidth, scroll: wrap.scrollWidth, scrollLeft: wrap.scrollLeft,
          headers};
})"""

NUMBERS_JS = """() => [...document.querySelectorAll('td.num, th.num')].map(cell => {
  const style = getComputedStyle(cell);
  return {align: style.textAlign, digits: style.fontVariantNumeric};
})"""

KEYS_JS = """() => [...document.querySelectorAll('td .key')].map(key => {
  const range = document.createRange();
  const chars = [];
  const walker = document.createTreeWalker(key, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rects = range.getClientRects();
      if (rects.length) chars.push([node.data[i], Math.round(rects[0].top)]);
    }
  }
  const style = getComputedStyle(key);
  return {title: key.title, text: key.textContent, chars, overflow: style.textOverflow,
          clipped: key.scrollWidth > key.clientWidth,
          right: key.getBoundingClientRect().right,
          cell: key.closest('td').getBoundingClientRect().right};
})"""

CHART_JS = """() => [...document.querySelectorAll('svg.savings-chart text')].map(text => ({
  text: text.textContent,
  px: parseFloat(getComputedStyle(text).fontSize) * text.getScreenCTM().a,
  right: text.getBoundingClientRect().right,
}))"""

CARDS_JS = """() => [...document.querySelectorAll('table.cards')].map(table => ({
  headers: [...table.querySelectorAll('thead th')].map(th => th.textContent),
  headerShown: table.querySelector('thead').getBoundingClientRect().height > 1,
  rows: [...table.querySelectorAll('tbody tr')].map(tr => [...tr.cells].map(td => {
    const r = td.getBoundingClientRect();
    const value = td.querySelector('.v');
    const v = value.getBoundingClientRect();
    return {label: getComputedStyle(td, '::before').content.replace(/^"|"$/g, ''),
            dataLabel: td.dataset.label, left: r.left, right: r.right, height: r.height,
            valueRight: v.right, valueWidth: v.width, numeric: td.classList.contains('num')};
  })),
}))"""


@pytest.mark.parametrize("width", [1280, 1920])
def test_every_column_fits_a_desktop_screen(browser: Any, width: int) -> None:
    page = open_page(browser, width)
    try:
        tables = page.evaluate(TABLES_JS)
        numbers = page.evaluate(NUMBERS_JS)
        keys = page.evaluate(KEYS_JS)
        chart = page.evaluate(CHART_JS)
        page_width = page.evaluate("document.documentElement.scrollWidth")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"status-{width}.png"), full_page=True)
    finally:
        page.context.close()
    assert page_width <= width
    assert len(tables) == 2
    for table in tables:
        # No sideways scroll, and every header is on screen, not covered, not squeezed away.
        assert table["scroll"] <= table["client"] and table["scrollLeft"] == 0, table
        for header in table["headers"]:
            assert header["left"] >= 0 and header["right"] <= width, header
            assert header["width"] > 20 and header["shown"], header
    texts = [h["text"] for h in tables[0]["headers"]]
    for name in ("billed input", "estimated direct", "saved", "upstream errors",
                 "gateway errors", "last seen"):  # fmt: skip
        assert name in texts  # the columns the issue found behind the scroll
    # Figures: right-aligned, in tabular digits (headers and cells alike).
    assert len(numbers) > 50
    assert all(n["align"] == "right" and "tabular-nums" in n["digits"] for n in numbers)
    # Keys: one line each, cut with an ellipsis when long, the whole key in the title.
    assert len(keys) == 8
    for key in keys:
        assert len({top for _, top in key["chars"]}) == 1, key["text"]
        assert key["title"] == key["text"] and key["overflow"] == "ellipsis"
        assert key["right"] <= key["cell"] + 0.5
    assert any(key["clipped"] for key in keys)  # the data has keys too long for the column
    assert chart and min(label["px"] for label in chart) >= 10


@pytest.mark.parametrize("minutes", [LONG, SHORT])
def test_a_phone_shows_every_field_with_its_label_in_cards(browser: Any, minutes: int) -> None:
    width = PHONE["width"]
    page = open_page(browser, width, minutes)
    try:
        cards = page.evaluate(CARDS_JS)
        tables = page.evaluate(TABLES_JS)
        keys = page.evaluate(KEYS_JS)
        chart = page.evaluate(CHART_JS)
        kind = page.evaluate("document.querySelector('svg.savings-chart').classList[1]")
        page_width = page.evaluate("document.documentElement.scrollWidth")
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"status-phone-{minutes}.png"), full_page=True)
    finally:
        page.context.close()
    assert page_width <= width
    assert all(t["scroll"] <= t["client"] for t in tables)
    assert len(cards) == 2
    for table in cards:
        assert not table["headerShown"]  # the labels are in the cards
        assert len(table["rows"]) == 4
        for row in table["rows"]:
            # Every field, under its header's label, inside the screen.
            assert [cell["label"] for cell in row] == table["headers"]
            assert [cell["dataLabel"] for cell in row] == table["headers"]
            for cell in row:
                assert cell["height"] > 0 and cell["valueWidth"] > 0, cell
                assert cell["left"] >= 0 and cell["right"] <= width, cell
                if cell["numeric"]:  # the figure at the card's right edge
                    assert abs(cell["valueRight"] - cell["right"]) <= 1, cell
    # The keys have the card's width: whole, breaking only after a separator.
    assert len(keys) == 8
    for key in keys:
        assert not key["clipped"] and key["text"] == key["title"]
        for (before, top_before), (_, top) in itertools.pairwise(key["chars"]):
            if top > top_before:  # a new line starts after ``before``
                assert before in SEPARATORS, (key["text"], before)
    assert any(len({top for _, top in key["chars"]}) > 1 for key in keys)  # some do break
    # The chart's labels are not scaled down with it.
    assert kind == ("lines" if minutes == LONG else "bars")
    assert chart and min(label["px"] for label in chart) >= 10
    assert max(label["right"] for label in chart) <= width
    if minutes == SHORT:  # a short session's bars carry their values
        assert sum(1 for label in chart if label["text"][:1].isdigit()) >= 2


def test_the_live_page_has_one_cell_per_header_and_fits_a_phone(
    tmp_path: Path, browser: Any
) -> None:
    with status_page_gateway(tmp_path, chat_agent_request(14), "sk-test") as (base, gateway):
        deadline = time.monotonic() + 10  # recorded just after the last byte went out
        while gateway.status()["traffic"]["totals"]["requests"] < 2:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True)
        try:
            page = context.new_page()
            fetched: list[str] = []
            page.on("request", lambda request: fetched.append(request.url))
            page.goto(f"{base}/status")
            tables = page.evaluate(
                """() => [...document.querySelectorAll('table')].map(t => ({
                    header: t.tHead.rows[0].cells.length,
                    rows: [...t.tBodies[0].rows].map(r => r.cells.length),
                    texts: [...t.tHead.rows[0].cells].map(c => c.textContent),
                }))"""
            )
            cards = page.evaluate(CARDS_JS)
            page_width = page.evaluate("document.documentElement.scrollWidth")
            background = page.evaluate("getComputedStyle(document.body).backgroundColor")
            page.screenshot(path=str(tmp_path / "status-phone.png"), full_page=True)
        finally:
            context.close()
    assert len(tables) == 2
    for table in tables:
        assert table["rows"] and all(n == table["header"] for n in table["rows"]), table
    assert "TOMC's own count, before → after" in tables[1]["texts"]
    assert not any("billed" in text for text in tables[1]["texts"])  # one account: the ledger's
    (live_row,) = cards[1]["rows"]
    assert [cell["label"] for cell in live_row] == tables[1]["texts"]
    assert page_width <= PHONE["width"]
    assert background == "rgb(246, 247, 249)"  # the inspector's --bg
    assert all(url.startswith(base) for url in fetched), fetched
