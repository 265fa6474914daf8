"""Candidate records: STATE, RELATION and COUNT rows, with provenance, relevance and order.

Every candidate becomes one ledger row. The route's own kind comes first; within the order,
rows that the task names come before the rest, and rows the route did not ask for are listed
but never packed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .counting import CountEntry, count_terms, lines_with_all, top_terms
from .evidence import key_mentions
from .mentions import TaskMentions
from .operations import Copy, Program, Relation, Set
from .relations import PathEntry, collect_edges, join_relations
from .state import CHAIN_EDGE, Chain, replay_state
from .task_routes import TaskRoute

__all__ = [
    "CAPS",
    "FALLBACK_TOP_TERMS",
    "RELATION_SAFETY_LIMIT",
    "Record",
    "candidate_records",
    "format_ids",
    "shorter_forms",
]

CAPS = {"state": 96, "count": 80, "relation": 120}
#: STATE rows given their later mentions when the task names no key (see _note_later_mentions).
UNNAMED_MENTIONS = 16
#: Even the uncapped comparison mode stops enumerating relation paths here.
RELATION_SAFETY_LIMIT = 100_000


def format_ids(units: Sequence[int] | Chain) -> str:
    """``u0,u1,u3``; longer provenance shows its first and last four ids around an ellipsis.

    A :class:`Chain` is never materialised here: it knows its length and both ends.
    """
    if len(units) <= 2 * CHAIN_EDGE:
        return ",".join(f"u{u}" for u in units)
    if isinstance(units, Chain):
        head, tail = units.head, units.tail
    else:
        head, tail = units[:CHAIN_EDGE], units[-CHAIN_EDGE:]
    return ",".join([*(f"u{u}" for u in head), "…", *(f"u{u}" for u in tail)])


@dataclass(slots=True)
class Record:
    """A candidate record while compiling; becomes a :class:`tomc.LedgerRow`."""

    kind: str
    key: str
    value: str
    text: str
    units: Sequence[int] | Chain  # a state row's chain is shared, never copied
    relevant: bool
    eligible: bool
    tokens: int = -1
    included: bool = False
    reason: str = ""
    #: STATE rows whose key the task asks about: the unit that wrote the value, every unit that
    #: mentions the key, and those after the write that are no operation (see
    #: :mod:`tomc._core.evidence`).
    writer: int = -1
    mentioning: Sequence[int] = ()
    later: Sequence[int] = ()

    @property
    def asked(self) -> bool:
        """A STATE row whose key the task names: its value is the answer."""
        return self.kind == "state" and self.relevant


#: A row whose list of later mentions does not fit shows at most this many of the newest.
SHORT_MENTIONS = 3


def shorter_forms(record: Record) -> list[tuple[str, str]]:
    """The row with less of its annotation (the lines that mention its key later), fullest
    first and ending with the row without it, each with what the ledger says of it; none for
    a row without one.

    The newest mentions are kept longest: they are the ones packed beside the row
    (:data:`tomc._core.evidence.PROMOTED_MENTIONS`).
    """
    later = record.later
    if record.kind != "state" or not later:
        return []
    head = f"STATE {record.key} = {record.value} ({format_ids(record.units)}"
    n = len(later)
    lines = _plural(n, "line")
    mentions = f"its {_plural(n, 'later mention')}"
    forms = [
        (
            f"{head}; mentioned later: {lines}, newest {format_ids(later[-k:])})",
            f"{mentions} shortened to the newest {k}",
        )
        for k in range(min(SHORT_MENTIONS, n - 1), 0, -1)
    ]
    forms.append((f"{head}; mentioned later: {lines})", f"{mentions} shortened to their number"))
    forms.append((f"{head})", f"{mentions} left out of the row"))
    return forms


def _state_records(
    ops: list[tuple[int, Set | Copy]], route: TaskRoute, strategy: str, mentions: TaskMentions
) -> list[Record]:
    entries = replay_state(ops)
    named = set(mentions.variables([e.name for e in entries]))
    eligible = route.route == "state" or strategy == "tomc"
    relevant = [e for e in entries if e.name in named]
    rest = sorted((e for e in entries if e.name not in named), key=lambda e: -e.last_unit)
    return [
        Record(
            "state",
            e.name,
            e.value,
            f"STATE {e.name} = {e.value} ({format_ids(e.chain)})",
            e.chain,
            e.name in named,
            eligible or e.name in named,
        )
        for e in relevant + rest
    ]


def _note_later_mentions(
    state: list[Record],
    program: Program,
    texts: Sequence[str],
    route: TaskRoute,
    limit: int | None,
) -> None:
    """Give the STATE rows the task asks about the lines that mention their key, and say in
    the row which come after its last write: the rows the task names (up to ``limit``), else,
    for a state question ("the current values"), the first :data:`UNNAMED_MENTIONS` rows. Each
    key costs the scan a little, and a named key is what the reader will check."""
    asked = [r for r in state if r.eligible and r.relevant][:limit]
    if not asked and route.route == "state":
        asked = [r for r in state if r.eligible][:UNNAMED_MENTIONS]
    if not asked:
        return
    found = key_mentions(texts, {r.key for r in asked})
    operations = {unit for unit, _ in program.state_ops}
    operations.update(unit for unit, _ in program.relations)
    for record in asked:
        # A STATE row's units are its value's chain; the chain's own unit wrote the value.
        record.writer = record.units.unit if isinstance(record.units, Chain) else record.units[-1]
        record.mentioning = found[record.key]
        record.later = [u for u in record.mentioning if u > record.writer and u not in operations]
        if record.later:
            record.text = (
                f"STATE {record.key} = {record.value} ({format_ids(record.units)}; "
                f"mentioned later: {format_ids(record.later)})"
            )


def _relation_records(
    relations: list[tuple[int, Relation]],
    route: TaskRoute,
    strategy: str,
    mentions: TaskMentions,
    uncapped: bool,
) -> tuple[list[Record], bool]:
    edges = collect_edges(relations)
    nodes = dict.fromkeys(node for s, _, t, _ in edges for node in (s, t))  # first-seen order
    named = mentions.entities(nodes)
    if route.labels:
        limit = RELATION_SAFETY_LIMIT if uncapped else CAPS["relation"]
        # Paths through an entity the task names are enumerated first, so the cap keeps them.
        prefer = [node for node in nodes if node in named]  # a set's order is not stable
        paths, hit_limit = join_relations(edges, route.labels, limit, prefer=prefer)
        exceeded = hit_limit or len(paths) > CAPS["relation"]
        eligible = True
    else:
        paths = [PathEntry((s, t), (label,), units) for s, label, t, units in edges]
        exceeded = len(paths) > CAPS["relation"]
        eligible = route.route == "relation" or strategy == "tomc"
    labels = set() if route.labels else {label for _, label, _, _ in edges}
    named_labels = {label for label in labels if mentions.label(label)}
    records = []
    for path in paths:
        # A named entity anywhere on the path, or (for single edges) a named label, makes a
        # row relevant.
        relevant = any(node in named for node in path.nodes) or path.labels[0] in named_labels
        key = path.key  # built on each access
        records.append(
            Record(
                "relation",
                key,
                path.nodes[-1],
                f"RELATION {key} ({format_ids(path.source_units)})",
                path.source_units,
                relevant,
                eligible or relevant,
            )
        )
    records.sort(key=lambda r: not r.relevant)  # stable: enumeration order within each group
    return records, exceeded


#: With no term named and no frequency asked for, this many most frequent words are listed.
FALLBACK_TOP_TERMS = 10
#: A row for the lines containing all named terms is given for two to this many terms.
MAX_JOINED_TERMS = 4


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" if n == 1 else f"{n:,} {word}s"


def _count_text(entry: CountEntry, lines: int) -> str:
    """``COUNT "build" = 9 occurrences in 9 lines (forms: build 7, building 1, builds 1)``."""
    head = f'COUNT "{entry.term}" = '
    if not entry.occurrences:
        return f"{head}0 occurrences: none of the {_plural(lines, 'line')} contains it"
    text = (
        f"{head}{_plural(entry.occurrences, 'occurrence')} in "
        f"{_plural(len(entry.source_units), 'line')}"
    )
    if [form for form, _ in entry.forms] != [entry.term]:
        text += " (forms: " + ", ".join(f"{form} {n:,}" for form, n in entry.forms) + ")"
    return text


def _count_records(
    texts: Sequence[str], route: TaskRoute, uncapped: bool
) -> tuple[list[Record], bool]:
    """Rows for the terms the task names (even at 0), the lines holding all of them, and the
    most frequent words when the task asks for them (or names nothing to count)."""
    named = list(route.count_terms)
    cap = CAPS["count"]
    entries = count_terms(texts, named, inflect=not route.terms_quoted)
    records = [
        Record(
            "count",
            e.term,
            str(e.occurrences),
            _count_text(e, len(texts)),
            e.source_units,
            True,
            True,
        )
        for e in entries
    ]
    if 2 <= len(entries) <= MAX_JOINED_TERMS:
        units = lines_with_all(entries)
        quoted = " and ".join(f'"{e.term}"' for e in entries)
        records.append(
            Record(
                "count",
                " + ".join(e.term for e in entries),
                str(len(units)),
                f"COUNT lines with {quoted} = {_plural(len(units), 'line')}",
                units,
                True,
                True,
            )
        )
    if not named and not route.wants_top_terms:
        records.append(
            Record(
                "count",
                "lines",
                str(len(texts)),
                f"COUNT lines = {_plural(len(texts), 'nonempty line')}",
                (),
                True,
                True,
            )
        )
    exceeded = len(records) > cap
    if route.wants_top_terms or not named:
        room = None if uncapped else max(cap - len(records), 0)
        if route.top_k is not None:
            room = route.top_k if room is None else min(room, route.top_k)
        elif not route.wants_top_terms:
            room = FALLBACK_TOP_TERMS if room is None else min(room, FALLBACK_TOP_TERMS)
        top, distinct = top_terms(texts, room, exclude=named)
        exceeded = len(records) + distinct > cap if route.wants_top_terms else exceeded
        for entry in top:
            records.append(
                Record(
                    "count",
                    entry.term,
                    str(entry.occurrences),
                    _count_text(entry, len(texts)),
                    entry.source_units,
                    route.wants_top_terms,
                    True,
                )
            )
    return records, exceeded


def candidate_records(
    program: Program,
    texts: Sequence[str],
    route: TaskRoute,
    strategy: str,
    task: str,
    uncapped: bool,
) -> tuple[list[Record], dict[str, bool]]:
    """Every candidate record in packing order, and per kind whether its cap was exceeded.

    Order: task-relevant rows of the route's kind, task-relevant rows of other kinds, the
    route's other rows, everything else; rows the route did not ask for come last, with the
    reason already set.
    """
    mentions = TaskMentions(task)
    state = _state_records(program.state_ops, route, strategy, mentions)
    _note_later_mentions(state, program, texts, route, None if uncapped else CAPS["state"])
    caps_exceeded = {"state": sum(r.eligible for r in state) > CAPS["state"]}
    relation, caps_exceeded["relation"] = _relation_records(
        program.relations, route, strategy, mentions, uncapped
    )
    count: list[Record] = []
    caps_exceeded["count"] = False
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
    return records, {kind: caps_exceeded[kind] for kind in ("state", "relation", "count")}
