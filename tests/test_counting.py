"""Term counts against the reference oracle."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference import reference_counts
from tomc.counting import count_terms, terms_named_in

words = st.sampled_from(["apple", "Apple", "banana", "APPLE.", "苹果", "apples", "the", "x"])


@given(st.lists(st.lists(words, max_size=8).map(" ".join), min_size=1, max_size=12))
def test_count_kernel_matches_reference(texts: list[str]) -> None:
    terms = ["apple", "banana", "苹果", "missing"]
    for entry in count_terms(texts, terms):
        assert (entry.occurrences, entry.source_units) == reference_counts(texts, entry.term)


line_words = st.sampled_from(
    ["deploy", "Deploy", "failed", "deploy-failed", "follow-up", "follow", "up", "-", "x", "."]
)
separators = st.sampled_from([" ", "  ", "\t", ", ", "-", ""])


@given(
    st.lists(
        st.lists(st.tuples(line_words, separators), max_size=8).map(
            lambda parts: "".join(w + s for w, s in parts)
        ),
        min_size=1,
        max_size=10,
    )
)
def test_phrase_counts_match_reference(texts: list[str]) -> None:
    terms = ["deploy failed", "follow-up", "deploy-failed", "deploy", "up", "x."]
    for entry in count_terms(texts, terms):
        assert (entry.occurrences, entry.source_units) == reference_counts(texts, entry.term)


def test_hyphenated_words_and_phrases_count_what_a_person_means() -> None:
    texts = [
        "follow-up scheduled; the follow-up was late",
        "follow up later, follow - up, followup",
        "deploy failed at 10:02",
        "Deploy  failed again (deploy failed)",
        "deploy-failed flag, redeploy failed, deploy failedover",
    ]
    entries = count_terms(texts, ["follow-up", "deploy failed"])
    counts = {e.term: (e.occurrences, e.source_units) for e in entries}
    assert counts == {"follow-up": (2, (0,)), "deploy failed": (3, (2, 3))}


@pytest.mark.parametrize(
    ("task", "terms"),
    [
        ("How many times doesn't 'deploy' appear?", ("deploy",)),
        ("What's the count of 'deploy'?", ("deploy",)),
        ("How many times does 'follow-up' appear?", ("follow-up",)),
        ("Count 'deploy failed' in the log", ("deploy failed",)),
        ('How often is "Deploy   Failed" logged?', ("deploy failed",)),
        ("Bob's 'deploy' and Alice's 'build': how many times each?", ("deploy", "build")),
        ("「部署」出现了几次？", ("部署",)),
        ("统计'部署'出现的次数", ("部署",)),
        ("How many times does deploy appear?", ("deploy",)),
        ("部署出现了几次？", ("部署",)),
    ],
)
def test_terms_named_in_counting_tasks(task: str, terms: tuple[str, ...]) -> None:
    assert terms_named_in(task) == terms


def test_phrase_count_end_to_end() -> None:
    from tomc import compile_memory

    history = "deploy failed at 10:02\nretrying\ndeploy failed again\nfollow-up: check deploy"
    for task, key, value in [
        ("How many times does 'deploy failed' appear?", "deploy failed", "2"),
        ("How many times does 'follow-up' appear?", "follow-up", "1"),
        ("How many times doesn't 'deploy' appear?", "deploy", "3"),
    ]:
        result = compile_memory(history, task, strategy="tomc")
        first = next(r for r in result.ledger if r.kind == "count")
        assert (first.key, first.value) == (key, value)
