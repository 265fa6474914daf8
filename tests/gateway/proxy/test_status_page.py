"""The ``GET /status`` page: figures and a server-side SVG chart, never text or credentials; one
account of savings under the same names on the page, in ``/status.json`` and in ``tomc gateway
status``, with TOMC's own count labelled as such; one "billed" figure per request in the log."""

from __future__ import annotations

import html
import json
import logging
import re
import time
from html.parser import HTMLParser
from typing import Any

import anthropic
import httpx2

from dialect_fixtures import chat_agent_request, request_tokens
from gateway_helpers import status_page_gateway
from status_fixtures import fill_ledger, live_status, realistic_status
from tomc._gateway.local.status import gateway_status
from tomc._gateway.proxy.app import Gateway
from tomc._gateway.proxy.metering.ledger import UsageLedger, ledger_path
from tomc._gateway.proxy.metering.savings import METHOD_DOC, OWN_COUNT, Savings
from tomc._gateway.proxy.status_page import render_status_page, savings_chart
from tomc._gateway.settings import GatewaySettings

SECRET = "sk-openai-page-secret-99"
ANTHROPIC_SECRET = "sk-ant-page-secret-99"
T0 = 1_800_000_000


def points(svg: str, kind: str) -> list[tuple[float, float]]:
    match = re.search(rf'<polyline class="{kind}"[^>]*points="([^"]+)"', svg, re.S)
    assert match, f"no {kind} line"
    return [tuple(map(float, pair.split(","))) for pair in match.group(1).split()]


def cumulative(steps: list[tuple[float, float]]) -> list[dict[str, Any]]:
    """A chart series from per-minute (billed, direct) figures, one request each."""
    series = [{"t": T0, "requests": 0, "billed_input": 0.0, "direct_input": 0.0}]
    for n, (billed, direct) in enumerate(steps, 1):
        last = series[-1]
        series.append(
            {
                "t": T0 + 60 * n,
                "requests": n,
                "billed_input": last["billed_input"] + billed,
                "direct_input": last["direct_input"] + direct,
            }
        )
    return series


def outer_tag(svg: str) -> str:
    match = re.match(r"<svg [^>]*>", svg)
    assert match
    return match.group(0)


def test_a_short_session_is_drawn_as_bars_with_their_values():
    svg = savings_chart(cumulative([(1000.0, 1000.0), (500.0, 3000.0)]))
    assert 'class="savings-chart bars"' in svg
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    # Each bucket: its billed and direct bars, each with its value written beside it.
    values = re.findall(r'<text class="value (billed|direct)"[^>]*>([^<]+)</text>', svg)
    assert values == [("billed", "1,000"), ("direct", "1,000"), ("billed", "500"),
                      ("direct", "3,000")]  # fmt: skip
    widths = [float(w) for w in re.findall(r'<rect class="\w+"[^>]*width="([\d.]+)%"', svg)]
    assert widths[3] == max(widths) == 55.0 and widths[2] < widths[0] == widths[1]
    assert "billed input (through TOMC): 1,500" in svg and "estimated direct: 4,000" in svg
    assert Savings(1500.0, 4000.0).sentence() in svg  # its title: the account's sentence
    # No viewBox: the drawing is not scaled down on a phone, so neither are its labels.
    assert "viewBox" not in outer_tag(svg) and 'width="100%"' in outer_tag(svg)
    assert "<script" not in svg and "href" not in svg


def test_a_longer_session_is_drawn_as_cumulative_lines():
    steps = [(100.0 * n, 250.0 * n) for n in range(1, 31)]
    svg = savings_chart(cumulative(steps))
    assert 'class="savings-chart lines"' in svg
    billed, direct = points(svg, "billed"), points(svg, "direct")
    assert len(billed) == len(direct) == 31
    # The same x positions; y grows downwards in the inner drawing, direct ends at its top.
    assert [x for x, _ in billed] == [x for x, _ in direct]
    assert direct[-1][1] == 0.0 < billed[-1][1] < billed[0][1] == 1000.0
    # Only the lines are stretched (an inner drawing); the labels are in the outer one.
    assert "viewBox" not in outer_tag(svg)
    assert 'preserveAspectRatio="none"' in svg and "non-scaling-stroke" in svg
    inner = svg[svg.index("<svg x=") : svg.index("</svg>")]
    assert "<text" not in inner
    assert "No usage" in savings_chart([])
    assert "No usage" in savings_chart(cumulative([])[:1])


class Tables(HTMLParser):
    """The page's tables: each row as its cells' text by their ``data-label``."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tables: list[list[dict[str, str]]] = []
        self.headers: list[list[str]] = []
        self._cell: list[str] | None = None
        self._label = ""
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "table":
            self.tables.append([])
            self.headers.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append({})
        elif tag in ("td", "th"):
            self._cell, self._label = [], found.get("data-label") or ""
        elif tag == "span" and self._cell is not None and found.get("title"):
            self._cell.append(f"[{found['title']}]")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            text = " ".join("".join(self._cell).split())
            if tag == "th":
                self.headers[-1].append(text)
            else:
                self.tables[-1][-1][self._label] = text
            self._cell = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def keys_of(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in keys_of(v)}
    if isinstance(value, list):
        return {k for v in value for k in keys_of(v)}
    return set()


def test_one_account_under_the_same_names_on_the_page_in_the_json_and_the_command(tmp_path):
    """The same ledger read by the three surfaces: the same savings sentence, the same
    figures in the same columns, TOMC's own count never shown as savings, gateway errors in
    total and per conversation."""
    ledger = fill_ledger(UsageLedger(ledger_path(tmp_path)))
    gateway = Gateway(GatewaySettings(), home=tmp_path, ledger=ledger)
    status = gateway.status(live=live_status(), traffic=ledger.settled_traffic(20))
    ledger.close()
    shown = json.loads(json.dumps(status))  # as /status.json sends it
    page = render_status_page(status)
    assert render_status_page(status) == page  # deterministic
    text_of_page = html.unescape(re.sub(r"<[^>]+>", "", page))
    cli = gateway_status(home=tmp_path, environ={"HOME": str(tmp_path)})
    text = cli.to_text()

    totals = shown["traffic"]["totals"]
    sentence = Savings.of(totals).sentence()
    assert sentence == (
        f"billed input {totals['billed_input']:,.0f} against {totals['direct_input']:,.0f} "
        f"estimated direct: {totals['billed_saved']:,.0f} saved "
        f"({totals['billed_saved_share']:.0%})"
    )
    assert f"Savings: {sentence}" in " ".join(text_of_page.split())
    assert f"savings: {sentence}" in text
    assert cli.to_dict()["traffic"]["totals"] == totals  # `tomc gateway status --json`
    # The estimate's method one click away (and named in the JSON and the command).
    assert '<details class="method" id="method"><summary>How the estimated direct' in page
    assert METHOD_DOC in page and METHOD_DOC in text and shown["traffic"]["method"] == METHOD_DOC
    assert "README" not in page

    (traffic_table, live_table) = Tables(page).tables
    rows = {row["conversation"]: row for row in traffic_table[1:]}
    assert len(rows) == len(shown["traffic"]["conversations"]) == 4
    for c in shown["traffic"]["conversations"]:
        account = Savings.of(c)
        row = next(r for key, r in rows.items() if f"[{c['conversation']}]" in key)
        assert row["billed input"] == f"{c['billed_input']:,.0f}"
        assert row["estimated direct"] == f"{c['direct_input']:,.0f}"
        assert row["saved"] == f"{c['billed_saved']:,.0f} {c['billed_saved_share']:.0%}"
        assert row["gateway errors"].startswith(f"{c['gateway_errors']:,}")
        line = next(x for x in text.splitlines() if x.strip().startswith(c["conversation"]))
        assert f"; {account.sentence()};" in line
        assert f"gateway errors: {c['gateway_errors']:,}" in line

    # Gateway errors, in total and per conversation, on all three.
    assert totals["gateway_errors"] == 3
    assert "Gateway errors: 3." in text_of_page
    assert "gateway errors: 3 (timeout x1, unreachable x2)" in text
    assert sorted(c["gateway_errors"] for c in shown["traffic"]["conversations"]) == [0, 0, 1, 2]

    # TOMC's own count is labelled as such and never a second savings figure.
    for surface in (text_of_page, text):
        assert OWN_COUNT in surface
        assert "tokens saved" not in surface and "(estimated)" not in surface
    assert not keys_of(shown) & {"tokens_saved", "saved_share", "account", "tomc_tokens_saved"}
    live = shown["conversations"][0]
    assert live["tomc_tokens_before"] > live["tomc_tokens_after"] > 0
    assert set(live["tomc_cost_estimate"]) == {"sent", "direct", "cache_misses"}
    assert all("billed" not in header for header in Tables(page).headers[1])
    assert len(live_table) == 1 + len(shown["conversations"])


def test_the_realistic_status_renders_every_field_it_has():
    status = realistic_status()
    page = render_status_page(status)
    tables = Tables(page)
    for header, rows in zip(tables.headers, tables.tables, strict=True):
        for row in rows[1:]:
            assert list(row) == header  # every cell carries its header as its label
    assert "&lt;" not in page  # nothing to escape here, and nothing escaped twice


def test_the_page_shows_the_chart_and_figures_only(tmp_path, caplog):
    body = chat_agent_request(14)
    secret_text = body["messages"][1]["content"][:40]
    limit = int(request_tokens("chat", body) * 0.6)
    caplog.set_level(logging.INFO, logger="tomc")
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
    traffic = json.loads(status)["traffic"]
    # At --verbose the log has each request's provider side: what its cache read and wrote,
    # and its one "billed" figure (the session's own forecast says "TOMC's estimate").
    logged = [r.getMessage() for r in caplog.records if r.name.startswith("tomc")]
    assert any("provider counted 1,234 prompt tokens (1,200 read" in m for m in logged), logged
    billed = [m for m in logged if "billed" in m]
    assert len(billed) == traffic["totals"]["requests_with_usage"] == 3, logged
    assert all(re.search(r"\): billed input [\d,]+$", m) for m in billed), billed
    # (and request_tokens(), above, prepared one more in a session of its own)
    estimates = [m for m in logged if "TOMC's estimate so far" in m]
    assert len(estimates) >= 3 and not set(estimates) & set(billed)
    html_text = page.text
    assert '<svg xmlns="http://www.w3.org/2000/svg" class="savings-chart' in html_text
    assert "billed input (through TOMC)" in html_text and "estimated direct:" in html_text
    assert "Traffic and savings" in html_text and "Live conversations" in html_text
    assert f"Context target: {limit}." in html_text
    assert f'data-label="context target"><span class="v">{limit:,}</span>' in html_text
    # Each live conversation's latest request: TOMC's decision and time, the provider's figures.
    (chat,) = [c for c in json.loads(status)["conversations"] if c["api"] == "chat"]
    last = chat["last_request"]
    assert last["decision"] in ("compiled", "reused") and last["prepare_ms"] > 0
    assert last["provider"]["prompt_tokens"] == 1234
    assert last["provider"]["cache_read_tokens"] == 1200
    assert chat["tomc_cost_estimate"]["direct"] > chat["tomc_cost_estimate"]["sent"] > 0
    assert f"Savings: {Savings.of(traffic['totals']).sentence()}" in html_text
    assert traffic["totals"]["rewritten"] == 2
    for shown in (html_text, status):
        for secret in (SECRET, ANTHROPIC_SECRET, secret_text, "private words here"):
            assert secret not in shown
    assert "<script>" not in html_text and "&lt;script&gt;" in html_text  # escaped, never run
    assert "<link" not in html_text and " src=" not in html_text  # nothing fetched
