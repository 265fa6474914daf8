"""``compile_memory``: typed records plus BM25-selected source lines, packed into a budget.

The pipeline: read the history into source units, parse its operations, route the task,
build the candidate records, pack them into their share of the budget, rank the source lines
and pack them into what is left, then assemble the memory (records first, then source lines
in source order) and the audit trail.
"""

from __future__ import annotations

import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .budget import clamp_budget, default_budget
from .errors import BudgetError, InvalidHistoryError, InvalidOptionError
from .evidence import EvidencePlan, evidence_order, plan_evidence
from .mentions import TaskMentions
from .operations import Program, parse_program
from .packing import (
    Packed,
    assemble_memory,
    identical_rows,
    note_rows_shown,
    pack_records,
    pack_sources,
    row_texts,
)
from .records import CAPS, Record, candidate_records, format_ids
from .result import CompileResult, LedgerRow, SourceUnit
from .selection import SourceRanking, rank_sources, source_ledger_rows
from .sources import History, SourceTable, read_history
from .stamps import StampGroups, find_stamp_groups
from .state import replaced_writes
from .task_routes import TaskRoute, route_task
from .tokens import LexicalCounter, TokenCounter, get_counter, row_costs

__all__ = ["CAPS", "RECORD_SHARE", "STRATEGIES", "compile_memory"]

STRATEGIES = ("tomc", "tomc_raw", "rag", "auto")
#: ``tomc_raw`` starts with this share of the budget for records; the rest is source text.
RECORD_SHARE = 0.42


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


def _applied_strategy(
    strategy: str, input_tokens: Callable[[], int], budget: int, route: TaskRoute
) -> str:
    if strategy != "auto":
        return strategy
    if input_tokens() <= budget:
        return "unchanged"
    return "tomc_raw" if route.route != "raw" or route.wording_sensitive else "rag"


def compile_memory(
    history: History,
    task: str,
    *,
    budget_tokens: int | None = None,
    strategy: str = "tomc_raw",
    counter: str | TokenCounter = "lexical",
    uncapped: bool = False,
    default_budget_cap: int | None = None,
) -> CompileResult:
    """Compile ``history`` into a memory for ``task`` within ``budget_tokens``.

    ``history`` is a string (one source line per nonempty line) or a list of chat messages.
    ``strategy`` is ``"tomc"`` (records only), ``"tomc_raw"`` (records first, then BM25
    source lines), ``"rag"`` (source lines only) or ``"auto"``. ``counter`` is ``"lexical"``,
    ``"bpe:o200k_base"``, ``"bpe:cl100k_base"`` or a counter object. ``uncapped`` ignores the
    row caps (a comparison mode); ``caps_exceeded`` says per kind whether they were exceeded.
    ``default_budget_cap`` caps the default budget (used when ``budget_tokens`` is ``None``;
    the MCP tools keep their results within what the hosts accept whole).

    Raises a :class:`tomc.TomcError` subclass that names the problem for bad input.
    """
    started = time.perf_counter()
    _validate(task, strategy, budget_tokens)
    token_counter = get_counter(counter)
    given = _measure(
        history, token_counter, budget_tokens, default_budget_cap, records_only=strategy == "tomc"
    )
    program = parse_program(given.table.texts)
    route = route_task(task, program.variables, program.labels)
    applied = _applied_strategy(strategy, given.input_tokens, given.budget, route)

    records: list[Record] = []
    caps_exceeded = {"state": False, "relation": False, "count": False}
    if applied in ("tomc", "tomc_raw"):
        records, caps_exceeded = candidate_records(
            program, given.table.texts, route, applied, task, uncapped
        )
    # A count is the answer itself: its rows come before any source text.
    records_first = applied == "tomc" or route.route == "count"
    record_budget = given.budget if records_first else math.floor(given.budget * RECORD_SHARE)
    record_used = (
        pack_records(records, record_budget, token_counter, uncapped, given.budget)
        if records
        else 0
    )
    if route.route == "count":
        records, record_used = note_rows_shown(records, record_budget, record_used, token_counter)
    out = _pack(history, given, token_counter, records, record_used, applied, task, program)
    _check_recount(token_counter, out.packed, given.budget if out.applied != "unchanged" else None)

    tokens_by_kind = {"state": 0, "relation": 0, "count": 0, "source": 0}
    for record in out.records:
        tokens_by_kind[record.kind] += record.tokens
    tokens_by_kind["source"] = out.packed.tokens - sum(r.tokens for r in out.records)
    latency = time.perf_counter() - started

    return CompileResult(
        compiled_memory=out.packed.memory,
        route=route.route,
        route_reason=route.reason,
        strategy=strategy,
        applied_strategy=out.applied,
        budget_tokens=given.budget,
        memory_tokens=out.packed.tokens,
        _count_input=given.input_tokens,
        tokens_by_kind=tokens_by_kind,
        caps_exceeded=caps_exceeded,
        latency_s=latency,
        counter=token_counter.name,
        task=task,
        _build_sources=lambda: _source_units(given.table),
        _build_ledger=lambda: _ledger(records, out, given, token_counter),
    )


def _ledger(
    records: list[Record], out: _Outcome, given: _Given, counter: TokenCounter
) -> tuple[LedgerRow, ...]:
    """Every candidate record, then (where source lines were packed) every source line."""
    rows = [_ledger_row(r, counter) for r in records]
    if out.applied in ("tomc_raw", "rag", "unchanged"):
        sources = out.sources or _Sources.plain(given)
        rows.extend(
            source_ledger_rows(
                sources.rows,
                sources.row_tokens,
                out.packed,
                out.ranking,
                out.applied,
                out.unchanged_reason,
                same_as=sources.same_as,
                needs=sources.plan.needs,
                stamps=sources.stamps,
                replaced=sources.replaced,
            )
        )
    return tuple(rows)


@dataclass(frozen=True, slots=True)
class _Given:
    """The history as packing sees it: its units, their rows and costs, and the budget.

    ``input_tokens`` is a call: records only (the chat work memory of a long agent history)
    needs no count of the history, so it is counted once, when a caller first asks.
    """

    table: SourceTable
    rows: Sequence[str]
    row_tokens: list[int]
    input_tokens: Callable[[], int]
    budget: int


def _measure(
    history: History,
    counter: TokenCounter,
    budget_tokens: int | None,
    default_budget_cap: int | None,
    *,
    records_only: bool = False,
) -> _Given:
    table = read_history(history)
    rows = row_texts(table)
    exact = not isinstance(counter, LexicalCounter)
    row_tokens: list[int] = []
    if records_only and exact:
        # Records only packs no source row: no count per row, one of the whole text if asked.
        text = history if isinstance(history, str) else "".join(row + "\n" for row in rows)
        input_tokens = functools.cache(lambda: counter.count(text))
    else:
        row_tokens = row_costs(counter, rows)
        # A text is counted whole: exact even where lines join.
        total = counter.count(history) if isinstance(history, str) and exact else sum(row_tokens)
        input_tokens = functools.cache(lambda: total)
    if budget_tokens is None:
        budget = default_budget(input_tokens())
        if default_budget_cap is not None:
            budget = min(budget, default_budget_cap)
    else:
        budget = clamp_budget(budget_tokens)
    return _Given(table, rows, row_tokens, input_tokens, budget)


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What packing produced: the memory, the strategy that ran, the records in the memory,
    the source ranking, and the reason a history came back unchanged."""

    packed: Packed
    applied: str
    records: list[Record]
    ranking: SourceRanking | None
    unchanged_reason: str
    sources: _Sources | None = None  # as packed beside the records


def _pack(
    history: History,
    given: _Given,
    counter: TokenCounter,
    records: list[Record],
    record_used: int,
    applied: str,
    task: str,
    program: Program,
) -> _Outcome:
    """Pack the source lines into what the records left, then assemble the memory; a memory
    larger than the history gives the history back unchanged."""
    included = [r for r in records if r.included]
    unchanged_reason = "history fits the budget: returned unchanged"
    if applied == "unchanged":
        return _Outcome(
            _unchanged(history, given.rows, given.input_tokens()),
            applied,
            included,
            None,
            unchanged_reason,
        )
    ranking: SourceRanking | None = None
    kept_units: list[int] = []
    sources = _Sources.plain(given)
    if applied in ("tomc_raw", "rag"):
        ranking = rank_sources(given.table.texts, given.row_tokens, task, given.rows)
        # Replaced lines get their note for the keys the task names or the memory shows a row
        # of: a note per replaced write of every key cost a third more compile time at 1M
        # tokens of a write-heavy log.
        noted = {r.key for r in records if r.kind == "state" and r.included}
        noted.update(TaskMentions(task).variables(program.variables))
        sources = _sources_beside(included, given, counter, program, noted)
        kept_units = pack_sources(
            evidence_order(ranking.order, sources.plan),
            sources.stamps.row_tokens,
            given.budget - record_used,
            same_as=sources.same_as,
            needs=sources.plan.needs,
            stamps=sources.stamps,
        )
    order = ranking.order if ranking else ()
    packed = assemble_memory(
        counter,
        included,
        sources.stamps.rows,
        sources.stamps.row_tokens,
        kept_units,
        order,
        given.budget,
        sources.stamps,
    )
    if applied == "tomc" or packed.tokens <= given.input_tokens():
        return _Outcome(
            packed,
            applied,
            included,
            ranking,
            unchanged_reason,
            sources,
        )
    # Records added to a history that fits would make the memory larger than what it compiles:
    # give the history back as it is (it fits, since it costs less). Records only ("tomc") is
    # asked for by name and stays records: its callers (the chat work memory) put records
    # beside the history, never in place of it.
    unchanged_reason = (
        f"the compiled memory ({packed.tokens} tokens) would be larger than the "
        f"history ({given.input_tokens()}): returned unchanged"
    )
    for record in included:
        record.included = False
        record.reason = unchanged_reason
    return _Outcome(
        _unchanged(history, given.rows, given.input_tokens()),
        "unchanged",
        [],
        None,
        unchanged_reason,
    )


@dataclass(frozen=True, slots=True)
class _Sources:
    """Source rows as packed beside the records: identical rows once, with where they occur,
    the evidence plan of the included STATE rows, and the rows under shared stamps."""

    rows: Sequence[str]
    row_tokens: Sequence[int]
    same_as: dict[int, int]  # unit -> the identical unit that stands for it
    plan: EvidencePlan
    stamps: StampGroups  # the rows as packed: a shared stamp once above its group
    replaced: dict[int, str]  # unit -> the value that replaced the one it wrote, and where

    @classmethod
    def plain(cls, given: _Given) -> _Sources:
        """The rows as they are: no repeats folded, no evidence plan, no stamp groups."""
        stamps = StampGroups.none(given.rows, given.row_tokens)
        return cls(given.rows, given.row_tokens, {}, EvidencePlan([], {}), stamps, {})


def _sources_beside(
    included: list[Record],
    given: _Given,
    counter: TokenCounter,
    program: Program,
    noted: set[str],
) -> _Sources:
    rows, row_tokens = given.rows, given.row_tokens
    same_as: dict[int, int] = {}
    repeats: dict[int, str] = {}
    for units in identical_rows(rows).values():
        newest = units[-1]
        repeats[newest] = f"occurs {len(units)} times: {format_ids(units)}"
        for unit in units[:-1]:
            same_as[unit] = newest
    # A line that wrote a value a later line replaced says so: in the memory it must not read
    # as the current value. (A copy folded into its newest copy is never packed itself.)
    replaced = (
        {
            unit: f"{entry.name} = {entry.value} at u{entry.last_unit}"
            for unit, entry in replaced_writes(program.state_ops).items()
            if unit not in same_as and entry.name in noted
        }
        if noted
        else {}
    )
    if repeats or replaced:
        # The line is packed verbatim with a note on a line of its own (never read as part of
        # a value): where else it occurred, and what replaced its value. The note starts with
        # "[", where no pre-token continues across the line break, so its cost adds to the
        # line's.
        notes = {}
        for unit in [*repeats, *(unit for unit in replaced if unit not in repeats)]:
            said = [repeats[unit]] if unit in repeats else []
            if unit in replaced:
                said.append(f"{'it ' if said else ''}was replaced: {replaced[unit]}")
            notes[unit] = f"[the line above {'; '.join(said)}]"
        rows, row_tokens = list(rows), list(row_tokens)
        for (unit, note), cost in zip(
            notes.items(), row_costs(counter, list(notes.values())), strict=True
        ):
            rows[unit] = f"{rows[unit]}\n{note}"
            row_tokens[unit] += cost
    plan = plan_evidence(
        (r.writer, r.later, r.mentioning) for r in included if r.kind == "state" and r.mentioning
    )
    stamps = find_stamp_groups(rows, row_tokens, counter)
    return _Sources(rows, row_tokens, same_as, plan, stamps, replaced)


def _unchanged(history: History, rows: Sequence[str], input_tokens: int) -> Packed:
    """The history as it is: the text given, or a chat history's rows."""
    memory = history if isinstance(history, str) else "".join(row + "\n" for row in rows)
    return Packed(memory, input_tokens, list(range(len(rows))), {}, frozenset())


def _check_recount(counter: TokenCounter, packed: Packed, budget: int | None) -> None:
    """Refuse rather than overrun: the memory must re-count to its rows' figure.

    The lexical count and its character floor are additive over lines by construction, so
    only other counters are re-counted (BPE joins are settled in :mod:`tomc._core.packing`; a custom
    counter may not be additive at all).
    """
    if isinstance(counter, LexicalCounter):
        return
    recount = counter.count(packed.memory)
    if recount != packed.tokens or (budget is not None and recount > budget):
        raise BudgetError(
            f"packed memory re-counts to {recount} tokens with counter {counter.name!r}, "
            f"but its rows add up to {packed.tokens} (budget {budget}); the counter is not "
            "additive over newline-terminated rows"
        )


def _ledger_row(record: Record, counter: TokenCounter) -> LedgerRow:
    tokens = record.tokens if record.tokens >= 0 else row_costs(counter, [record.text])[0]
    ids = tuple(f"u{u}" for u in record.units)
    return LedgerRow(
        record.kind,
        record.key,
        record.value,
        record.text,
        ids,
        tokens,
        record.included,
        record.reason,
    )


def _source_units(table: SourceTable) -> tuple[SourceUnit, ...]:
    return tuple(
        SourceUnit(f"u{i}", text, role, message, line)
        for i, (text, role, message, line) in enumerate(
            zip(table.texts, table.roles, table.message_indexes, table.line_indexes, strict=True)
        )
    )
