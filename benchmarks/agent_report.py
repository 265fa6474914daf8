"""Markdown for the long-agent-loop replay: one table per window, decisions, calibration."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from benchmarks import trajectories as tj

if TYPE_CHECKING:
    from benchmarks.agent_replay import Report

_HEADER = (
    "| method | requests | over window | max prompt | evidence kept | at edit requests "
    "| at patched-file edits | OpenAI billed | vs sliding | vs full | Anthropic billed "
    "| vs sliding | vs full | rebuilds (chunked: cuts) / request | overhead ms p50 / p95 / max |\n"
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
)


def markdown(report: Report) -> str:
    from benchmarks.agent_replay import COUNT_NOTE

    data = report.data
    lines = [
        f"{data['trajectories']} trajectories, {data['requests']:,} requests (request k = "
        "`messages[:k]` for every assistant message k), replayed at each window with "
        f"{report.reserve:,} tokens reserved for output: a request is over the window when its "
        f"prompt exceeds window - {report.reserve:,}. {COUNT_NOTE}",
        "",
    ]
    rows = report.rows()
    for window in report.windows:
        lines += [
            f"### Window {window:,} (prompt budget {window - report.reserve:,})",
            "",
            _HEADER,
        ]
        for row in (r for r in rows if r["window"] == window):
            lines.append(_row(row))
        tomc = next((r for r in rows if r["window"] == window and r["method"] == "tomc"), None)
        if tomc:
            lines += ["", *_decisions(tomc)]
        lines.append("")
        dialect_rows = [r for r in report.dialect_rows() if r["window"] == window]
        if dialect_rows:
            lines += _dialects(window, dialect_rows)
    lines += _notes(report)
    lines += ["", "#### Calibration: o200k against the lexical estimate", ""]
    lines += _calibration(report.calibration)
    return "\n".join(lines) + "\n"


def _share(evidence: dict[str, int]) -> str:
    kept, available = evidence["kept"], evidence["available"]
    return f"{kept / available:.1%} of {available:,}" if available else "-"


def _ratio(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def _row(row: dict[str, Any]) -> str:
    overhead = row["overhead_ms"]
    rebuilds = (
        f"{row['rebuilds_per_request']:.3f}" if row["rebuilds"] or row["method"] == "tomc" else "-"
    )
    return (
        f"| {row['method']} | {row['requests']:,} | {row['over_window']:,} "
        f"| {row['max_prompt']:,} / {row['window']:,} "
        f"| {_share(row['evidence']['all'])} | {_share(row['evidence']['edit'])} "
        f"| {_share(row['evidence']['patched_edit'])} "
        f"| {row['openai_billed']:,.0f} | {_ratio(row['openai_vs_sliding'])} "
        f"| {_ratio(row['openai_vs_full'])} "
        f"| {row['anthropic_billed']:,.0f} | {_ratio(row['anthropic_vs_sliding'])} "
        f"| {_ratio(row['anthropic_vs_full'])} | {rebuilds} "
        f"| {overhead.get('p50', 0):.2f} / {overhead.get('p95', 0):.2f} "
        f"/ {overhead.get('max', 0):.2f} |"
    )


_DIALECT_HEADER = (
    "| dialect | over window | evidence kept: all / at edits / at patched-file edits "
    "| OpenAI billed | Anthropic billed | rebuilds / request | decisions by code "
    "| prepare ms p50 / p95 |\n"
    "|---|--:|--:|--:|--:|--:|---|--:|"
)


def _dialects(window: int, rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        f"#### `tomc` in each wire format, window {window:,}",
        "",
        _DIALECT_HEADER,
    ]
    for row in rows:
        evidence = " / ".join(_share(row["evidence"][scope]) for scope in row["evidence"])
        overhead = row["overhead_ms"]
        lines.append(
            f"| {row['dialect']} | {row['over_window']:,} | {evidence} "
            f"| {row['openai_billed']:,.0f} | {row['anthropic_billed']:,.0f} "
            f"| {row['rebuilds_per_request']:.3f} | {_counts(row.get('reasons', {}))} "
            f"| {overhead.get('p50', 0):.2f} / {overhead.get('p95', 0):.2f} |"
        )
    lines.append("")
    invalid = {row["dialect"]: row["invalid_rewrites"] for row in rows}
    for row in rows:
        comparison = row.get("matches_chat")
        if comparison is not None:
            lines.append(f"- {row['dialect']}: {_match(comparison)}")
    lines.append(
        "- Rewritten requests that fail their format's `validate()`: "
        + ", ".join(f"{dialect} {count:,}" for dialect, count in invalid.items())
        + "."
    )
    return [*lines, ""]


def _match(comparison: dict[str, Any]) -> str:
    if comparison["identical"]:
        return (
            f"the same figures as chat: all {comparison['requests']:,} requests got the same "
            "decision, sent the same prompt and kept the same evidence."
        )
    delta = comparison["estimate_delta"]
    first = comparison["first"]
    straddled = sum(
        1 for f in first if {f["chat"], f[comparison["dialect"]]} == {"fits", "compiled"}
    )
    return (
        f"differs from chat in {len(comparison['trajectories'])} trajectories: "
        f"{comparison['other_decision']:,} of {comparison['requests']:,} requests got another "
        f"decision ({_counts(comparison['transitions'])}), "
        f"{comparison['other_prompt']:,} sent a different number of tokens, "
        f"{comparison['other_evidence']:,} kept a different number of evidence lines. "
        "The session's own count of the unchanged request minus chat's: "
        f"min {delta['min']:+,}, median {delta['median']:+,}, max {delta['max']:+,} tokens; "
        f"{straddled} of the {len(first)} first divergences are fits against compiled."
    )


def _counts(counts: dict[str, int]) -> str:
    ordered = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return ", ".join(f"{name} {count:,}" for name, count in ordered) or "none"


def _decisions(row: dict[str, Any]) -> list[str]:
    estimate = row.get("estimate_ratio") or {}
    return [
        f"`tomc` decisions: {_counts(row['actions'])}. By reason: {_counts(row['reasons'])}. "
        f"Its {row['over_window']:,} requests over the window, by reason: "
        f"{_counts(row['over_window_reasons'])}. "
        "o200k count of the unchanged request / the session's own estimate "
        f"(`Decision.tokens_before`): p50 {estimate.get('p50', 0):.3f}, "
        f"p95 {estimate.get('p95', 0):.3f}, max {estimate.get('max', 0):.3f}."
    ]


def _notes(report: Report) -> list[str]:
    data = report.data
    low, high = data["full_history_tokens"]
    return [
        "Notes:",
        "",
        f"- Data: `{data['path']}`; {data['messages']:,} messages; whole trajectories are "
        f"{low:,}-{high:,} prompt tokens; {data['with_reasoning_content']} trajectory carries "
        "`reasoning_content` fields (counted as sent).",
        f"- Evidence: {data['evidence_lines']} lines removed by the final patches "
        f"(stripped, at least 8 characters, deduplicated per trajectory), "
        f"{data['evidence_shown']} of them shown by an earlier tool output. For request k, "
        "*available* = lines a tool message before k showed; *kept* = available lines that are "
        "a substring of any message sent (a TOMC memory included). Figures are summed over "
        "requests.",
        f"- Edit requests ({data['edit_requests']:,}; the data set's own `file_edits` sums to "
        f"{data['recorded_file_edits']:,}): the reply runs a command that writes a file: "
        "`sed -i`/`perl -i`, `>`/`>>` into anything but /dev/null (heredoc bodies and quoted "
        "strings ignored), `tee`, `cp`, `mv`, `patch`, `git apply`, `str_replace`, or Python that "
        "opens a file for writing. Test scripts count too; *patched-file edits* "
        f"({data['patched_edit_requests']:,}) are the edit requests whose command names a file "
        "the final patch changes.",
        "- `sliding`: system + task + the newest whole tool groups that fit, re-cut every "
        "request. `chunked`: on overflow, drop the oldest whole groups until the request fills "
        "at most half the prompt budget, and keep that first group until it overflows again. "
        "Both always keep the newest group; a `chunked` cut is a full cache miss, like a TOMC "
        "rebuild, and is counted in the rebuilds column. `tomc`: `AutomaticChatSession("
        'deployment_context_limit=W).prepare(model="replay", ..., options={"tools": ..., '
        '"max_tokens": reserve})`, one session per trajectory, fed the o200k prompt size back '
        "as `usage` after each request, as `create` does.",
        "- Billed input: `tomc._simulation.simulate._Pricer` fed with these counts, the tool "
        "schemas first in the prefix chain (providers place tools before messages); billed-input "
        "equivalents (1.0 = one uncached input token), not invoices. Overhead: wall time of "
        "each method's call (for `tomc`, `prepare`), on a shared 2-core machine.",
        f"- Framing constants: {tj.MESSAGE_FRAMING} per message, {tj.NAME_FRAMING} per name, "
        f"{tj.TOOL_CALL_FRAMING} per tool call, {tj.REPLY_PRIMING} reply priming. Whole run "
        f"{report.seconds:.0f} s.",
        *_dialect_notes(report),
    ]


def _dialect_notes(report: Report) -> list[str]:
    if not report.dialects:
        return []
    notes = [
        f"{dialect}: " + "; ".join(found)
        for dialect, found in report.conversion_notes.items()
        if found
    ]
    return [
        "- Wire formats (`--dialects`): the `tomc` method again, each request converted by "
        "`benchmarks/dialect_convert.py` to Anthropic Messages (`system` string, content blocks, "
        "`tool_use` with parsed arguments, one user message of `tool_result` blocks per run of "
        "results, `max_tokens`) or OpenAI Responses (`instructions`, `message` items, "
        "`function_call` / `function_call_output` items, `max_output_tokens`), with "
        "`reasoning_content` as a `thinking` block (placeholder signature) or a `reasoning` "
        "item; the same session setup and `prepare_request(body, api=dialect)`. What it sends "
        "is read back into Chat messages (a TOMC memory item included) and measured with the "
        "same counts, so every column means the same in every format; `chat` is the `tomc` "
        "row above. Prepare ms is `prepare_request` alone, conversion excluded. Conversion "
        f"notes: {'; '.join(notes) if notes else 'none (every request converted exactly)'}.",
        *(_CAUSES if any(not c.identical for c in report.comparisons.values()) else []),
    ]


_CAUSES = [
    "- Why a format can differ from chat, as found when this comparison was added (a replay "
    "with the session's per-item counts and `keep_recent_messages` patched to chat's units "
    "matched chat exactly in Responses and everywhere but `thinking_bound` in Messages, at "
    "every window): (1) the session's own count of a request depends on its format, since each "
    "dialect counts other text for the same content (a tool result as id then text or text then "
    "id; the system prompt as an item or inside the JSON of `system` and the tools; the tool "
    "schemas in each format's JSON; a Responses assistant turn with text as two items, each with "
    "its framing constant), so a request near the fit limit, a budget share or the reuse limit "
    "lands on the other side; (2) `keep_recent_messages` counts items, and a Responses turn is "
    "up to three (message, `function_call`, `function_call_output`) where chat has two "
    "messages, so fewer recent steps stay raw and one more tool call is compiled; (3) the "
    "trajectory with `reasoning_content` carries it as signed `thinking` blocks, which Anthropic "
    "binds to the prefix before them: by default such a rewrite passes through "
    "(`thinking_bound`), over the window when the window is small.",
]


def _calibration(cal: dict[str, Any]) -> list[str]:
    def cells(quantiles: dict[str, float]) -> str:
        return " | ".join(
            f"{quantiles[name]:.3f}" if name in quantiles else "-"
            for name in ("p50", "p95", "p99", "p99.9", "max")
        )

    overall = cal["text_o200k_over_lexical"]
    return [
        "| unit | count | p50 | p95 | p99 | p99.9 | max |",
        "|---|--:|--:|--:|--:|--:|--:|",
        f"| message (text only) | {cal['messages']:,} | {cells(cal['message_ratio'])} |",
        f"| request (framing and tools on both sides) | {cal['requests']:,} "
        f"| {cells(cal['request_ratio'])} |",
        "",
        f"All message text: o200k / lexical = {overall:.3f}. The smallest factor f with "
        f"f x lexical >= o200k is {cal['factor_all_requests']:.3f} for every request and "
        f"{cal['factor_999_messages']:.3f} for 99.9% of messages (ratios of short messages "
        "spread widest).",
    ]
