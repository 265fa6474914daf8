import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference import reference_bm25
from tomc._core.lexicon import query_terms, stem
from tomc._core.retrieval import BM25_B, BM25_K1, bm25_scores, spread_to_neighbours


def test_stem_is_a_prefix_and_merges_forms() -> None:
    for word in ("running", "runs", "stopped", "classes", "class", "apples", "apple", "studies"):
        assert word.startswith(stem(word))
    assert stem("running") == stem("run") == stem("runs")
    assert stem("apples") == stem("apple")
    assert stem("classes") == stem("class")


def test_query_terms_drop_stopwords_and_keep_cjk() -> None:
    assert query_terms("When did Caroline go to the support group?") == [
        "carolin",
        "go",
        "support",
        "group",
    ]
    assert query_terms("苹果的价格") == ["苹", "果", "价", "格"]


def test_bm25_prefers_rare_terms_and_matches_word_forms() -> None:
    texts = ["the cat sat", "dogs running fast", "a cat and a dog", "nothing here"]
    scores = bm25_scores(texts, [3, 3, 5, 2], query_terms("dog runs"))
    assert set(scores) == {1, 2}
    assert scores[1] > scores[2]  # two query terms (dog+run) beat one


def test_spread_to_neighbours_is_linear_and_bounded() -> None:
    spread = spread_to_neighbours({0: 1.0, 5: 2.0}, 6, 0.5)
    assert spread == {0: 1.0, 1: 0.5, 4: 1.0, 5: 2.0}
    assert spread_to_neighbours({2: 1.0}, 3, 0.0) == {2: 1.0}


@pytest.mark.parametrize(
    ("line_alphabet", "query_alphabet"),
    [
        ("abcde running runs ran 苹果猫 .,", "abcde running runs 苹果 ?"),
        ("abRUNNING runs_ İı苹果x1 .\t", "ab running RUNS 苹果 x1 ?"),  # case, odd letters
    ],
)
@given(data=st.data())
def test_bm25_matches_reference(line_alphabet: str, query_alphabet: str, data) -> None:
    lines = st.text(alphabet=line_alphabet, max_size=40)
    texts = data.draw(st.lists(lines, min_size=1, max_size=15))
    query = data.draw(st.text(alphabet=query_alphabet, max_size=20))
    lengths = [max(1, len(t.split())) for t in texts]
    terms = query_terms(query)
    fast = bm25_scores(texts, lengths, terms)
    slow = reference_bm25(texts, lengths, terms, BM25_K1, BM25_B)
    assert fast.keys() == slow.keys()
    for index, score in fast.items():
        assert score == pytest.approx(slow[index])
