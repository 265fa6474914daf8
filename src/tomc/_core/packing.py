"""Whole-row packing: take rows in priority order whenever they still fit the budget.

A row is packed whole or not at all, so the memory never cuts a record or a source line. Each
row is charged its :func:`tomc._core.tokens.row_costs`; for a counter whose tokens can span a line
break (o200k, see :meth:`tomc._core.bpe.BpeCounter.joins`), :func:`settle_joined_rows` then counts
the rows that join as one run, so the memory's figure is exactly what it re-counts to.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .records import CAPS, Record, shorter_forms
from .sources import SourceTable
from .stamps import StampGroups
from .tokens import TokenCounter, row_costs

__all__ = [
    "Packed",
    "Settled",
    "assemble_memory",
    "identical_rows",
    "note_rows_shown",
    "pack_records",
    "pack_sources",
    "row_texts",
    "settle_joined_rows",
]


def row_texts(table: SourceTable) -> Sequence[str]:
    """What each source unit packs as: its text, after ``role: `` in a chat history."""
    if not table.is_chat:
        return table.texts
    return [f"{role}: {text}" for role, text in zip(table.roles, table.texts, strict=True)]


def pack_records(
    records: list[Record],
    budget: int,
    counter: TokenCounter,
    uncapped: bool,
    whole_budget: int | None = None,
) -> int:
    """Mark the eligible records that fit, in order, at most ``CAPS`` per kind; tokens used.

    A row is never crowded out by its own annotation: one whose later mentions do not fit
    takes them shortened, or leaves them out (:func:`tomc._core.records.shorter_forms`). A row
    the task asks for (:attr:`Record.asked`) whose plain form does not fit what is left of
    ``budget`` takes it from what is left of ``whole_budget`` (the memory's, beyond the record
    share): its value is the answer.
    """
    used = 0
    kept_per_kind: dict[str, int] = {}
    candidates = []
    for record in records:
        if not record.eligible:
            continue
        cap = CAPS[record.kind]
        if not uncapped and kept_per_kind.get(record.kind, 0) >= cap:
            record.reason = f"over cap ({cap} {record.kind} rows)"
            continue
        kept_per_kind[record.kind] = kept_per_kind.get(record.kind, 0) + 1
        candidates.append(record)
    whole = budget if whole_budget is None else max(whole_budget, budget)
    for record, tokens in zip(
        candidates, row_costs(counter, [r.text for r in candidates]), strict=True
    ):
        record.tokens = tokens
        text, cost, record.reason = _fit_record(
            record, tokens, max(budget - used, 0), whole - used, counter
        )
        if cost is not None:
            record.text, record.tokens, record.included = text, cost, True
            used += cost
    return used


def _fit_record(
    record: Record, tokens: int, left: int, whole_left: int, counter: TokenCounter
) -> tuple[str, int | None, str]:
    """The record's text as packed, its cost (None: it does not fit) and its ledger reason:
    whole within ``left`` of the record share, else with less of its annotation, else (a row
    the task asks for) its plain form within ``whole_left`` of the memory's budget."""
    fits = "task-relevant; fits record budget" if record.relevant else "fits record budget"
    if tokens <= left:
        return record.text, tokens, fits
    forms = shorter_forms(record)
    costs = row_costs(counter, [text for text, _ in forms]) if forms else []
    for (text, said), cost in zip(forms, costs, strict=True):
        if cost <= left:
            return (
                text,
                cost,
                f"{fits} with {said}: the whole row needs {tokens} tokens, {left} were left",
            )
    plain_text, plain = (forms[-1][0], costs[-1]) if forms else (record.text, tokens)
    if record.asked and plain <= whole_left:
        reason = (
            "task-relevant; the task asks for this key: packed before the source lines, "
            f"past the record share ({left} tokens of it were left)"
        )
        return plain_text, plain, reason + (f", with {forms[-1][1]}" if forms else "")
    without = f"; {plain} without its later mentions" if forms else ""
    return record.text, None, f"over record budget (needs {tokens}, {left} left{without})"


def note_rows_shown(
    records: list[Record], budget: int, used: int, counter: TokenCounter
) -> tuple[list[Record], int]:
    """Where COUNT rows the task asked for were left out for budget, a row that says how many
    of how many are shown, right after the last shown one; shown rows make room for it
    (newest-packed first). Returns the records (the note among them) and the tokens used."""
    asked = [r for r in records if r.kind == "count" and r.eligible]
    if not any(r.reason.startswith("over record budget") for r in asked):
        return records, used
    shown = [r for r in asked if r.included]

    def note_text() -> str:
        left = len(asked) - len(shown)
        return f"COUNT rows shown: {len(shown)} of {len(asked)}; {left} more did not fit the budget"

    cost = row_costs(counter, [note_text()])[0]
    while shown and used + cost > budget:
        dropped = shown.pop()
        dropped.included = False
        dropped.reason = "over record budget (made room for the note of how many rows are shown)"
        used -= dropped.tokens
        cost = row_costs(counter, [note_text()])[0]
    if used + cost > budget:
        return records, used
    note = Record("count", "rows shown", str(len(shown)), note_text(), (), True, True, cost)
    note.included = True
    note.reason = "says how many of the COUNT rows asked for fit the budget"
    at = records.index(shown[-1]) + 1 if shown else 0
    return [*records[:at], note, *records[at:]], used + cost


def pack_sources(
    order: Iterable[int],
    row_tokens: Sequence[int],
    budget: int,
    *,
    same_as: Mapping[int, int] | None = None,
    needs: Mapping[int, tuple[int, ...]] | None = None,
    stamps: StampGroups | None = None,
) -> list[int]:
    """The rows, taken in ``order`` whenever they still fit, back in source order.

    ``same_as`` maps a row to the identical row that stands for it (a line is packed once,
    where its newest copy is, when any copy's turn comes); ``needs`` maps a row to rows it is
    packed only beside, which ``order`` must decide before it. With ``stamps``, the first row
    of a group to be kept also pays for the group's stamp line.
    """
    left = budget
    kept: list[int] = []
    taken: set[int] = set()
    group_of = stamps.group_of if stamps else {}
    opened: set[int] = set()
    stand_ins = set(same_as.values()) if same_as else set()
    decided: set[int] = set()  # stand-ins whose turn came (through any of their copies)
    for index in order:
        if stand_ins:
            index = same_as.get(index, index)  # type: ignore[union-attr]
            if index in stand_ins:
                if index in decided:
                    continue
                decided.add(index)
        if needs and index in needs and not taken.issuperset(needs[index]):
            continue
        cost = row_tokens[index]
        group = group_of.get(index) if group_of else None
        if group is not None and group not in opened:
            cost += stamps.header_tokens[group]  # type: ignore[union-attr]
        if cost <= left:
            left -= cost
            kept.append(index)
            taken.add(index)
            if group is not None:
                opened.add(group)
    kept.sort()
    return kept


def identical_rows(rows: Sequence[str]) -> dict[str, list[int]]:
    """Row text -> its units, for every text that occurs more than once (source order)."""
    repeated = {row for row, times in Counter(rows).items() if times > 1}  # counted in C
    units: dict[str, list[int]] = {row: [] for row in repeated}
    if repeated:
        for index, row in enumerate(rows):
            if row in repeated:
                units[row].append(index)
    return units


@dataclass(frozen=True, slots=True)
class Packed:
    """The memory text, its exact tokens, and which source units it holds."""

    memory: str
    tokens: int
    kept_units: list[int]  # source order
    extra: dict[int, int]  # unit -> tokens beyond its own, joined with the line before it
    squeezed: frozenset[int]  # units that fitted alone but were left out for joined lines
    headers: dict[int, int] = field(default_factory=dict)  # unit -> its stamp line's tokens


def assemble_memory(
    counter: TokenCounter,
    records: Sequence[Record],
    rows: Sequence[str],
    row_tokens: Sequence[int],
    kept_units: list[int],
    rank_order: Sequence[int],
    budget: int,
    stamps: StampGroups | None = None,
) -> Packed:
    """Included records in packing order, then the kept source rows in source order.

    With ``stamps``, ``rows`` and ``row_tokens`` are the stamp groups' and each group's stamp
    line comes before its first kept row.
    """
    texts = [r.text for r in records]
    costs = [r.tokens for r in records]
    unit_at: dict[int, int] = {}  # position in the memory -> the unit there (not a stamp line)
    group_of = stamps.group_of if stamps else {}
    previous = None
    for unit in kept_units:
        group = group_of.get(unit)
        if group is not None and group != previous:
            texts.append(stamps.headers[group])  # type: ignore[union-attr]
            costs.append(stamps.header_tokens[group])  # type: ignore[union-attr]
        previous = group
        unit_at[len(texts)] = unit
        texts.append(rows[unit])
        costs.append(row_tokens[unit])
    if not hasattr(counter, "joins"):
        memory = "\n".join(texts) + "\n" if texts else ""  # each row and its line break
        headers = _stamp_lines_above(range(len(texts)), unit_at, costs, len(records), group_of)
        return Packed(memory, sum(costs), kept_units, {}, frozenset(), headers)
    position = {unit: p for p, unit in unit_at.items()}
    least_first = (position[unit] for unit in reversed(rank_order) if unit in position)
    settled = settle_joined_rows(counter, texts, costs, budget, least_first)
    still = [unit_at[p] for p in settled.kept if p in unit_at]
    headers = _stamp_lines_above(settled.kept, unit_at, costs, len(records), group_of)
    extra: dict[int, int] = {}
    for p, tokens in settled.extra.items():
        # A stamp line ends a joined run only before its group's first row: counted there.
        unit = unit_at.get(p, unit_at.get(p + 1))
        if unit is not None:
            extra[unit] = extra.get(unit, 0) + tokens
    return Packed(
        "".join(texts[p] + "\n" for p in settled.kept),
        settled.total,
        still,
        extra,
        frozenset(kept_units) - frozenset(still),
        headers,
    )


def _stamp_lines_above(
    kept: Iterable[int],
    unit_at: Mapping[int, int],
    costs: Sequence[int],
    first_row: int,
    group_of: Mapping[int, int],
) -> dict[int, int]:
    """Unit -> tokens of the stamp line written right above it, over the positions ``kept``
    (rows from ``first_row`` on; those that hold no unit are stamp lines). None without groups."""
    headers: dict[int, int] = {}
    if not group_of:
        return headers
    pending = None
    for p in kept:
        if p >= first_row and p not in unit_at:
            pending = costs[p]
        elif pending is not None:
            headers[unit_at[p]], pending = pending, None
    return headers


@dataclass(frozen=True, slots=True)
class Settled:
    """The emitted rows that stay, the memory's exact tokens, and where joined runs differ."""

    kept: list[int]  # positions in the emitted order
    total: int
    extra: dict[int, int]  # position of a joined run's last row -> tokens beyond the rows' own


def settle_joined_rows(
    counter: TokenCounter,
    texts: Sequence[str],
    costs: Sequence[int],
    budget: int,
    removable: Iterable[int],
) -> Settled:
    """Make the emitted rows' total exact, and keep it within ``budget``.

    ``texts`` and ``costs`` are the rows in memory order, each costed on its own; their sum is
    within the budget. Where ``counter.joins`` says a pre-token spans a line break, the rows
    are re-counted as one run, which can cost more or less. If that pushes the total over
    ``budget``, rows in ``removable`` (positions, least important first) are left out until
    it fits.

    Linear: a removal re-counts only the runs beside it, and should that work ever exceed a
    few passes over the rows, every row that joins the row before it is left out instead, so
    that no runs remain and the rows' own costs (within the budget) are the total.
    """
    joins = getattr(counter, "joins", None)
    n = len(texts)
    if joins is None or not any(map(joins, texts, texts[1:])):
        return Settled(list(range(n)), sum(costs), {})
    # The kept rows as a doubly linked list in memory order; -1 and n end it.
    before = list(range(-1, n - 1))
    after = list(range(1, n + 1))
    work = 0
    work_limit = 4 * sum(map(len, texts)) + 64 * n

    def run_of(first: int) -> list[int]:
        run = [first]
        while after[run[-1]] < n and joins(texts[run[-1]], texts[after[run[-1]]]):
            run.append(after[run[-1]])
        return run

    def run_start(position: int) -> int:
        while before[position] >= 0 and joins(texts[before[position]], texts[position]):
            position = before[position]
        return position

    def runs_extra(first: int, last: int) -> int:
        """Tokens beyond the rows' own costs, over the runs from ``first`` (a run start)
        through the one that contains ``last``."""
        nonlocal work
        extra = 0
        position = first
        while True:
            run = run_of(position)
            if len(run) > 1:
                text = "".join(texts[p] + "\n" for p in run)
                work += len(text)
                extra += counter.count(text) - sum(costs[p] for p in run)
            if run[-1] >= last or after[run[-1]] >= n:
                return extra
            position = after[run[-1]]

    total = sum(costs) + runs_extra(0, n - 1)
    pending = iter(removable)
    removed = set()
    while total > budget and work <= work_limit:
        gone = next(pending, None)
        if gone is None:
            break
        left, right = before[gone], after[gone]
        start = run_start(left) if left >= 0 else gone
        old = runs_extra(start, right if right < n else gone)
        if left >= 0:
            after[left] = right
        if right < n:
            before[right] = left
        removed.add(gone)
        if start == gone:
            start = right
        last = right if right < n else left
        new = runs_extra(start, last) if start < n and last >= 0 else 0
        total += new - old - costs[gone]
    kept = [p for p in range(n) if p not in removed]
    if total > budget:  # too much re-counting
        return _without_joins(joins, texts, costs, kept)
    return Settled(kept, total, _extra_by_row(counter, texts, costs, kept))


def _without_joins(
    joins: Callable[[str, str], bool], texts: Sequence[str], costs: Sequence[int], kept: list[int]
) -> Settled:
    """``kept`` less every row that joins the row before it: no runs are left, so the rows'
    own costs are the total."""
    clean = kept[:1]
    for position in kept[1:]:
        if not joins(texts[clean[-1]], texts[position]):
            clean.append(position)
    return Settled(clean, sum(costs[p] for p in clean), {})


def _extra_by_row(
    counter: TokenCounter, texts: Sequence[str], costs: Sequence[int], kept: list[int]
) -> dict[int, int]:
    """For each joined run among ``kept``, its tokens beyond the rows' own, on its last row."""
    joins = counter.joins  # type: ignore[attr-defined]
    extra: dict[int, int] = {}
    run = kept[:1]
    for position in [*kept[1:], -1]:
        if position >= 0 and joins(texts[run[-1]], texts[position]):
            run.append(position)
            continue
        if len(run) > 1:
            text = "".join(texts[p] + "\n" for p in run)
            extra[run[-1]] = counter.count(text) - sum(costs[p] for p in run)
        run = [position]
    return extra
