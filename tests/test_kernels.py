"""Fast kernels against the reference oracles, plus the seed's worked examples."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference import (
    reference_bm25,
    reference_counts,
    reference_pack,
    reference_paths,
    reference_state,
)
from tomc import UNKNOWN
from tomc.kernels import collect_edges, count_terms, join_relations, replay_state
from tomc.lexicon import query_terms
from tomc.operations import Copy, Relation, Set, parse_operation
from tomc.retrieval import BM25_B, BM25_K1, bm25_scores


def _program(lines: list[str]) -> list[tuple[int, Set | Copy]]:
    ops = ((i, parse_operation(line)) for i, line in enumerate(lines))
    return [(i, op) for i, op in ops if isinstance(op, Set | Copy)]


def test_seed_snapshot_example() -> None:
    lines = ["A = 3", "B copies A", "A = 8", "C copies B"]
    state = {e.name: e for e in replay_state(_program(lines))}
    assert (state["A"].value, state["B"].value, state["C"].value) == ("8", "3", "3")
    assert state["C"].source_units == (0, 1, 3)  # the whole chain: A=3, B copies A, C copies B
    assert state["A"].source_units == (2,)


def test_copy_of_undefined_is_unknown() -> None:
    state = {e.name: e for e in replay_state(_program(["B copies NOPE"]))}
    assert state["B"].value == UNKNOWN
    assert state["B"].source_units == (0,)


def test_ruler_variable_tracking_form() -> None:
    lines = ["VAR AAAAA = 12345.", "noise", "VAR BBBBB = VAR AAAAA.", "VAR AAAAA = 999."]
    state = {e.name: e.value for e in replay_state(_program(lines))}
    assert state == {"AAAAA": "999", "BBBBB": "12345"}


names = st.sampled_from(["A", "B", "C", "D", "x.y", "VAR_1"])
values = st.sampled_from(["1", "2", "tea", "coffee", "42"])
op_lines = st.one_of(
    st.builds(lambda n, v: f"{n} = {v}", names, values),
    st.builds(lambda a, b: f"{a} copies {b}", names, names),
    st.builds(lambda n, v: f"VAR {n} = {v}.", names, values),
    st.builds(lambda a, b: f"VAR {a} = VAR {b}.", names, names),
    st.sampled_from(["I might switch to tea", "the value is high", "A == B", "log: build ok"]),
    st.text(max_size=30),
)


@given(st.lists(op_lines, max_size=40))
def test_state_kernel_matches_reference(lines: list[str]) -> None:
    program = _program(lines)
    fast = {e.name: (e.value, e.source_units) for e in replay_state(program)}
    assert fast == reference_state(program)


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


words = st.sampled_from(["apple", "Apple", "banana", "APPLE.", "苹果", "apples", "the", "x"])


@given(st.lists(st.lists(words, max_size=8).map(" ".join), min_size=1, max_size=12))
def test_count_kernel_matches_reference(texts: list[str]) -> None:
    terms = ["apple", "banana", "苹果", "missing"]
    for entry in count_terms(texts, terms):
        assert (entry.occurrences, entry.source_units) == reference_counts(texts, entry.term)


@given(
    st.lists(
        st.text(alphabet="abcde running runs ran 苹果猫 .,", max_size=40), min_size=1, max_size=15
    ),
    st.text(alphabet="abcde running runs 苹果 ?", max_size=20),
)
def test_bm25_matches_reference(texts: list[str], query: str) -> None:
    lengths = [max(1, len(t.split())) for t in texts]
    terms = query_terms(query)
    fast = bm25_scores(texts, lengths, terms)
    slow = reference_bm25(texts, lengths, terms, BM25_K1, BM25_B)
    assert fast.keys() == slow.keys()
    for index, score in fast.items():
        assert score == pytest.approx(slow[index])


@given(st.lists(st.integers(min_value=0, max_value=50), max_size=30), st.integers(0, 200))
def test_reference_pack_never_exceeds_budget(tokens: list[int], budget: int) -> None:
    taken = reference_pack(tokens, budget)
    assert sum(tokens[i] for i in taken) <= budget
