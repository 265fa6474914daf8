"""Term counts against the reference oracle."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reference import reference_counts
from tomc.counting import count_terms

words = st.sampled_from(["apple", "Apple", "banana", "APPLE.", "苹果", "apples", "the", "x"])


@given(st.lists(st.lists(words, max_size=8).map(" ".join), min_size=1, max_size=12))
def test_count_kernel_matches_reference(texts: list[str]) -> None:
    terms = ["apple", "banana", "苹果", "missing"]
    for entry in count_terms(texts, terms):
        assert (entry.occurrences, entry.source_units) == reference_counts(texts, entry.term)
