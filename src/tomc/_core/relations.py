"""Relation joins: paths that follow a requested label sequence exactly.

``alice -[assigned]-> team`` and ``team -[owns]-> archive`` join along ``assigned > owns``; no
other transitivity is inferred. Its twin in ``tests/reference.py`` enumerates every edge
sequence by brute force; the property tests check that they agree.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import chain as _chain

from .operations import Relation

__all__ = ["Edge", "PathEntry", "collect_edges", "join_relations"]

#: ``(source, label, target, units)``: one distinct edge, spelled as first stated.
Edge = tuple[str, str, str, tuple[int, ...]]


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


def normalize(text: str) -> str:
    """How endpoints and labels compare: case-folded, runs of white space as one space."""
    return " ".join(text.casefold().split())


def collect_edges(relations: Iterable[tuple[int, Relation]]) -> list[Edge]:
    """Distinct edges ``(source, label, target, units)`` in order of first statement.

    Endpoints and labels compare case- and space-insensitively; the first spelling is kept.
    """
    edges: dict[tuple[str, str, str], list] = {}
    folded: dict[str, str] = {}  # endpoints and labels repeat: normalise each spelling once

    def norm(text: str) -> str:
        value = folded.get(text)
        if value is None:
            value = folded[text] = normalize(text)
        return value

    for unit, rel in relations:
        key = (norm(rel.source), norm(rel.label), norm(rel.target))
        entry = edges.get(key)
        if entry is None:
            edges[key] = [rel.source, rel.label, rel.target, [unit]]
        else:
            entry[3].append(unit)
    return [(s, label, t, tuple(units)) for s, label, t, units in edges.values()]


def join_relations(
    edges: Sequence[Edge],
    labels: Sequence[str],
    limit: int | None,
    prefer: Collection[str] = (),
) -> tuple[list[PathEntry], bool]:
    """Paths that follow exactly ``labels`` (no other transitivity), depth first in edge order.

    Paths that pass through a node in ``prefer`` anywhere (start, middle or end) come first,
    so a cap keeps them; then every other path.

    Returns ``(paths, exceeded)``: at most ``limit`` paths, and whether more exist. Nodes that
    cannot complete the rest of the sequence, or cannot be reached by its beginning, are
    pruned first (one pass each way), so every partial path the search extends completes and
    its work is bounded by the paths it returns. A path never uses the same edge twice.
    """
    wanted = [normalize(label) for label in labels]
    if not wanted:
        return [], False
    join = _Join(edges, wanted)
    found: dict[tuple[int, ...], None] = {}
    exceeded = False
    for path in _chain(join.through(prefer), join.all_paths()):
        if path in found:
            continue
        if limit is not None and len(found) >= limit:
            exceeded = True
            break
        found[path] = None
    return [_path_entry(edges, path) for path in found], exceeded


class _Join:
    """The pruned search space of one label sequence."""

    def __init__(self, edges: Sequence[Edge], wanted: list[str]) -> None:
        self.wanted = wanted
        self.keys = [(normalize(s), normalize(label), normalize(t)) for s, label, t, _ in edges]
        self.outgoing: dict[tuple[str, str], list[int]] = {}
        self.incoming: dict[tuple[str, str], list[int]] = {}
        for index, (source, label, target) in enumerate(self.keys):
            self.outgoing.setdefault((source, label), []).append(index)
            self.incoming.setdefault((target, label), []).append(index)
        depth = len(wanted)
        # viable[k]: nodes from which wanted[k:] can be followed (None: any node, at the end).
        self.viable: list[set[str] | None] = [None] * (depth + 1)
        for k in range(depth - 1, -1, -1):
            after = self.viable[k + 1]
            self.viable[k] = {
                s for s, lab, t in self.keys if lab == wanted[k] and (after is None or t in after)
            }
        # reach[k]: nodes that wanted[:k] can lead to (None: any node, at the start).
        self.reach: list[set[str] | None] = [None] * (depth + 1)
        for k in range(1, depth + 1):
            prior, label = self.reach[k - 1], wanted[k - 1]
            self.reach[k] = {
                t for s, lab, t in self.keys if lab == label and (prior is None or s in prior)
            }

    def _fits(self, node: str, position: int) -> bool:
        viable, reach = self.viable[position], self.reach[position]
        return (viable is None or node in viable) and (reach is None or node in reach)

    def _step(self, index: int, depth: int) -> bool:
        """Whether edge ``index`` can be the path's edge at ``depth`` and still complete."""
        after = self.viable[depth + 1]
        return self.keys[index][1] == self.wanted[depth] and (
            after is None or self.keys[index][2] in after
        )

    def _extend(self, firsts: Iterable[int], position: int) -> Iterator[tuple[int, ...]]:
        """Complete paths from the edges ``firsts`` at ``position``, depth first, in order."""
        stack = [(index,) for index in firsts if self._step(index, position)]
        stack.reverse()
        while stack:
            path = stack.pop()
            depth = position + len(path)
            if depth == len(self.wanted):
                yield path
                continue
            end = self.keys[path[-1]][2]
            for index in reversed(self.outgoing.get((end, self.wanted[depth]), ())):
                if index not in path and self._step(index, depth):
                    stack.append((*path, index))

    def forward(self, node: str, position: int) -> Iterator[tuple[int, ...]]:
        """Edge sequences following wanted[position:] from ``node``."""
        if position == len(self.wanted):
            return iter([()])
        return self._extend(self.outgoing.get((node, self.wanted[position]), ()), position)

    def backward(self, node: str, position: int) -> Iterator[tuple[int, ...]]:
        """Edge sequences following wanted[:position] that end at ``node``."""
        if position == 0:
            yield ()
            return
        stack: list[tuple[int, ...]] = []
        before = self.reach[position - 1]
        for index in reversed(self.incoming.get((node, self.wanted[position - 1]), ())):
            if before is None or self.keys[index][0] in before:
                stack.append((index,))
        while stack:
            path = stack.pop()  # edges in reverse order
            depth = position - len(path)
            if depth == 0:
                yield tuple(reversed(path))
                continue
            before = self.reach[depth - 1]
            start = self.keys[path[-1]][0]
            for index in reversed(self.incoming.get((start, self.wanted[depth - 1]), ())):
                if index not in path and (before is None or self.keys[index][0] in before):
                    stack.append((*path, index))

    def through(self, prefer: Collection[str]) -> Iterator[tuple[int, ...]]:
        """Paths through a preferred node, by node, then by its position in the path."""
        for node in dict.fromkeys(normalize(n) for n in prefer):
            for position in range(len(self.wanted) + 1):
                if not self._fits(node, position):
                    continue
                for head in self.backward(node, position):
                    for tail in self.forward(node, position):
                        if not set(head) & set(tail):
                            yield head + tail

    def all_paths(self) -> Iterator[tuple[int, ...]]:
        """Every path, in order of its first edge."""
        return self._extend(range(len(self.keys)), 0)


def _path_entry(edges: Sequence[Edge], path: tuple[int, ...]) -> PathEntry:
    nodes = [edges[path[0]][0]] + [edges[index][2] for index in path]
    labels = tuple(edges[index][1] for index in path)
    units = sorted({unit for index in path for unit in edges[index][3]})
    return PathEntry(tuple(nodes), labels, tuple(units))
