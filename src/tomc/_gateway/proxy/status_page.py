"""The gateway's ``GET /status`` page: plain HTML and one inline SVG chart, built here.

No script, one inline stylesheet (the inspector's look), nothing fetched: the page shows the
figures of ``Gateway.status()`` (live conversations, and the usage ledger's totals, recent
conversations and cumulative billed input against the direct estimate). Every value is
escaped; the status holds figures, conversation keys and model names, never message text or
credentials.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["render_status_page", "savings_chart"]

#: The inspector's look (``tomc/web/static/style.css``: its palette and fonts), inline: the
#: page fetches nothing. Wide tables scroll sideways on a phone instead of squeezing.
_STYLE = """
:root { --fg: #1b1f24; --muted: #4b5563; --bg: #f6f7f9; --panel: #fff; --line: #d0d5dd;
  --accent: #1d4ed8; --sans: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans",
  "Liberation Sans", sans-serif; }
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; text-size-adjust: 100%; }
body { margin: 0; font: 15px/1.45 var(--sans); color: var(--fg); background: var(--bg); }
main { max-width: 80rem; margin: 0 auto; padding: 1rem 1.25rem 2rem; overflow-wrap: anywhere; }
h1 { font-size: 1.35rem; margin: 0 0 0.4rem; }
h2 { font-size: 1.1rem; margin: 1.5rem 0 0.6rem; }
p { margin: 0 0 0.6rem; }
a { color: var(--accent); }
small { color: var(--muted); }
.scroll { overflow-x: auto; background: var(--panel); border: 1px solid var(--line);
  border-radius: 6px; }
table { border-collapse: collapse; width: 100%; font-size: 0.9rem; }
th, td { text-align: left; padding: 0.35rem 0.6rem; border-bottom: 1px solid var(--line);
  vertical-align: top; }
th { background: var(--bg); font-weight: 600; white-space: nowrap; }
td { white-space: nowrap; }
td:first-child { white-space: normal; overflow-wrap: anywhere; min-width: 10rem; }
svg.savings-chart { max-width: 100%; height: auto; background: var(--panel);
  border: 1px solid var(--line); border-radius: 6px; }
@media (max-width: 40rem) { main { padding: 0.75rem; } body { font-size: 14px; } }
"""
_BILLED_COLOUR = "#1f77b4"
_DIRECT_COLOUR = "#d62728"


def _n(value: float | int | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def _e(value: object) -> str:
    return html.escape(str(value))


def savings_chart(
    series: Sequence[Mapping[str, Any]], *, width: int = 640, height: int = 240
) -> str:
    """An inline SVG of cumulative billed input through TOMC against the estimated direct
    cost, over time (``series``: points with ``t``, ``billed_input`` and ``direct_input``)."""
    if len(series) < 2:
        return (
            "<p>No usage reported by the provider yet: the chart starts with the first answer.</p>"
        )
    left, right, top, bottom = 70, 12, 14, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    t0, t1 = float(series[0]["t"]), float(series[-1]["t"])
    span = max(t1 - t0, 1.0)
    peak = max(max(float(p["direct_input"]), float(p["billed_input"])) for p in series) or 1.0

    def xy(point: Mapping[str, Any], key: str) -> str:
        x = left + (float(point["t"]) - t0) / span * plot_w
        y = top + plot_h - float(point[key]) / peak * plot_h
        return f"{x:.1f},{y:.1f}"

    billed = " ".join(xy(p, "billed_input") for p in series)
    direct = " ".join(xy(p, "direct_input") for p in series)
    last = series[-1]
    saved = float(last["direct_input"]) - float(last["billed_input"])
    title = (
        f"Cumulative billed input: {_n(last['billed_input'])} through TOMC, "
        f"{_n(last['direct_input'])} estimated direct ({_n(saved)} saved)"
    )
    ticks = []
    for fraction in (0.0, 0.5, 1.0):
        y = top + plot_h - fraction * plot_h
        ticks.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_n(peak * fraction)}</text>'
        )
    base = top + plot_h
    return f"""<svg xmlns="http://www.w3.org/2000/svg" class="savings-chart" width="{width}"
 height="{height}" viewBox="0 0 {width} {height}" role="img" font-family="sans-serif"
 font-size="11"><title>{_e(title)}</title>
{"".join(ticks)}
<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" stroke="#888"/>
<line x1="{left}" y1="{base}" x2="{left + plot_w}" y2="{base}" stroke="#888"/>
<polyline class="direct" fill="none" stroke="{_DIRECT_COLOUR}" stroke-width="2"
 stroke-dasharray="6 4" points="{direct}"/>
<polyline class="billed" fill="none" stroke="{_BILLED_COLOUR}" stroke-width="2"
 points="{billed}"/>
<text x="{left}" y="{height - 22}">{_e(_when(t0))}</text>
<text x="{left + plot_w}" y="{height - 22}" text-anchor="end">{_e(_when(t1))}</text>
<line x1="{left}" y1="{height - 8}" x2="{left + 24}" y2="{height - 8}"
 stroke="{_BILLED_COLOUR}" stroke-width="2"/>
<text x="{left + 30}" y="{height - 4}">billed through TOMC</text>
<line x1="{left + 170}" y1="{height - 8}" x2="{left + 194}" y2="{height - 8}"
 stroke="{_DIRECT_COLOUR}" stroke-width="2" stroke-dasharray="6 4"/>
<text x="{left + 200}" y="{height - 4}">estimated direct</text>
</svg>"""


def _errors(errors: Mapping[str, int]) -> str:
    return ", ".join(f"{status} ×{count}" for status, count in errors.items()) or "none"


def _account(account: Mapping[str, Any] | None) -> str:
    """A conversation's cost account: billed against direct, in the session's own estimates."""
    if not account or not account.get("direct"):
        return "-"
    return (
        f"{_n(account['billed'])} vs {_n(account['direct'])} "
        f"({account['billed'] / account['direct']:.2f}x)"
    )


def _row(values: Sequence[object]) -> str:
    return "<tr>" + "".join(f"<td>{_e(v)}</td>" for v in values) + "</tr>"


def _traffic_section(traffic: Mapping[str, Any] | None) -> str:
    if traffic is None:
        return "<h2>Traffic</h2><p>The usage ledger could not be read (see the gateway log).</p>"
    totals = traffic["totals"]
    where = (
        f"kept in {_e(traffic['ledger'])}"
        if traffic.get("ledger")
        else "kept in memory only (no TOMC home, or the file could not be opened)"
    )
    rows = []
    for c in traffic["conversations"]:
        rows.append(
            _row(
                (
                    c["conversation"],
                    c["api"],
                    c["model"],
                    c["requests"],
                    c["rewritten"],
                    f"{_n(c['tomc_tokens_before'])} → {_n(c['tomc_tokens_after'])}",
                    f"{_n(c['prompt_tokens'])} ({_n(c['cache_read_tokens'])} read, "
                    f"{_n(c['cache_write_tokens'])} written)",
                    _n(c["billed_input"]),
                    _n(c["direct_input"]),
                    f"{_n(c['billed_saved'])} ({c['billed_saved_share']:.0%})",
                    c["thinking_dropped"],
                    _errors(c["upstream_errors"]),
                    _when(c["last_at"]),
                )
            )
        )
    table = "".join(rows) or '<tr><td colspan="13">nothing recorded yet</td></tr>'
    return f"""<h2>Traffic and savings (kept across restarts)</h2>
<p>Since {_e(_when(traffic.get("since")))}, {where}:
{totals["requests"]:,} requests in {totals["conversations"]:,} conversations,
{totals["rewritten"]:,} rewritten by TOMC;
TOMC's count {_n(totals["tomc_tokens_before"])} → {_n(totals["tomc_tokens_after"])} tokens.
The provider reported {_n(totals["prompt_tokens"])} prompt tokens
({_n(totals["cache_read_tokens"])} cache reads, {_n(totals["cache_write_tokens"])} cache writes)
and {_n(totals["output_tokens"])} output tokens over {totals["requests_with_usage"]:,} answers.</p>
<p><strong>Billed input {_n(totals["billed_input"])} through TOMC against
{_n(totals["direct_input"])} estimated direct: {_n(totals["billed_saved"])} saved
({totals["billed_saved_share"]:.0%}).</strong> Thinking blocks dropped by the provider:
{totals["thinking_dropped"]:,}. Upstream errors: {_e(_errors(totals["upstream_errors"]))}.</p>
<p><small>Billed input is in uncached-input-token equivalents, not money: Anthropic input +
1.25 &times; cache writes + 0.1 &times; cache reads; OpenAI uncached input + 0.1 &times; cached.
The direct figure is an estimate for rewritten requests (see the README).</small></p>
{savings_chart(traffic.get("series") or [])}
<div class="scroll"><table><tr><th>conversation</th><th>API</th><th>model</th>
<th>requests</th><th>rewritten</th><th>TOMC tokens before → after</th>
<th>provider prompt tokens</th><th>billed input</th><th>direct (est.)</th><th>saved</th>
<th>thinking dropped</th><th>upstream errors</th><th>last seen</th></tr>
{table}</table></div>"""


def render_status_page(status: Mapping[str, Any]) -> str:
    """The whole page for one ``Gateway.status()``."""
    rows = []
    for c in status["conversations"]:
        decisions = ", ".join(f"{code} {n}" for code, n in c["decisions"].items())
        rows.append(
            _row(
                (
                    c["conversation"],
                    c["api"],
                    c["model"],
                    f"{c['context_target']:,}" if c.get("context_target") else "none",
                    c["requests"],
                    c["rebuilds"],
                    f"{c['tokens_saved']:,} ({c['saved_share']:.0%})",
                    _account(c.get("account")),
                    decisions,
                    f"{c['idle_s']:.0f} s",
                )
            )
        )
    table = "".join(rows) or '<tr><td colspan="10">no conversations yet</td></tr>'
    upstreams = ", ".join(f"{_e(k)}: {_e(v)}" for k, v in status["upstreams"].items())
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>TOMC gateway</title><style>{_STYLE}</style></head><body><main>
<h1>TOMC gateway</h1>
<p>Version {_e(status["version"])}, port {status["port"]}, up {status["uptime_s"]:.0f} s,
{status["requests"]:,} requests, {status["tokens_saved"]:,} prompt tokens saved (estimated).
Upstreams: {upstreams}. Context target: {_e(status.get("context_target", "per agent default"))}.
<a href="status.json">JSON</a></p>
{_traffic_section(status.get("traffic"))}
<h2>Live conversations (this run)</h2>
<div class="scroll"><table><tr><th>conversation</th><th>API</th><th>model</th>
<th>context target</th><th>requests</th><th>rebuilds</th><th>tokens saved</th>
<th>billed vs direct (TOMC's estimate)</th><th>decisions</th><th>idle</th></tr>
{table}</table></div></main></body></html>
"""
