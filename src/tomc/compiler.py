"""``compile_memory``: typed records plus BM25-selected source lines, packed into a budget."""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from .budget import default_budget
from .counters import LexicalCounter, TokenCounter, get_counter
from .errors import BudgetError, InvalidHistoryError, InvalidOptionError
from .kernels import PathEntry, collect_edges, count_terms, join_relations, replay_state, top_terms
from .lexicon import query_terms
from .operations import Copy, Relation, Set, parse_operation
from .result import CompileResult, LedgerRow, SourceUnit
from .retrieval import bm25_scores, spread_to_neighbours
from .router import Route, names_in_task, route_task, task_words
from .sources import History, SourceTable, read_history

__all__ = ["CAPS", "RECORD_SHARE", "STRATEGIES", "compile_memory"]

STRATEGIES = ("tomc", "tomc_raw", "rag", "auto")
#: ``tomc_raw`` starts with this share of the budget for records; the rest is source text.
RECORD_SHARE = 0.42
CAPS = {"state": 96, "count": 80, "relation": 120}
#: Even the uncapped comparison mode stops enumerating relation paths here.
RELATION_SAFETY_LIMIT = 100_000
_SHOWN_IDS = 8


def _ids(units: Sequence[int]) -> str:
    if len(units) <= _SHOWN_IDS:
        return ",".join(f"u{u}" for u in units)
    head = ",".join(f"u{u}" for u in units[: _SHOWN_IDS // 2])
    tail = ",".join(f"u{u}" for u in units[-_SHOWN_IDS // 2 :])
    return f"{head},…,{tail}"


@dataclass(slots=True)
class _Record:
    """A candidate record while compiling; becomes a :class:`LedgerRow`."""

    kind: str
    key: str
    value: str
    text: str
    units: tuple[int, ...]
    relevant: bool
    eligible: bool
    tokens: int = -1
    included: bool = False
    reason: str = ""


def _validate(task: object, strategy: object, budget: object) -> None:
    if not isinstance(task, str):
        raise InvalidHistoryError(f"task must be a str, not {type(task).__name__}")
    if not task.strip():
        raise InvalidHistoryError("task is empty: say what the memory is compiled for")
    if strategy not in STRATEGIES:
        raise InvalidOptionError(
            f"unknown strategy {strategy!r}; use one of {', '.join(map(repr, STRATEGIES))}"
        )
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
        raise InvalidOptionError(f"budget_tokens must be an int or None, not {budget!r}")
    if isinstance(budget, int) and budget < 0:
        raise InvalidOptionError(f"budget_tokens must be >= 0, not {budget}")


def _row_texts(table: SourceTable) -> Sequence[str]:
    if not table.is_chat:
        return table.texts
    return [f"{role}: {text}" for role, text in zip(table.roles, table.texts, strict=True)]


def _row_tokens(rows: Sequence[str], table: SourceTable, counter: TokenCounter) -> list[int]:
    if isinstance(counter, LexicalCounter):
        count = counter.count
        if not table.is_chat:
            return [count(row) for row in rows]
        # Lexical counts are additive across a space, so count each role prefix once.
        prefix = {role: count(f"{role}: ") for role in set(table.roles)}
        return [prefix[r] + count(t) for r, t in zip(table.roles, table.texts, strict=True)]
    return [counter.count(row + "\n") for row in rows]


def _state_records(
    ops: list[tuple[int, Set | Copy]],
    route: Route,
    strategy: str,
    raw_words: set[str],
    folded_words: set[str],
) -> list[_Record]:
    entries = replay_state(ops)
    named = set(names_in_task([e.name for e in entries], raw_words, folded_words))
    eligible = route.route == "state" or strategy == "tomc"
    relevant = [e for e in entries if e.name in named]
    rest = sorted((e for e in entries if e.name not in named), key=lambda e: -e.last_unit)
    return [
        _Record(
            "state",
            e.name,
            e.value,
            f"STATE {e.name} = {e.value} ({_ids(e.source_units)})",
            e.source_units,
            e.name in named,
            eligible or e.name in named,
        )
        for e in relevant + rest
    ]


def _spaced(text: str) -> str:
    """Case-folded, with ``_`` and ``-`` read as spaces: deploy_pipeline ~ "deploy pipeline"."""
    return " ".join(re.sub(r"[_\-]+", " ", text.casefold()).split())


def _mentions(node: str, task_spaced: str, folded_words: set[str]) -> bool:
    """Whether the task names an entity: as one word, or as a phrase of whole words."""
    if node.casefold() in folded_words:
        return True
    phrase = _spaced(node)
    return bool(phrase) and f" {phrase} " in f" {task_spaced} "


def _relation_records(
    relations: list[tuple[int, Relation]],
    route: Route,
    strategy: str,
    task: str,
    folded_words: set[str],
    uncapped: bool,
) -> tuple[list[_Record], bool]:
    edges = collect_edges(relations)
    task_spaced = _spaced(re.sub(r"[^\w\s\-]", " ", task))
    if route.labels:
        limit = RELATION_SAFETY_LIMIT if uncapped else CAPS["relation"]
        # Paths from an entity the task names are enumerated first, so the cap keeps them.
        named_starts = {s for s, _, _, _ in edges if _mentions(s, task_spaced, folded_words)}
        paths, hit_limit = join_relations(edges, route.labels, limit, prefer=named_starts)
        exceeded = hit_limit or len(paths) > CAPS["relation"]
        eligible = True
    else:
        paths = [PathEntry((s, t), (label,), units) for s, label, t, units in edges]
        exceeded = len(paths) > CAPS["relation"]
        eligible = route.route == "relation" or strategy == "tomc"
    records = []
    for path in paths:
        # A named endpoint, or (for single edges) a named label, makes a row relevant.
        relevant = (
            _mentions(path.nodes[0], task_spaced, folded_words)
            or _mentions(path.nodes[-1], task_spaced, folded_words)
            or (not route.labels and path.labels[0].casefold() in folded_words)
        )
        records.append(
            _Record(
                "relation",
                path.key,
                path.nodes[-1],
                f"RELATION {path.key} ({_ids(path.source_units)})",
                path.source_units,
                relevant,
                eligible or relevant,
            )
        )
    records.sort(key=lambda r: not r.relevant)  # stable: enumeration order within each group
    return records, exceeded


def _count_records(
    texts: Sequence[str], route: Route, uncapped: bool
) -> tuple[list[_Record], bool]:
    named = list(route.count_terms)
    cap = CAPS["count"]
    room = None if uncapped else max(cap - len(named), 0)
    top, distinct = top_terms(texts, room, exclude=named)
    exceeded = len(named) + distinct > cap
    records = []
    for entry in count_terms(texts, named + top):
        relevant = entry.term in route.count_terms
        records.append(
            _Record(
                "count",
                entry.term,
                str(entry.occurrences),
                f'COUNT "{entry.term}" = {entry.occurrences} occurrences in '
                f"{len(entry.source_units)} lines",
                entry.source_units,
                relevant,
                True,
            )
        )
    return records, exceeded


def _pack_records(
    records: list[_Record], budget: int, counter: TokenCounter, uncapped: bool
) -> int:
    used = 0
    kept_per_kind: dict[str, int] = {}
    for record in records:
        if not record.eligible:
            continue
        cap = CAPS[record.kind]
        if not uncapped and kept_per_kind.get(record.kind, 0) >= cap:
            record.reason = f"over cap ({cap} {record.kind} rows)"
            continue
        kept_per_kind[record.kind] = kept_per_kind.get(record.kind, 0) + 1
        record.tokens = counter.count(record.text + "\n")
        if used + record.tokens <= budget:
            used += record.tokens
            record.included = True
            record.reason = (
                "task-relevant; fits record budget" if record.relevant else "fits record budget"
            )
        else:
            record.reason = f"over record budget (needs {record.tokens}, {budget - used} left)"
    return used


def compile_memory(
    history: History,
    task: str,
    *,
    budget_tokens: int | None = None,
    strategy: str = "tomc_raw",
    counter: str | TokenCounter = "lexical",
    uncapped: bool = False,
) -> CompileResult:
    """Compile ``history`` into a memory for ``task`` within ``budget_tokens``.

    ``history`` is a string (one source line per nonempty line) or a list of chat messages.
    ``strategy`` is ``"tomc"`` (records only), ``"tomc_raw"`` (records first, then BM25
    source lines), ``"rag"`` (source lines only) or ``"auto"``. ``counter`` is ``"lexical"``,
    ``"bpe:o200k_base"``, ``"bpe:cl100k_base"`` or a counter object. ``uncapped`` ignores the
    row caps (a comparison mode); ``caps_exceeded`` says per kind whether they were exceeded.

    Raises a :class:`tomc.TomcError` subclass that names the problem for bad input.
    """
    started = time.perf_counter()
    _validate(task, strategy, budget_tokens)
    token_counter = get_counter(counter)
    table = read_history(history)
    texts = table.texts
    rows = _row_texts(table)
    row_tokens = _row_tokens(rows, table, token_counter)
    if isinstance(history, str) and not isinstance(token_counter, LexicalCounter):
        input_tokens = token_counter.count(history)
    else:
        input_tokens = sum(row_tokens)
    budget = default_budget(input_tokens) if budget_tokens is None else budget_tokens

    state_ops: list[tuple[int, Set | Copy]] = []
    relations: list[tuple[int, Relation]] = []
    for index, text in enumerate(texts):
        op = parse_operation(text)
        if op is not None:
            if type(op) is Relation:
                relations.append((index, op))
            else:
                state_ops.append((index, op))
    variables = {op.name if type(op) is Set else op.target for _, op in state_ops}
    labels = {rel.label for _, rel in relations}
    route = route_task(task, variables, labels)

    applied = strategy
    if strategy == "auto":
        if input_tokens <= budget:
            applied = "unchanged"
        elif route.route != "raw" or route.wording_sensitive:
            applied = "tomc_raw"
        else:
            applied = "rag"

    caps_exceeded = {"state": False, "relation": False, "count": False}
    records: list[_Record] = []
    if applied in ("tomc", "tomc_raw"):
        raw_words, folded_words = task_words(task)
        state = _state_records(state_ops, route, applied, raw_words, folded_words)
        caps_exceeded["state"] = sum(r.eligible for r in state) > CAPS["state"]
        relation, caps_exceeded["relation"] = _relation_records(
            relations, route, applied, task, folded_words, uncapped
        )
        count: list[_Record] = []
        if route.route == "count":
            count, caps_exceeded["count"] = _count_records(texts, route, uncapped)
        by_kind = {"state": state, "relation": relation, "count": count}
        first = by_kind.pop(route.route, [])
        others = [r for group in by_kind.values() for r in group]
        ordered = (
            [r for r in first if r.relevant]
            + [r for r in others if r.relevant]
            + [r for r in first if not r.relevant]
            + [r for r in others if not r.relevant]
        )
        records = [r for r in ordered if r.eligible] + [r for r in ordered if not r.eligible]
        for record in records:
            if not record.eligible:
                record.reason = f"not asked for: route is {route.route}"

    record_budget = budget if applied == "tomc" else math.floor(budget * RECORD_SHARE)
    record_used = _pack_records(records, record_budget, token_counter, uncapped) if records else 0

    scores: dict[int, float] = {}
    rank_of: dict[int, int] = {}
    kept_units: list[int] = []
    source_left = budget - record_used
    if applied in ("tomc_raw", "rag"):
        scores = spread_to_neighbours(bm25_scores(texts, row_tokens, query_terms(task)), len(texts))
        matched = sorted(scores, key=lambda i: (-scores[i], -i))
        unmatched = (i for i in range(len(texts) - 1, -1, -1) if i not in scores)
        for rank, index in enumerate((*matched, *unmatched), start=1):
            rank_of[index] = rank
            cost = row_tokens[index]
            if cost <= source_left:
                source_left -= cost
                kept_units.append(index)
        kept_units.sort()
    elif applied == "unchanged":
        kept_units = list(range(len(texts)))

    included_records = [r for r in records if r.included]
    if applied == "unchanged":
        memory = history if isinstance(history, str) else "".join(row + "\n" for row in rows)
        memory_tokens = input_tokens
    else:
        parts = [r.text + "\n" for r in included_records]
        parts.extend(rows[i] + "\n" for i in kept_units)
        memory = "".join(parts)
        memory_tokens = record_used + sum(row_tokens[i] for i in kept_units)
    recount = token_counter.count(memory)
    if recount != memory_tokens or (applied != "unchanged" and recount > budget):
        raise BudgetError(
            f"packed memory re-counts to {recount} tokens with counter {token_counter.name!r}, "
            f"but its rows add up to {memory_tokens} (budget {budget}); the counter is not "
            "additive over newline-terminated rows"
        )

    tokens_by_kind = {"state": 0, "relation": 0, "count": 0, "source": 0}
    for record in included_records:
        tokens_by_kind[record.kind] += record.tokens
    tokens_by_kind["source"] = memory_tokens - sum(r.tokens for r in included_records)
    latency = time.perf_counter() - started

    kept = frozenset(kept_units)

    def build_sources() -> tuple[SourceUnit, ...]:
        return tuple(
            SourceUnit(
                f"u{i}", texts[i], table.roles[i], table.message_indexes[i], table.line_indexes[i]
            )
            for i in range(len(texts))
        )

    def build_ledger() -> tuple[LedgerRow, ...]:
        out = []
        for r in records:
            tokens = r.tokens if r.tokens >= 0 else token_counter.count(r.text + "\n")
            ids = tuple(f"u{u}" for u in r.units)
            out.append(LedgerRow(r.kind, r.key, r.value, r.text, ids, tokens, r.included, r.reason))
        if applied in ("tomc_raw", "rag", "unchanged"):
            out.extend(_source_rows(rows, row_tokens, kept, scores, rank_of, applied, len(texts)))
        return tuple(out)

    return CompileResult(
        compiled_memory=memory,
        route=route.route,
        route_reason=route.reason,
        strategy=strategy,
        applied_strategy=applied,
        budget_tokens=budget,
        memory_tokens=recount,
        input_tokens=input_tokens,
        tokens_by_kind=tokens_by_kind,
        caps_exceeded=caps_exceeded,
        latency_s=latency,
        counter=token_counter.name,
        task=task,
        _build_sources=build_sources,
        _build_ledger=build_ledger,
    )


def _source_rows(
    rows: Sequence[str],
    row_tokens: Sequence[int],
    kept: frozenset[int],
    scores: dict[int, float],
    rank_of: dict[int, int],
    applied: str,
    total: int,
) -> list[LedgerRow]:
    out = []
    for i in range(total):
        score = scores.get(i, 0.0)
        if applied == "unchanged":
            reason = "history fits the budget: returned unchanged"
        elif i in kept:
            reason = (
                f"BM25 rank {rank_of[i]} (score {score:.3f})"
                if i in scores
                else f"no query term; kept by recency (rank {rank_of[i]})"
            )
        else:
            reason = f"over budget (rank {rank_of[i]} of {total}, needs {row_tokens[i]} tokens)"
        out.append(
            LedgerRow(
                "source",
                f"u{i}",
                f"{score:.3f}",
                rows[i],
                (f"u{i}",),
                row_tokens[i],
                i in kept,
                reason,
            )
        )
    return out
