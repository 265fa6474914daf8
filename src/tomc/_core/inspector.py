"""The plain-text inspector: what was kept, what was left out, and why."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for annotations only: result.py imports this module
    from .result import CompileResult

__all__ = ["render_inspection"]

_TEXT_WIDTH = 100


#: A record citing more source units than this shows the first and last few of them.
_IDS_SHOWN = 10
#: Up to this many source units are all listed; beyond it, those left out are summed up by
#: reason (kept units, and units that support a kept record, are always listed).
_UNITS_LISTED = 200


def _clip(text: str, width: int = _TEXT_WIDTH) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _ids(ids: tuple[str, ...] | list[str], full: bool) -> str:
    """A record's source ids; a long list (a COUNT of a common word cites thousands) keeps its
    first and last few, as the memory shortens copy chains."""
    if full or len(ids) <= _IDS_SHOWN:
        return ",".join(ids)
    half = _IDS_SHOWN // 2
    return f"{','.join(ids[:half])},…,{','.join(ids[-half:])} ({len(ids)} units)"


def render_inspection(
    result: CompileResult, *, include_memory: bool = True, full: bool = False
) -> str:
    """The memory, the source units in order (kept or not, and why), every ledger row, and
    the figures, each under a heading; the markers are explained where they are used.

    ``include_memory=False`` leaves the memory out, for a caller that shows it elsewhere;
    ``full=True`` lists every source unit and every source id of every record (a long history
    otherwise sums up the units it left out by reason, and long id lists are shortened).
    """
    source_rows = {row.key: row for row in result.ledger if row.kind == "source"}
    supported: dict[str, list[str]] = {}
    for row in result.ledger:
        if row.kind != "source" and row.included:
            for unit in row.source_ids:
                supported.setdefault(unit, []).append(row.kind)
    memory = result.compiled_memory
    lines: list[str] = []
    if include_memory:
        lines += [
            f"MEMORY ({result.memory_tokens} of {result.budget_tokens} tokens)",
            *(memory.splitlines() if memory else ["  (empty: nothing fits the budget)"]),
            "",
        ]
    lines += [
        f"route: {result.route} ({result.route_reason})",
        f"strategy: {result.strategy} -> {result.applied_strategy}; counter: {result.counter}",
        "",
        "SOURCE UNITS",
        "  KEPT: the line itself is in the memory; blank: left out. [role]: the chat role,",
        "  [-] for a plain-text history. └ why it was kept or left out.",
    ]
    every = full or len(result.sources) <= _UNITS_LISTED
    left_out: dict[str, int] = {}
    for unit in result.sources:
        row = source_rows.get(unit.id)
        role = unit.role or "-"
        kept = row is not None and row.included
        if row is not None:
            mark = "KEPT" if kept else "    "
            why = row.reason
        else:
            mark, why = "    ", "not a source candidate for this strategy"
        if not (every or kept or unit.id in supported):
            reason = why.split(" (")[0]  # "over budget (rank 52 of 5000)" counts as "over budget"
            left_out[reason] = left_out.get(reason, 0) + 1
            continue
        if unit.id in supported:
            why += f"; supports included {'/'.join(sorted(set(supported[unit.id])))} record"
        lines.append(f"{mark} {unit.id:>6} [{role}] {_clip(unit.text)}")
        lines.append(f"{'':11}└ {why}")
    if left_out:
        summed = "; ".join(f"{n:,} {reason}" for reason, n in sorted(left_out.items()))
        more = sum(left_out.values())
        lines.append(f"  … and {more:,} more left out, not listed: {summed}")
    lines += [
        "",
        "LEDGER (records)",
        "  IN: packed into the memory; OUT: left out. sources: the units the record cites.",
    ]
    records = [row for row in result.ledger if row.kind != "source"]
    if not records:
        lines.append("  (no candidate records)")
    for row in records:
        mark = "IN " if row.included else "OUT"
        lines.append(f"{mark} {row.kind:<8} {_clip(row.text)}")
        sources = _ids(row.source_ids, full)
        lines.append(f"{'':4}tokens={row.tokens} sources={sources} · {row.reason}")
    by_kind = ", ".join(f"{kind}={n}" for kind, n in result.tokens_by_kind.items())
    exceeded = [kind for kind, hit in result.caps_exceeded.items() if hit]
    lines += [
        "",
        "TOKENS",
        f"input={result.input_tokens} budget={result.budget_tokens} memory={result.memory_tokens}"
        f" ({by_kind})",
        f"caps exceeded: {', '.join(exceeded) if exceeded else 'none'}",
        f"latency: {result.latency_s * 1000:.1f} ms",
    ]
    return "\n".join(lines) + "\n"
