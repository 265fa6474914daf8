"""Source selection: the order in which source lines compete for the budget, and why.

Lines that share a stemmed term with the task are ranked by BM25 (with a share of each score
spread to the lines around it, and more weight for lines said by someone the task names); the
rest follow, newest first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .lexicon import query_terms
from .packing import Packed
from .result import LedgerRow
from .retrieval import bm25_scores, spread_to_neighbours, weight_named_speakers
from .stamps import StampGroups

__all__ = ["SourceRanking", "rank_sources", "source_ledger_rows"]


@dataclass(frozen=True, slots=True)
class SourceRanking:
    scores: dict[int, float]  # BM25 (spread) score of every line that has one
    order: list[int]  # every line, best first


def rank_sources(
    texts: Sequence[str],
    row_tokens: Sequence[int],
    task: str,
    rows: Sequence[str] | None = None,
) -> SourceRanking:
    """BM25 matches best first (ties: newer first), then unmatched lines newest first.

    Scores spread to the lines around a match, then a line said by someone the task names
    weighs more; ``rows`` are the lines as packed (a chat row opens with its role), where the
    speaker is read, ``texts`` by default.
    """
    scores = spread_to_neighbours(bm25_scores(texts, row_tokens, query_terms(task)), len(texts))
    scores = weight_named_speakers(scores, texts if rows is None else rows, task)
    matched = sorted(scores, key=lambda i: (-scores[i], -i))
    unmatched = [i for i in range(len(texts) - 1, -1, -1) if i not in scores]
    return SourceRanking(scores, matched + unmatched)


def source_ledger_rows(
    rows: Sequence[str],
    row_tokens: Sequence[int],
    packed: Packed,
    ranking: SourceRanking | None,
    applied: str,
    unchanged_reason: str = "history fits the budget: returned unchanged",
    *,
    same_as: Mapping[int, int] | None = None,
    needs: Mapping[int, tuple[int, ...]] | None = None,
    stamps: StampGroups | None = None,
    replaced: Mapping[int, str] | None = None,
) -> list[LedgerRow]:
    """One ledger row per source line: its score, whether it was kept and why.

    A kept line's tokens are what it adds where it stands (its own cost, plus any difference
    from being counted together with the line before it, plus its group's stamp line where it
    is written above it). ``same_as``, ``needs`` and ``stamps`` are the packing's (an
    identical line packed once; a line held back for its key's writing line; lines under a
    shared stamp, whose costs are without it). ``replaced`` maps a line that wrote a value a
    later line replaced to that value and where (its note, below it, says so).
    """
    same_as = same_as or {}
    needs = needs or {}
    copies: dict[int, int] = {}
    for newest in same_as.values():
        copies[newest] = copies.get(newest, 1) + 1
    total = len(rows)
    kept = frozenset(packed.kept_units)
    scores = ranking.scores if ranking else {}
    rank_of = {index: rank for rank, index in enumerate(ranking.order, start=1)} if ranking else {}
    stamps = stamps or StampGroups.none(rows, row_tokens)
    written = {stamps.group_of[unit] for unit in kept if unit in stamps.group_of}
    out = []
    for i in range(total):
        score = scores.get(i, 0.0)
        if applied == "unchanged":
            reason = unchanged_reason
        elif i in kept:
            reason = (
                f"BM25 rank {rank_of[i]} (score {score:.3f})"
                if i in scores
                else f"no query term; kept by recency (rank {rank_of[i]})"
            )
            if i in copies:
                reason += f"; the line occurs {copies[i]} times, packed once here"
        elif i in same_as:
            newest = same_as[i]
            where = "packed once there" if newest in kept else "left out there"
            reason = f"identical to u{newest}: {where}"
        elif any(unit not in kept for unit in needs.get(i, ())):
            writer = next(unit for unit in needs[i] if unit not in kept)
            reason = (
                f"left out (rank {rank_of[i]} of {total}): it names a key whose current value "
                f"was written by u{writer}, which did not fit, and an older line must not be "
                "the last word on it"
            )
        elif i in packed.squeezed:
            reason = (
                f"left out (rank {rank_of[i]} of {total}): lines the tokenizer joins across a "
                "line break cost more together, and this line made room"
            )
        else:
            need = _needed(stamps, i, written)
            reason = f"over budget (rank {rank_of[i]} of {total}, needs {need} tokens)"
        tokens, note = _as_packed(stamps, packed, i, i in kept)
        reason += note
        if replaced and i in replaced:
            reason += (
                f"; its value was replaced later ({replaced[i]}): a note below it says so, "
                "counted with it"
            )
        if i in packed.extra:
            tokens += packed.extra[i]
            reason += f"; counted with the line before it ({packed.extra[i]:+d} tokens)"
        unit = f"u{i}"
        row = LedgerRow("source", unit, f"{score:.3f}", rows[i], (unit,), tokens, i in kept, reason)
        out.append(row)
    return out


def _needed(stamps: StampGroups, unit: int, written: set[int]) -> int:
    """What a left-out line would have cost: with its group's stamp line if none is written."""
    group = stamps.group_of.get(unit)
    if group is None or group in written:
        return stamps.row_tokens[unit]
    return stamps.row_tokens[unit] + stamps.header_tokens[group]


def _as_packed(stamps: StampGroups, packed: Packed, unit: int, kept: bool) -> tuple[int, str]:
    """A line's tokens as packed (its stamp line included where it is written above it), and
    what its reason says of the stamp."""
    tokens = stamps.row_tokens[unit]
    if unit not in stamps.group_of:
        return tokens, ""
    if unit in packed.headers:
        stamp = stamps.headers[stamps.group_of[unit]]
        return tokens + packed.headers[unit], (
            f"; its stamp {stamp} is written once above it, for its group "
            f"({packed.headers[unit]:+d} tokens)"
        )
    return tokens, "; under its group's stamp line (its own stamp left out)" if kept else ""
