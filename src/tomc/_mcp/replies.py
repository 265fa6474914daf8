"""The MCP tools' replies, built from a compile result or a notebook's summary."""

from __future__ import annotations

import math
from typing import Any

from .._core.budget import default_budget
from .._core.inspector import render_inspection
from .._core.result import CompileResult, LedgerRow
from .._notebooks import NotebookEntry, NotebookInfo
from .._service import explain_empty
from .models import (
    HOST_RESULT_LIMITS,
    KEEP_ORIGINAL,
    MAX_REPORT_CHARS,
    MCP_BUDGET_CAP,
    InspectedSources,
    KindSummary,
    NotebookSummary,
    Row,
    SavedEntry,
    Source,
)

__all__ = [
    "clip_report",
    "inspected_sources",
    "notebook_summary",
    "prepared_fields",
    "saved_entry",
]


def notebook_summary(info: NotebookInfo) -> NotebookSummary:
    return NotebookSummary(**info.to_dict())


def _ledger_summary(ledger: tuple[LedgerRow, ...]) -> dict[str, KindSummary]:
    summary: dict[str, KindSummary] = {}
    for row in ledger:
        item = summary.setdefault(
            row.kind, KindSummary(candidates=0, included=0, included_tokens=0)
        )
        item.candidates += 1
        if row.included:
            item.included += 1
            item.included_tokens += row.tokens
    return summary


def _budget_note(result: CompileResult, asked: int | None) -> str:
    """Say when the default budget was capped, or when an explicit budget is over the cap."""
    if asked is None:
        default = default_budget(result.input_tokens)
        if default <= MCP_BUDGET_CAP or result.applied_strategy == "unchanged":
            return ""
        return (
            f"Budget capped at {MCP_BUDGET_CAP:,} tokens (the default for this history would be "
            f"{default:,}) so that the whole result reaches the model: MCP hosts cut or refuse "
            "larger tool results. If evidence you need is missing, call again with an explicit "
            "budget_tokens (a larger memory may be cut or saved to a file by the host), "
            "narrow the task, or call inspect_sources to see what was left out."
        )
    if asked > MCP_BUDGET_CAP and result.memory_tokens > MCP_BUDGET_CAP:
        return (
            f"budget_tokens={asked:,} is above {MCP_BUDGET_CAP:,}, the largest memory every MCP "
            f"host passes whole: this memory has {result.memory_tokens:,} tokens. Claude Code "
            f"saves a result over {HOST_RESULT_LIMITS['claude_code_tokens']:,} tokens "
            "(MAX_MCP_OUTPUT_TOKENS) to a file instead, and Codex cuts exec output at "
            f"{HOST_RESULT_LIMITS['codex_exec_tokens']:,} tokens unless the exec call raises "
            "max_output_tokens. Check that you received all of it."
        )
    return ""


def prepared_fields(result: CompileResult, asked: int | None = None) -> dict[str, Any]:
    empty = explain_empty(result)
    return {
        "budget_note": _budget_note(result, asked),
        "note": f"{empty[0].upper()}{empty[1:]}. {KEEP_ORIGINAL}" if empty else KEEP_ORIGINAL,
        "compiled_memory": result.compiled_memory,
        "route": result.route,
        "route_reason": result.route_reason,
        "strategy": result.strategy,
        "applied_strategy": result.applied_strategy,
        "counter": result.counter,
        "budget_tokens": result.budget_tokens,
        "memory_tokens": result.memory_tokens,
        "input_tokens": result.input_tokens,
        "tokens_by_kind": dict(result.tokens_by_kind),
        "caps_exceeded": dict(result.caps_exceeded),
        "source_units": len(result.sources),
        "ledger_summary": _ledger_summary(result.ledger),
    }


def _row(row: LedgerRow) -> Row:
    return Row(
        kind=row.kind,
        key=row.key,
        value=row.value,
        text=row.text,
        source_ids=list(row.source_ids),
        tokens=row.tokens,
        reason=row.reason,
    )


def clip_report(report: str) -> str:
    if len(report) <= MAX_REPORT_CHARS:
        return report
    cut = report.rfind("\n", 0, MAX_REPORT_CHARS) + 1 or MAX_REPORT_CHARS
    return (
        report[:cut] + f"… report cut here: {len(report) - cut:,} more characters; the kept, "
        "omitted and cited_sources fields hold the details\n"
    )


def inspected_sources(result: CompileResult, max_rows: int) -> InspectedSources:
    """What ``result`` kept and left out, at most ``max_rows`` of each and of the cited lines."""
    kept = [row for row in result.ledger if row.included]
    omitted = [row for row in result.ledger if not row.included]
    # Nearest misses first: an omitted line with a high BM25 score is the likeliest place for
    # evidence the task needed. sorted() is stable, so records keep their packing order and
    # equal scores keep source order.
    omitted.sort(key=lambda row: -float(row.value) if row.kind == "source" else -math.inf)
    cited_ids = {sid for row in kept if row.kind != "source" for sid in row.source_ids}
    cited = [unit for unit in result.sources if unit.id in cited_ids]
    return InspectedSources(
        route=result.route,
        route_reason=result.route_reason,
        applied_strategy=result.applied_strategy,
        counter=result.counter,
        budget_tokens=result.budget_tokens,
        memory_tokens=result.memory_tokens,
        input_tokens=result.input_tokens,
        inspection=clip_report(render_inspection(result, include_memory=False)),
        kept=[_row(row) for row in kept[:max_rows]],
        kept_total=len(kept),
        omitted=[_row(row) for row in omitted[:max_rows]],
        omitted_total=len(omitted),
        cited_sources=[Source(**unit.to_dict()) for unit in cited[:max_rows]],
        cited_total=len(cited),
    )


def saved_entry(entry: NotebookEntry, mode: str, info: NotebookInfo) -> SavedEntry:
    """What notebook_save stored, and the notebook it is now part of."""
    return SavedEntry(
        name=entry.notebook,
        mode=mode,
        seq=entry.seq,
        chars=entry.chars,
        size_bytes=entry.size_bytes,
        sha256=entry.sha256,
        created_at=entry.created_at,
        notebook=notebook_summary(info),
    )
