"""Relation joins against the brute-force reference oracle; caps, pruning and preference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reference import reference_paths
from tomc._core.operations import Relation
from tomc._core.relations import collect_edges, join_relations

nodes = st.sampled_from(["alice", "bob", "Team", "team", "archive", "x y"])
labels = st.sampled_from(["assigned", "owns", "Owns", "likes"])


@given(
    st.lists(st.tuples(nodes, labels, nodes), max_size=9),
    st.lists(labels, min_size=1, max_size=3),
)
def test_relation_join_matches_reference(edges, wanted) -> None:
    relations = [(i, Relation(s, label, t)) for i, (s, label, t) in enumerate(edges)]
    paths, exceeded = join_relations(collect_edges(relations), wanted, None)
    assert not exceeded
    fast = {(tuple(" ".join(n.casefold().split()) for n in p.nodes), p.source_units) for p in paths}
    assert fast == reference_paths(relations, wanted)
    assert len(paths) == len(fast)  # no duplicate paths


def test_relation_join_follows_exact_label_sequence() -> None:
    relations = [
        (0, Relation("alice", "assigned", "team")),
        (1, Relation("team", "owns", "archive")),
        (2, Relation("archive", "owns", "vault")),  # owns > owns: not requested
        (3, Relation("bob", "likes", "team")),
    ]
    paths, _ = join_relations(collect_edges(relations), ["assigned", "owns"], None)
    assert [p.key for p in paths] == ["alice -[assigned]-> team -[owns]-> archive"]
    assert paths[0].source_units == (0, 1)


def test_relation_branching_is_capped_and_reported() -> None:
    relations = [(i, Relation("hub", "to", f"m{i}")) for i in range(50)]
    relations += [
        (100 + i, Relation(f"m{i}", "to", f"leaf{j}")) for i in range(50) for j in range(50)
    ]
    paths, exceeded = join_relations(collect_edges(relations), ["to", "to"], 120)
    assert exceeded and len(paths) == 120
    assert all(p.nodes[0] == "hub" for p in paths)
    everything, exceeded = join_relations(collect_edges(relations), ["to", "to"], None)
    assert not exceeded and len(everything) == 2500


def test_relation_dead_ends_do_not_hide_the_real_path() -> None:
    # 200 dead-end branches come first in edge order; the one complete path is found anyway.
    relations = [(i, Relation("hub", "a", f"dead{i}")) for i in range(200)]
    relations += [(500, Relation("hub", "a", "mid")), (501, Relation("mid", "b", "end"))]
    paths, exceeded = join_relations(collect_edges(relations), ["a", "b"], 1)
    assert not exceeded
    assert [p.key for p in paths] == ["hub -[a]-> mid -[b]-> end"]


def test_paths_through_a_preferred_end_node_survive_the_cap() -> None:
    relations = [(i, Relation("root", "l1", f"mid{i}")) for i in range(40)]
    relations += [
        (100 + 30 * i + j, Relation(f"mid{i}", "l2", f"leaf{i}_{j}"))
        for i in range(40)
        for j in range(30)
    ]
    paths, exceeded = join_relations(collect_edges(relations), ["l1", "l2"], 120, ["leaf32_7"])
    assert exceeded and len(paths) == 120
    assert paths[0].nodes == ("root", "mid32", "leaf32_7")
    paths, _ = join_relations(collect_edges(relations), ["l1", "l2"], 120, ["mid39"])
    assert [p.nodes[-1] for p in paths[:30]] == [f"leaf39_{j}" for j in range(30)]
    assert len({p.key for p in paths}) == 120  # no path twice


@given(
    st.lists(st.tuples(nodes, labels, nodes), max_size=9),
    st.lists(labels, min_size=1, max_size=3),
    st.lists(nodes, max_size=2),
    st.integers(1, 6),
)
def test_preferred_paths_come_first_and_the_cap_keeps_a_prefix(edges, wanted, prefer, limit):
    relations = [(i, Relation(s, label, t)) for i, (s, label, t) in enumerate(edges)]
    every, _ = join_relations(collect_edges(relations), wanted, None, prefer)
    capped, exceeded = join_relations(collect_edges(relations), wanted, limit, prefer)
    assert [p.key for p in capped] == [p.key for p in every[:limit]]
    assert exceeded == (len(every) > limit)
    preferred = {" ".join(n.casefold().split()) for n in prefer}
    touches = [bool(preferred & {" ".join(n.casefold().split()) for n in p.nodes}) for p in every]
    assert touches == sorted(touches, reverse=True)  # every preferred path before the rest
    fast = {(tuple(" ".join(n.casefold().split()) for n in p.nodes), p.source_units) for p in every}
    assert fast == reference_paths(relations, wanted) and len(every) == len(fast)
