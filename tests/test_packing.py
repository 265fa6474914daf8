"""Whole-row packing: never over the budget, and greedy like the reference packer."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reference import reference_pack
from tomc.packing import pack_sources


@given(st.lists(st.integers(min_value=0, max_value=50), max_size=30), st.integers(0, 200))
def test_reference_pack_never_exceeds_budget(tokens: list[int], budget: int) -> None:
    taken = reference_pack(tokens, budget)
    assert sum(tokens[i] for i in taken) <= budget


@given(
    st.lists(st.integers(min_value=0, max_value=50), max_size=30),
    st.integers(0, 200),
    st.randoms(use_true_random=False),
)
def test_pack_sources_is_greedy_in_rank_order(tokens: list[int], budget: int, rng) -> None:
    order = list(range(len(tokens)))
    rng.shuffle(order)
    kept = pack_sources(order, tokens, budget)
    expected = reference_pack([tokens[i] for i in order], budget)
    assert kept == sorted(order[k] for k in expected)
