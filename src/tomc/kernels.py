"""Fast kernels: state replay, relation joins and lexical counts.

Each has a small, obviously correct twin in :mod:`tomc.reference`; property tests check that
they agree. Unit indexes are positions in the source table (``u{index}``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from .lexicon import CJK_CHAR, WORD_PATTERN, is_content_word
from .operations import Copy, Relation, Set
from .result import UNKNOWN

__all__ = [
    "CountEntry",
    "PathEntry",
    "StateEntry",
    "count_terms",
    "join_relations",
    "replay_state",
    "top_terms",
]


@dataclass(frozen=True, slots=True)
class StateEntry:
    name: str
    value: str
    source_units: tuple[int, ...]  # the whole supporting chain, oldest first
    last_unit: int  # the unit that last wrote this variable


class _Link:
    """One step of a provenance chain; copies share their source's chain instead of copying it."""

    __slots__ = ("parent", "unit")

    def __init__(self, unit: int, parent: _Link | None) -> None:
        self.unit = unit
        self.parent = parent

    def units(self) -> tuple[int, ...]:
        out = []
        link: _Link | None = self
        while link is not None:
            out.append(link.unit)
            link = link.parent
        out.reverse()
        return tuple(out)


def replay_state(operations: Iterable[tuple[int, Set | Copy]]) -> list[StateEntry]:
    """Execute SET and COPY in source order; a COPY snapshots its source's value at that point.

    Linear in the number of operations: a copy links to its source's provenance rather than
    copying the chain. Entries come in order of each variable's first write.
    """
    values: dict[str, tuple[str, _Link, int]] = {}
    for unit, op in operations:
        if type(op) is Set:
            values[op.name] = (op.value, _Link(unit, None), unit)
        else:
            source = values.get(op.source)
            if source is None:
                values[op.target] = (UNKNOWN, _Link(unit, None), unit)
            else:
                values[op.target] = (source[0], _Link(unit, source[1]), unit)
    return [
        StateEntry(name, value, link.units(), last) for name, (value, link, last) in values.items()
    ]


@dataclass(frozen=True, slots=True)
class PathEntry:
    nodes: tuple[str, ...]  # endpoints as first written
    labels: tuple[str, ...]
    source_units: tuple[int, ...]  # every unit stating an edge of the path, ascending

    @property
    def key(self) -> str:
        parts = [self.nodes[0]]
        for label, node in zip(self.labels, self.nodes[1:], strict=True):
            parts.append(f"-[{label}]-> {node}")
        return " ".join(parts)


def _norm(text: str) -> str:
    return " ".join(text.casefold().split())


def collect_edges(
    relations: Iterable[tuple[int, Relation]],
) -> list[tuple[str, str, str, tuple[int, ...]]]:
    """Distinct edges ``(source, label, target, units)`` in order of first statement.

    Endpoints and labels compare case- and space-insensitively; the first spelling is kept.
    """
    edges: dict[tuple[str, str, str], list] = {}
    for unit, rel in relations:
        key = (_norm(rel.source), _norm(rel.label), _norm(rel.target))
        entry = edges.get(key)
        if entry is None:
            edges[key] = [rel.source, rel.label, rel.target, [unit]]
        else:
            entry[3].append(unit)
    return [(s, label, t, tuple(units)) for s, label, t, units in edges.values()]


def join_relations(
    edges: Sequence[tuple[str, str, str, tuple[int, ...]]],
    labels: Sequence[str],
    limit: int | None,
    prefer: Collection[str] = (),
) -> tuple[list[PathEntry], bool]:
    """Paths that follow exactly ``labels`` (no other transitivity), depth first in edge order.

    Paths starting at a node in ``prefer`` (as spelled in ``edges``) are enumerated first.

    Returns ``(paths, exceeded)``: at most ``limit`` paths, and whether more exist. Nodes that
    cannot complete the rest of the sequence are pruned first (one backward pass), so the
    search never wanders into dead ends and its work is bounded by the paths it returns.
    A path never uses the same edge twice.
    """
    wanted = [_norm(label) for label in labels]
    if not wanted:
        return [], False
    keys = [(_norm(s), _norm(label), _norm(t)) for s, label, t, _ in edges]
    outgoing: dict[tuple[str, str], list[int]] = {}
    for index, (source, label, _) in enumerate(keys):
        outgoing.setdefault((source, label), []).append(index)
    # viable[k]: nodes from which labels[k:] can be followed; the end of a path is always viable.
    viable: list[set[str] | None] = [None] * (len(wanted) + 1)
    for k in range(len(wanted) - 1, -1, -1):
        after = viable[k + 1]
        viable[k] = {
            s for s, label, t in keys if label == wanted[k] and (after is None or t in after)
        }
    paths: list[tuple[int, ...]] = []
    exceeded = False
    starts = [
        index
        for index in range(len(keys))
        if keys[index][1] == wanted[0] and keys[index][0] in viable[0]  # type: ignore[operator]
    ]
    preferred = {_norm(node) for node in prefer}
    starts.sort(key=lambda index: keys[index][0] not in preferred)  # stable
    stack: list[tuple[int, ...]] = [(index,) for index in reversed(starts)]
    while stack:
        path = stack.pop()
        depth = len(path)
        if depth == len(wanted):
            if limit is not None and len(paths) >= limit:
                exceeded = True
                break
            paths.append(path)
            continue
        after = viable[depth + 1]
        end = keys[path[-1]][2]
        for index in reversed(outgoing.get((end, wanted[depth]), ())):
            if index not in path and (after is None or keys[index][2] in after):
                stack.append((*path, index))
    return [_path_entry(edges, path) for path in paths], exceeded


def _path_entry(
    edges: Sequence[tuple[str, str, str, tuple[int, ...]]], path: tuple[int, ...]
) -> PathEntry:
    nodes = [edges[path[0]][0]] + [edges[index][2] for index in path]
    labels = tuple(edges[index][1] for index in path)
    units = sorted({unit for index in path for unit in edges[index][3]})
    return PathEntry(tuple(nodes), labels, tuple(units))


@dataclass(frozen=True, slots=True)
class CountEntry:
    term: str
    occurrences: int
    source_units: tuple[int, ...]  # units containing the term, ascending


def count_terms(texts: Sequence[str], terms: Sequence[str]) -> list[CountEntry]:
    """Occurrences of each term over all lines.

    A word term counts lower-cased lexical tokens equal to it; a CJK term (one that contains
    CJK characters) counts non-overlapping substring occurrences, because CJK words are not
    separated by spaces.
    """
    word_terms = {t for t in terms if not CJK_CHAR.search(t)}
    cjk_terms = [t for t in dict.fromkeys(terms) if CJK_CHAR.search(t)]
    occurrences: Counter[str] = Counter()
    units: dict[str, list[int]] = {t: [] for t in terms}
    for index, text in enumerate(texts):
        lower = text.lower()
        if word_terms:
            found = [t for t in WORD_PATTERN.findall(lower) if t in word_terms]
            if found:
                occurrences.update(found)
                for term in set(found):
                    units[term].append(index)
        for term in cjk_terms:
            n = lower.count(term)
            if n:
                occurrences[term] += n
                units[term].append(index)
    return [CountEntry(t, occurrences[t], tuple(units[t])) for t in dict.fromkeys(terms)]


def top_terms(
    texts: Sequence[str], k: int | None, exclude: Iterable[str] = ()
) -> tuple[list[str], int]:
    """The ``k`` most frequent content words (ties alphabetical; ``None``: all), and how many
    distinct content words there are."""
    totals = Counter(WORD_PATTERN.findall("\n".join(texts).lower()))
    skip = set(exclude)
    candidates = [
        t for t in totals if is_content_word(t) and t not in skip and not CJK_CHAR.match(t)
    ]
    ranked = sorted(candidates, key=lambda t: (-totals[t], t))
    return (ranked if k is None else ranked[:k]), len(candidates)
