"""Candidate records: STATE, RELATION and COUNT rows, with provenance, relevance and order.

Every candidate becomes one ledger row. The route's own kind comes first; within the order,
rows that the task names come before the rest, and rows the route did not ask for are listed
but never packed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .counting import count_terms, top_terms
from .mentions import TaskMentions
from .operations import Copy, Program, Relation, Set
from .relations import PathEntry, collect_edges, join_relations
from .router import Route
from .state import CHAIN_EDGE, Chain, replay_state

__all__ = ["CAPS", "RELATION_SAFETY_LIMIT", "Record", "candidate_records", "format_ids"]

CAPS = {"state": 96, "count": 80, "relation": 120}
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


def _state_records(
    ops: list[tuple[int, Set | Copy]], route: Route, strategy: str, mentions: TaskMentions
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


def _relation_records(
    relations: list[tuple[int, Relation]],
    route: Route,
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
        records.append(
            Record(
                "relation",
                path.key,
                path.nodes[-1],
                f"RELATION {path.key} ({format_ids(path.source_units)})",
                path.source_units,
                relevant,
                eligible or relevant,
            )
        )
    records.sort(key=lambda r: not r.relevant)  # stable: enumeration order within each group
    return records, exceeded


def _count_records(texts: Sequence[str], route: Route, uncapped: bool) -> tuple[list[Record], bool]:
    named = list(route.count_terms)
    cap = CAPS["count"]
    room = None if uncapped else max(cap - len(named), 0)
    top, distinct = top_terms(texts, room, exclude=named)
    exceeded = len(named) + distinct > cap
    records = []
    for entry in count_terms(texts, named + top):
        relevant = entry.term in route.count_terms
        records.append(
            Record(
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


def candidate_records(
    program: Program,
    texts: Sequence[str],
    route: Route,
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
