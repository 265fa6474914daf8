"""Source selection: a kept line's reason names the rule that kept it, never a rank alone."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from reference import reference_best_first
from tomc import compile_memory
from tomc._core.selection import best_first

_RANK = re.compile(r"rank (\d+)")
WORDS = ["retry", "timeout", "ingest", "worker", "alpha", "beta", "gamma", "queue", "cache"]


def _source_rows(history: str, task: str, budget: int):
    result = compile_memory(history, task, budget_tokens=budget, strategy="rag")
    return [row for row in result.ledger if row.kind == "source"]


def _rank(reason: str) -> int | None:
    found = _RANK.search(reason)
    return int(found.group(1)) if found else None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join),
        min_size=2,
        max_size=40,
    ),
    st.integers(5, 120),
)
def test_kept_line_says_how_many_better_ranked_lines_were_left_out(
    lines: list[str], budget: int
) -> None:
    # Distinct lines: an identical copy is packed once where its newest copy stands.
    history = "\n".join(f"{line} n{i}" for i, line in enumerate(lines))
    rows = _source_rows(history, "what is the retry timeout of the ingest worker", budget)
    left_out = [_rank(row.reason) for row in rows if not row.included]
    for row in rows:
        if not row.included or "unchanged" in row.reason:
            continue
        rank = _rank(row.reason)
        assert rank is not None, row.reason
        passed = sum(1 for r in left_out if r is not None and r < rank)
        said = re.search(r"after ([\d,]+) better-ranked lines? were left out", row.reason)
        if passed:
            assert said and int(said.group(1).replace(",", "")) == passed, row.reason
        else:
            assert said is None, row.reason


def test_each_kept_line_names_its_rule() -> None:
    history = "\n".join(
        [
            "the ingest worker retry timeout is 30 seconds",  # its own match
            "nothing here",  # beside the match above
            *[f"filler line {i}" for i in range(12)],
            "last filler",  # no query term at all: recency
        ]
    )
    rows = {row.key: row for row in _source_rows(history, "ingest worker retry timeout", 200)}
    assert rows["u0"].included and rows["u0"].reason.startswith("BM25 match, rank 1")
    assert rows["u1"].included and rows["u1"].reason.startswith("beside a BM25 match")
    assert rows["u14"].included and "kept by recency" in rows["u14"].reason
    assert not any("better-ranked" in row.reason for row in rows.values())


@given(st.dictionaries(st.integers(0, 60), st.sampled_from([0.0, 0.5, 1.0, 2.0]) | st.floats(0, 9)))
def test_best_first_is_one_sort_on_score_then_newest(scores: dict[int, float]) -> None:
    """Two stable sorts in C give the order of the one on ``(-score, -line)``, ties included."""
    assert best_first(scores) == reference_best_first(scores)
