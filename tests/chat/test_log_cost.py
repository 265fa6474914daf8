"""The folded log's incremental cost against rendering and counting it (the oracle)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference import reference_split_cost
from tomc._core.tokens import LexicalCounter
from tomc.chat._log_cost import FoldedLogCost
from tomc.chat._meter import LEXICAL_MARGIN, TokenMeter, meter_for

#: The session's meters: exact o200k (an OpenAI model), o200k with a safety factor (a model
#: whose tokenizer is unpublished), the lexical estimate with its margin and character floor.
METERS = {
    "exact": meter_for("o200k_base"),
    "factor": meter_for(None),
    "lexical": TokenMeter(LexicalCounter(), exact=False, factor=LEXICAL_MARGIN),
}
#: Names as folded rows show them: paths, commands, cut arguments (ending in an ellipsis),
#: punctuation at either end, nothing at all (a call whose arguments left no name).
NAMES = st.one_of(
    st.sampled_from(["", "src/a.py", "cat src/a.py", "ls -la /tmp/", "grep -n 'x' b.py", "a…"]),
    st.text(st.sampled_from("ab/._-()'\";: 1é…"), min_size=1, max_size=12).map(str.strip),
)


@dataclass
class _Group:
    """A group of a work memory, as the log reads it."""

    number: int
    tool: str
    header: str
    logged: str
    order: int
    kept: int = 0
    lines: tuple[int, ...] = ()


@st.composite
def _work(draw: st.DrawFn) -> list[_Group]:
    groups: list[_Group] = []
    number = 0
    for order in range(draw(st.integers(1, 24))):
        kind = draw(st.sampled_from(["call", "call", "call", "call", "text", "output"]))
        if kind == "call":
            number += 1
            tool = draw(st.sampled_from(["bash", "bash", "read", "edit"]))
            groups.append(_Group(number, tool, f"[call {number} {tool}]", draw(NAMES), order))
        elif kind == "text":
            groups.append(_Group(0, "", "", "", order))
        else:
            groups.append(_Group(0, "", "[output of a call not in view]", "", order))
    return groups


def _check(groups: list[_Group], order: list[int], count) -> None:
    """At each step, every group's price against the oracle; then the next group is kept."""
    priced = FoldedLogCost(groups, count)
    for step in order:
        for group in groups:
            if not group.kept:
                assert priced.split_cost(group) == reference_split_cost(groups, group, count), (
                    [(g.number, g.tool, g.logged, g.kept) for g in groups],
                    group.order,
                )
        if not groups[step].kept:
            groups[step].kept = 1
            priced.keep(groups[step])


@pytest.mark.parametrize("meter", METERS)
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_the_price_of_leaving_a_row_is_the_rendered_log_s(meter: str, data: st.DataObject):
    groups = data.draw(_work())
    order = data.draw(st.lists(st.integers(0, len(groups) - 1), max_size=len(groups)))
    _check(groups, order, METERS[meter].count)


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_groups_kept_before_pricing_are_walls_too(data: st.DataObject) -> None:
    groups = data.draw(_work())
    for group in groups:
        group.kept = int(data.draw(st.booleans()) and data.draw(st.booleans()))
    order = data.draw(st.lists(st.integers(0, len(groups) - 1), max_size=len(groups)))
    _check(groups, order, METERS["factor"].count)
