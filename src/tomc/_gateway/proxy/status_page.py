"""The gateway's ``GET /status`` page: plain HTML and one inline SVG chart, built here.

No script, one inline stylesheet (the inspector's look), nothing fetched: the page shows the
figures of ``Gateway.status()``. One account of savings, the usage ledger's (:mod:`.metering.
savings`): billed input against the estimated direct input, with the estimate's method one
click away; TOMC's own token counts are labelled as such and never shown as savings. Every value
is escaped; the status holds figures, conversation keys and model names, never message text or
credentials.

Layout: the tables fit the screen from about 1,200 pixels wide (no sideways scroll at 1280 or
1920); narrower, each row becomes a card with every field under its header's label. The chart
is drawn without a ``viewBox``, in percentages of its width, so its labels keep their size on a
phone instead of shrinking with the drawing.
"""

from __future__ import annotations

import html
import itertools
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .metering.savings import BILLED, DIRECT, METHOD_DOC, METHOD_TEXT, OWN_COUNT, UNITS, Savings

__all__ = ["render_status_page", "savings_chart"]

#: Below this width (1,200 px at the browser's default font size) the tables' rows become
#: cards: a 14-column table needs about that much.
_CARDS_BELOW = "75rem"
_TABLES_FROM = "75.0625rem"

#: The inspector's look (``tomc/web/static/style.css``: its palette and fonts), inline: the
#: page fetches nothing.
_STYLE = f"""
:root {{ --fg: #1b1f24; --muted: #4b5563; --bg: #f6f7f9; --panel: #fff; --line: #d0d5dd;
  --accent: #1d4ed8; --sans: system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans",
  "Liberation Sans", sans-serif; }}
* {{ box-sizing: border-box; }}
html {{ -webkit-text-size-adjust: 100%; text-size-adjust: 100%; }}
body {{ margin: 0; font: 15px/1.45 var(--sans); color: var(--fg); background: var(--bg); }}
main {{ margin: 0 auto; padding: 1rem 1.25rem 2rem; }}
h1 {{ font-size: 1.35rem; margin: 0 0 0.4rem; }}
h2 {{ font-size: 1.1rem; margin: 1.5rem 0 0.6rem; }}
p {{ margin: 0 0 0.6rem; max-width: 75rem; overflow-wrap: anywhere; }}
a {{ color: var(--accent); }}
small {{ color: var(--muted); }}
.account {{ font-size: 1.05rem; }}
details.method {{ margin: 0 0 0.8rem; max-width: 75rem; }}
details.method summary {{ cursor: pointer; color: var(--accent); }}
.panel {{ background: var(--panel); border: 1px solid var(--line); border-radius: 6px; }}
/* A last resort only: the columns are sized so that it never scrolls from 1,200 px. */
.table-wrap {{ overflow-x: auto; }}
table {{ border-collapse: collapse; width: 100%; font-size: 0.8rem; }}
th, td {{ text-align: left; padding: 0.35rem 0.25rem; border-bottom: 1px solid var(--line);
  vertical-align: top; }}
th {{ background: var(--bg); font-weight: 600; }}
.num {{ text-align: right; font-variant-numeric: tabular-nums; }}
td.num .v {{ white-space: nowrap; }}
td.num.time .v {{ white-space: normal; }}
.nw, td .v small.nw {{ white-space: nowrap; }}
td .v small {{ display: block; font-size: 0.75rem; white-space: normal; }}
/* Keys and model names: one line cut with an ellipsis (the whole in the title), never broken
   inside a word. */
.key, .model {{ display: block; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }}
.model {{ max-width: clamp(6rem, 11vw, 16rem); }}
@media (min-width: {_TABLES_FROM}) {{
  /* Chromium breaks at <wbr> even on a nowrap line: the break points are for cards only. */
  .key wbr, .model wbr {{ display: none; }}
  /* The key column takes what the figures leave (a fifth of the width, at least 9rem); the
     key asks for no width of its own, so a long one never widens the table. */
  th.wide {{ width: 20%; min-width: 9rem; }}
  .key {{ width: 0; min-width: 100%; }}
}}
svg.savings-chart {{ display: block; width: 100%; max-width: 56rem; margin: 0 0 1rem; }}
svg.savings-chart text {{ font-size: 12px; fill: var(--fg); }}
@media (max-width: {_CARDS_BELOW}) {{
  main {{ padding: 0.75rem; }}
  body {{ font-size: 14px; }}
  table.cards, table.cards tbody, table.cards tr, table.cards td {{ display: block; }}
  table.cards thead {{ position: absolute; width: 1px; height: 1px; overflow: hidden;
    clip-path: inset(50%); white-space: nowrap; }}
  table.cards tr {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(15rem, 1fr));
    column-gap: 1.5rem; padding: 0.5rem 0.75rem; border-bottom: 1px solid var(--line); }}
  table.cards td {{ display: flex; justify-content: space-between; align-items: baseline;
    gap: 0.75rem; padding: 0.2rem 0; border: 0; min-width: 0; }}
  table.cards td::before {{ content: attr(data-label); flex: 0 1 auto; text-align: left;
    font-weight: 600; color: var(--muted); }}
  table.cards td .v {{ min-width: 0; text-align: right; }}
  table.cards td.wide {{ grid-column: 1 / -1; display: block; }}
  table.cards td.wide::before {{ display: block; }}
  table.cards td.wide .v {{ text-align: left; }}
  /* In a card the key has the whole width: it breaks only after a separator. */
  table.cards .key, table.cards .model {{ max-width: none; white-space: normal; }}
}}
"""
_BILLED_COLOUR = "#1f77b4"
_DIRECT_COLOUR = "#d62728"
#: At most this many chart buckets are drawn as bars with their values; more, as lines.
_BAR_BUCKETS = 6
#: Where a key may break in a card: after one of these.
_SEPARATORS = re.compile(r"(?<=[/:|._@-])")


def _n(value: float | int | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _compact(value: float) -> str:
    """An axis label: 1.2M, 950K, 300."""
    for size, suffix in ((1e6, "M"), (1e3, "K")):
        if abs(value) >= size:
            return f"{value / size:.3g}{suffix}"
    return f"{value:.0f}"


def _when(stamp: float | None) -> str:
    if stamp is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(stamp))


def _e(value: object) -> str:
    return html.escape(str(value))


def _key(value: object, kind: str = "key") -> str:
    """A conversation key (or model name) that is cut with an ellipsis on one line, or breaks
    only after a separator in a card, never inside a word."""
    text = str(value)
    parts = "<wbr>".join(_e(part) for part in _SEPARATORS.split(text))
    return f'<span class="{kind}" title="{_e(text)}">{parts}</span>'


# ---------------------------------------------------------------------- chart


def _legend(y: int, colour: str, dashed: bool, label: str) -> str:
    dash = ' stroke-dasharray="6 4"' if dashed else ""
    return (
        f'<line x1="0" y1="{y - 4}" x2="24" y2="{y - 4}" stroke="{colour}" stroke-width="3"'
        f"{dash}/>"
        f'<text x="30" y="{y}">{_e(label)}</text>'
    )


def _bars(buckets: Sequence[tuple[float, int, float, float]], peak: float) -> tuple[str, int]:
    """A short session: each bucket's billed and direct input as two bars with their values."""
    parts, y = [], 4
    for end, requests, billed, direct in buckets:
        label = f"up to {_when(end)}: {requests:,} request{'s' if requests != 1 else ''}"
        parts.append(f'<text x="0" y="{y + 12}">{_e(label)}</text>')
        for offset, kind, value, colour in (
            (18, "billed", billed, _BILLED_COLOUR),
            (36, "direct", direct, _DIRECT_COLOUR),
        ):
            # Half the width at most: the value is written after the bar, on the same line.
            width = max(value / peak * 55, 0.3)
            parts.append(
                f'<rect class="{kind}" x="0" y="{y + offset}" width="{width:.2f}%" height="14"'
                f' fill="{colour}"/>'
                f'<text class="value {kind}" x="{width:.2f}%" dx="6" y="{y + offset + 11}">'
                f"{_n(value)}</text>"
            )
        y += 60
    return "".join(parts), y


def _lines(series: Sequence[Mapping[str, Any]], peak: float) -> tuple[str, int]:
    """A longer session: cumulative billed and direct input over time, two lines."""
    top, plot_h, left, right = 10, 160, 12.0, 98.0
    t0, t1 = float(series[0]["t"]), float(series[-1]["t"])
    span = max(t1 - t0, 1.0)

    def points(key: str) -> str:
        # In the inner drawing's own 1000 x 1000 units, stretched to the plot's box.
        return " ".join(
            f"{(float(p['t']) - t0) / span * 1000:.1f},{1000 - float(p[key]) / peak * 1000:.1f}"
            for p in series
        )

    parts = []
    for fraction in (0.0, 0.5, 1.0):
        y = top + plot_h - fraction * plot_h
        parts.append(
            f'<line x1="{left}%" y1="{y:.1f}" x2="{right}%" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text x="{left}%" dx="-6" y="{y + 4:.1f}" text-anchor="end">'
            f"{_compact(peak * fraction)}</text>"
        )
    base = top + plot_h
    parts.append(
        f'<svg x="{left}%" y="{top}" width="{right - left}%" height="{plot_h}"'
        ' viewBox="0 0 1000 1000" preserveAspectRatio="none">'
        f'<polyline class="direct" fill="none" stroke="{_DIRECT_COLOUR}" stroke-width="2"'
        f' stroke-dasharray="6 4" vector-effect="non-scaling-stroke"'
        f' points="{points("direct_input")}"/>'
        f'<polyline class="billed" fill="none" stroke="{_BILLED_COLOUR}" stroke-width="2"'
        f' vector-effect="non-scaling-stroke" points="{points("billed_input")}"/></svg>'
        f'<line x1="{left}%" y1="{base}" x2="{right}%" y2="{base}" stroke="#888"/>'
        f'<text x="{left}%" y="{base + 16}">{_e(_when(t0))}</text>'
        f'<text x="{right}%" y="{base + 16}" text-anchor="end">{_e(_when(t1))}</text>'
    )
    return "".join(parts), base + 24


def savings_chart(series: Sequence[Mapping[str, Any]]) -> str:
    """An inline SVG of billed input through TOMC against the estimated direct input, over time
    (``series``: cumulative points with ``t``, ``requests``, ``billed_input`` and
    ``direct_input``, the first one what came before).

    A short session (at most six buckets of time) is drawn as bars per bucket with their
    values; a longer one as two cumulative lines. Either way the legend gives the totals, and
    the labels are 12 px at any width (no ``viewBox``: positions are percentages)."""
    if len(series) < 2:
        return (
            "<p>No usage reported by the provider yet: the chart starts with the first answer.</p>"
        )
    buckets = [
        (
            float(now["t"]),
            int(now.get("requests", 0)) - int(before.get("requests", 0)),
            float(now["billed_input"]) - float(before["billed_input"]),
            float(now["direct_input"]) - float(before["direct_input"]),
        )
        for before, now in itertools.pairwise(series)
    ]
    last = series[-1]
    if len(buckets) <= _BAR_BUCKETS:
        peak = max(max(b[2], b[3]) for b in buckets) or 1.0
        drawing, y = _bars(buckets, peak)
        kind = "bars"
    else:
        peak = max(max(float(p["direct_input"]), float(p["billed_input"])) for p in series)
        drawing, y = _lines(series, peak or 1.0)
        kind = "lines"
    savings = Savings.of(last)
    billed = f"{BILLED} (through TOMC): {_n(savings.billed_input)}"
    direct = f"{DIRECT}: {_n(savings.direct_input)}"
    height = y + 44
    title = f"{savings.sentence()} ({UNITS})"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="savings-chart {kind}" width="100%"'
        f' height="{height}" role="img" aria-label="{_e(title)}" font-family="sans-serif"'
        f' font-size="12"><title>{_e(title)}</title>{drawing}'
        f"{_legend(y + 16, _BILLED_COLOUR, False, billed)}"
        f"{_legend(y + 36, _DIRECT_COLOUR, True, direct)}</svg>"
    )


# ---------------------------------------------------------------------- tables


@dataclass(frozen=True)
class _Column:
    """A table column: its header (also each card field's label) and how it is aligned
    (``num``: right, tabular figures; ``wide``: the whole width of a card)."""

    label: str
    kind: str = ""


def _table(columns: Sequence[_Column], rows: Sequence[Sequence[str]], empty: str) -> str:
    """A table whose cells are already HTML; every cell carries its header as ``data-label``,
    which a card shows beside the value."""
    head = "".join(f'<th scope="col" class="{c.kind}">{_e(c.label)}</th>' for c in columns)
    body = []
    for row in rows:
        cells = "".join(
            f'<td class="{c.kind}" data-label="{_e(c.label)}"><span class="v">{value}</span></td>'
            for c, value in zip(columns, row, strict=True)
        )
        body.append(f"<tr>{cells}</tr>")
    if not body:
        body.append(
            f'<tr><td colspan="{len(columns)}" class="wide"><span class="v">{_e(empty)}</span>'
            "</td></tr>"
        )
    return (
        f'<div class="panel table-wrap"><table class="cards"><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


def _with_note(main: str, note: str, *, wraps: bool = True) -> str:
    """A figure with a smaller line under it (``wraps``: a list that may take several lines)."""
    if not note:
        return main
    # The space keeps the two apart in the text (copied, or read aloud); the note is a block.
    return f"{main} <small>{note}</small>" if wraps else f'{main} <small class="nw">{note}</small>'


def _time(stamp: float | None) -> str:
    """A date and time that may go on two lines, never breaking inside the date."""
    return "".join(f'<span class="nw">{_e(part)}</span> ' for part in _when(stamp).split()).strip()


def _counted(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{_e(name)} ×{count:,}" for name, count in counts.items())


_TRAFFIC_COLUMNS = (
    _Column("conversation", "wide"),
    _Column("model, API"),
    _Column("requests, rewritten", "num"),
    _Column(f"{OWN_COUNT}, before → after", "num"),
    _Column("provider prompt tokens", "num"),
    _Column(BILLED, "num"),
    _Column(DIRECT, "num"),
    _Column("saved", "num"),
    _Column("thinking dropped", "num"),
    _Column("upstream errors", "num"),
    _Column("gateway errors", "num"),
    _Column("last seen", "num time"),
)


def _traffic_row(c: Mapping[str, Any]) -> list[str]:
    savings = Savings.of(c)
    upstream = c.get("upstream_errors") or {}
    kinds = c.get("gateway_error_kinds") or {}
    return [
        _key(c["conversation"]),
        _with_note(_key(c["model"], "model"), _e(c["api"])),
        _with_note(_n(c["requests"]), f"{_n(c['rewritten'])} rewritten", wraps=False),
        _with_note(_n(c["tomc_tokens_before"]), f"→ {_n(c['tomc_tokens_after'])}", wraps=False),
        _with_note(
            _n(c["prompt_tokens"]),
            f"{_n(c['cache_read_tokens'])} read, {_n(c['cache_write_tokens'])} written",
        ),
        _n(savings.billed_input),
        _n(savings.direct_input),
        _with_note(_n(savings.saved), f"{savings.share:.0%}"),
        _n(c["thinking_dropped"]),
        _with_note(_n(sum(upstream.values())), _counted(upstream)),
        _with_note(_n(c.get("gateway_errors", 0)), _counted(kinds)),
        _time(c["last_at"]),
    ]


def _account(traffic: Mapping[str, Any] | None) -> str:
    """The page's headline: the one account of savings, and how its direct figure is had."""
    if traffic is None:
        return "<p class=account>Savings: the usage ledger could not be read (see the log).</p>"
    totals = traffic["totals"]
    return f"""<p class="account"><strong>Savings: {_e(Savings.of(totals).sentence())}</strong>
since {_time(traffic.get("since"))}, over {totals["requests_with_usage"]:,} answers whose
usage the provider reported. Gateway errors: {totals.get("gateway_errors", 0):,}.
<small>In {UNITS}.</small></p>
<details class="method" id="method"><summary>How the {DIRECT} figure is had</summary>
<p>{_e(METHOD_TEXT)}</p><p><small>In full: <code>{_e(METHOD_DOC)}</code> (the section
"Billed input and the direct estimate" of the gateway's documentation).</small></p></details>"""


def _traffic_section(traffic: Mapping[str, Any] | None) -> str:
    if traffic is None:
        return "<h2>Traffic</h2><p>The usage ledger could not be read (see the gateway log).</p>"
    totals = traffic["totals"]
    where = (
        f"kept in {_e(traffic['ledger'])}"
        if traffic.get("ledger")
        else "kept in memory only (no TOMC home, or the file could not be opened)"
    )
    upstream = _counted(totals["upstream_errors"]) or "none"
    gateway = _counted(totals.get("gateway_error_kinds") or {})
    rows = [_traffic_row(c) for c in traffic["conversations"]]
    return f"""<h2>Traffic and savings (kept across restarts)</h2>
<p>Since {_time(traffic.get("since"))}, {where}:
{totals["requests"]:,} requests in {totals["conversations"]:,} conversations,
{totals["rewritten"]:,} rewritten by TOMC. The provider reported {_n(totals["prompt_tokens"])}
prompt tokens ({_n(totals["cache_read_tokens"])} cache reads, {_n(totals["cache_write_tokens"])}
cache writes) and {_n(totals["output_tokens"])} output tokens over
{totals["requests_with_usage"]:,} answers. {OWN_COUNT} of the prompts:
{_n(totals["tomc_tokens_before"])} → {_n(totals["tomc_tokens_after"])} tokens before and after
its rewrites (its tokenizer's estimate, not a bill). Thinking blocks dropped by the provider:
{totals["thinking_dropped"]:,}. Upstream errors: {upstream}. Gateway errors:
{totals.get("gateway_errors", 0):,}{f" ({gateway})" if gateway else ""}.</p>
{savings_chart(traffic.get("series") or [])}
{_table(_TRAFFIC_COLUMNS, rows, "nothing recorded yet")}"""


_LIVE_COLUMNS = (
    _Column("conversation", "wide"),
    _Column("model, API"),
    _Column("context target", "num"),
    _Column("requests", "num"),
    _Column("rebuilds", "num"),
    _Column(f"{OWN_COUNT}, before → after", "num"),
    _Column("decisions"),
    _Column("gateway errors", "num"),
    _Column("idle", "num"),
)


def _live_row(c: Mapping[str, Any]) -> list[str]:
    decisions = ", ".join(f"{_e(code)} {n:,}" for code, n in c["decisions"].items())
    target = c.get("context_target")
    return [
        _key(c["conversation"]),
        _with_note(_key(c["model"], "model"), _e(c["api"])),
        _n(target) if target else "none",
        _n(c["requests"]),
        _n(c["rebuilds"]),
        _with_note(_n(c["tomc_tokens_before"]), f"→ {_n(c['tomc_tokens_after'])}", wraps=False),
        decisions or "-",
        _n(c.get("gateway_errors", 0)),
        f"{c['idle_s']:,.0f} s",
    ]


def _live(c: Mapping[str, Any]) -> Mapping[str, Any]:
    """A live conversation under the status names, also when handed the store's own figures
    (``tokens_without_tomc`` / ``tokens_sent``)."""
    if "tomc_tokens_before" in c:
        return c
    return {
        **c,
        "tomc_tokens_before": c.get("tokens_without_tomc", 0),
        "tomc_tokens_after": c.get("tokens_sent", 0),
    }


def render_status_page(status: Mapping[str, Any]) -> str:
    """The whole page for one ``Gateway.status()``."""
    rows = [_live_row(_live(c)) for c in status["conversations"]]
    upstreams = ", ".join(f"{_e(k)}: {_e(v)}" for k, v in status["upstreams"].items())
    traffic = status.get("traffic")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>TOMC gateway</title><style>{_STYLE}</style></head><body><main>
<h1>TOMC gateway</h1>
<p>Version {_e(status["version"])}, port {status["port"]}, up {status["uptime_s"]:,.0f} s,
{status["requests"]:,} requests this run. Upstreams: {upstreams}.
Context target: {_e(status.get("context_target", "per agent default"))}.
<a href="status.json">JSON</a></p>
{_account(traffic)}
{_traffic_section(traffic)}
<h2>Live conversations (this run)</h2>
<p>What each conversation's session decided in this gateway, with {OWN_COUNT} of its prompts
before and after (not a bill): the billed figures are the ledger's, above.</p>
{_table(_LIVE_COLUMNS, rows, "no conversations yet")}
</main></body></html>
"""
