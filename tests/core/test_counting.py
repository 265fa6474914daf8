"""Term counts against the reference oracle."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference import reference_counts, reference_related, reference_top_terms
from tomc._core.counting import count_terms, terms_named_in, top_terms
from tomc._core.lexicon import STOPWORDS, inflections

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


inflected_words = st.sampled_from(
    [
        "build", "Builds", "building", "built", "rebuild", "builder", "pass", "passed",
        "Passes", "passing", "passenger", "copy", "copies", "copied", "cop", "note", "not",
        "notes", "stop", "stopped", "stopping", "stops", "x", "-", "BUILD.", "部署",
    ]
)  # fmt: skip


@given(st.lists(st.lists(inflected_words, max_size=8).map(" ".join), min_size=1, max_size=12))
def test_inflected_count_kernel_matches_reference(texts: list[str]) -> None:
    terms = ["build", "builds", "passed", "copy", "note", "stopping", "missing", "部署"]
    for entry in count_terms(texts, terms, inflect=True):
        expected = reference_counts(texts, entry.term, inflect=True)
        assert (entry.occurrences, entry.source_units) == expected
        assert sum(n for _, n in entry.forms) == entry.occurrences
    for entry in count_terms(texts, terms):  # quoted terms: exactly as written
        assert (entry.occurrences, entry.source_units) == reference_counts(texts, entry.term)


base_words = st.text(alphabet="bcdfglmnprstaeiou", min_size=3, max_size=9)


@given(base_words)
def test_inflections_are_related_forms(word: str) -> None:
    forms = inflections(word)
    assert word in forms
    for form in forms:
        assert reference_related(form, word), (form, word)


def _plain_base(word: str) -> bool:
    """Ends in a consonant that is not doubled, does not look inflected itself."""
    return (
        word[-1] not in "aeious"
        and word[-1] != word[-2]
        and not word.endswith(("ed", "ing"))
        and word not in STOPWORDS
        and any(c in "aeiou" for c in word)
    )


@given(base_words.filter(_plain_base))
def test_inflections_include_the_regular_forms(word: str) -> None:
    forms = inflections(word)
    assert {word + "s", word + "ed", word + "ing"} <= forms
    # and every such form counts the base back
    for form in (word + "s", word + "ed", word + "ing"):
        if len(form) >= 5:
            assert word in inflections(form), form


@pytest.mark.parametrize(
    ("word", "included", "excluded"),
    [
        ("build", {"builds", "building"}, {"built", "rebuild", "builder"}),
        ("builds", {"build", "building"}, {"built"}),
        ("passed", {"pass", "passes", "passing"}, {"passenger"}),
        ("copies", {"copy", "copied", "copying"}, {"cop"}),
        ("stopped", {"stop", "stops", "stopping"}, set()),
        ("note", {"notes", "noted", "noting"}, {"not"}),
        ("plane", {"planes"}, {"plan", "plans"}),
        ("feed", {"feeds", "feeding"}, {"fee", "fees"}),
        ("thing", {"things"}, {"the"}),
        ("string", {"strings"}, {"str"}),
        ("deploy", {"deployed", "deploys", "deploying"}, {"redeploy"}),
    ],
)
def test_inflections_examples(word: str, included: set[str], excluded: set[str]) -> None:
    forms = inflections(word)
    assert included <= forms and not (excluded & forms)


def test_top_terms_match_reference() -> None:
    texts = ["apple banana apple", "cherry apple", "banana kiwi", "the the the the", "Kiwi x"]
    entries, distinct = top_terms(texts, 3)
    assert distinct == 4
    assert [(e.term, e.occurrences, e.source_units) for e in entries] == reference_top_terms(
        texts, 3
    )


@given(st.lists(st.lists(inflected_words, max_size=8).map(" ".join), min_size=1, max_size=12))
def test_top_terms_kernel_matches_reference(texts: list[str]) -> None:
    entries, _ = top_terms(texts, 5)
    assert [(e.term, e.occurrences, e.source_units) for e in entries] == reference_top_terms(
        texts, 5
    )


def test_count_rows_read_as_a_person_means_them() -> None:
    from tomc import compile_memory

    history = "\n".join(
        [
            "09:00 build started for api",
            "09:01 build passed for api",
            "09:02 build failed for web",
            "09:03 building docs",
            "09:04 docs built",
            "09:05 build passed for docs",
            "09:06 smoke tests passed",
            "09:07 all builds green",
        ]
    )
    result = compile_memory(history, "How many builds passed?", strategy="tomc")
    rows = [r.text for r in result.ledger if r.kind == "count"]
    assert rows == [
        'COUNT "builds" = 6 occurrences in 6 lines (forms: build 4, building 1, builds 1)',
        'COUNT "passed" = 3 occurrences in 3 lines',
        'COUNT lines with "builds" and "passed" = 2 lines',
    ]
    one = compile_memory(history, "How many times does 'smoke' appear?", strategy="tomc")
    assert [r.text for r in one.ledger if r.kind == "count"] == [
        'COUNT "smoke" = 1 occurrence in 1 line'
    ]
    none = compile_memory(history, "How many widgets were deployed?", strategy="tomc")
    texts = [r.text for r in none.ledger if r.kind == "count"]
    assert texts[0] == 'COUNT "widgets" = 0 occurrences: none of the 8 lines contains it'
    assert len(texts) == 3  # the two named terms and the lines holding both; no filler


def test_common_words_only_when_asked() -> None:
    from tomc import compile_memory

    history = "\n".join(f"line {i} alpha beta gamma{i % 3}" for i in range(17))
    named = compile_memory(history, "How many times does alpha appear?", strategy="tomc")
    assert [r.key for r in named.ledger if r.kind == "count"] == ["alpha"]
    top = compile_memory(history, "What are the most common words?", strategy="tomc")
    keys = [r.key for r in top.ledger if r.kind == "count"]
    assert keys[:3] == ["alpha", "beta", "line"] and len(keys) < 80
    nothing = compile_memory(history, "How many are there?", strategy="tomc")
    rows = [r.text for r in nothing.ledger if r.kind == "count"]
    assert rows[0] == "COUNT lines = 17 nonempty lines" and len(rows) <= 11


@given(
    st.lists(
        st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=60),
        min_size=1,
        max_size=10,
    )
)
def test_top_terms_of_any_ascii_text_match_reference(texts: list[str]) -> None:
    """ASCII text takes a faster pattern; punctuation, digits and underscores decide the same."""
    entries, _ = top_terms(texts, 5)
    assert [(e.term, e.occurrences, e.source_units) for e in entries] == reference_top_terms(
        texts, 5
    )
