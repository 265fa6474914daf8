"""Relation joins: paths that follow a requested label sequence exactly.

``alice -[assigned]-> team`` and ``team -[owns]-> archive`` join along ``assigned > owns``; no
other transitivity is inferred. Its twin in ``tests/reference.py`` enumerates every edge
sequence by brute force; the property tests check that they agree.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

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
    for unit, rel in relations:
        key = (normalize(rel.source), normalize(rel.label), normalize(rel.target))
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

    Paths starting at a node in ``prefer`` (as spelled in ``edges``) are enumerated first.

    Returns ``(paths, exceeded)``: at most ``limit`` paths, and whether more exist. Nodes that
    cannot complete the rest of the sequence are pruned first (one backward pass), so the
    search never wanders into dead ends and its work is bounded by the paths it returns.
    A path never uses the same edge twice.
    """
    wanted = [normalize(label) for label in labels]
    if not wanted:
        return [], False
    keys = [(normalize(s), normalize(label), normalize(t)) for s, label, t, _ in edges]
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
    preferred = {normalize(node) for node in prefer}
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


def _path_entry(edges: Sequence[Edge], path: tuple[int, ...]) -> PathEntry:
    nodes = [edges[path[0]][0]] + [edges[index][2] for index in path]
    labels = tuple(edges[index][1] for index in path)
    units = sorted({unit for index in path for unit in edges[index][3]})
    return PathEntry(tuple(nodes), labels, tuple(units))
