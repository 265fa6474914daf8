"""Whole-row packing: never over the budget, and greedy like the reference packer."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from reference import reference_pack
from tomc._core.packing import pack_sources, settle_joined_rows


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


class JoiningCounter:
    """One token a line, plus ``penalty`` wherever a line ending in ';' meets one starting
    with '/' (as o200k joins them across the line break)."""

    name = "joining"

    def __init__(self, penalty: int) -> None:
        self.penalty = penalty

    def count(self, text: str) -> int:
        lines = text.splitlines()
        joined = sum(self.joins(a, b) for a, b in itertools.pairwise(lines))
        return len(lines) + self.penalty * joined

    def joins(self, row: str, next_row: str) -> bool:
        return row.endswith(";") and next_row.startswith("/")


@given(
    st.lists(st.sampled_from(["a;", "/b;", "/c", "d"]), max_size=30),
    st.integers(0, 40),
    st.integers(-1, 5),
    st.randoms(use_true_random=False),
)
def test_settled_rows_recount_exactly_within_budget(rows, budget, penalty, rng) -> None:
    counter = JoiningCounter(penalty)
    costs = [1] * len(rows)
    if sum(costs) > budget:  # the packer only settles rows whose own costs fit
        rows = rows[:budget]
        costs = costs[:budget]
    removable = list(range(len(rows)))
    rng.shuffle(removable)
    settled = settle_joined_rows(counter, rows, costs, budget, removable)
    kept_text = "".join(rows[p] + "\n" for p in settled.kept)
    assert settled.total == counter.count(kept_text) <= budget
    assert settled.total == sum(costs[p] for p in settled.kept) + sum(settled.extra.values())
    assert settled.kept == sorted(settled.kept)


def test_settling_removes_the_least_important_rows_first() -> None:
    rows = ["a;", "/b", "c;", "/d", "e"]
    settled = settle_joined_rows(JoiningCounter(3), rows, [1] * 5, 8, [4, 0, 1, 2, 3])
    # 5 rows + 2 joins * 3 = 11: dropping "e" (11 -> 10) is not enough; dropping "a;" too
    # removes a join (-1 row, -3): 6 <= 8.
    assert settled.kept == [1, 2, 3] and settled.total == 6 and settled.extra == {3: 3}


def test_settling_falls_back_to_dropping_joined_rows_when_recounting_grows() -> None:
    rows = ["/x;"] * 400  # every row joins the one before: one run of 400
    settled = settle_joined_rows(JoiningCounter(5), rows, [1] * 400, 50, range(399, -1, -1))
    assert settled.kept == [0] and settled.total == 1 and settled.extra == {}
