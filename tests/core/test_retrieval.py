import pytest
from hypothesis import given
from hypothesis import strategies as st

from reference import (
    _humps_split,
    reference_bm25,
    reference_clause_coverage,
    reference_clause_leaders,
    reference_spread,
)
from tomc._core.lexicon import query_terms, stem
from tomc._core.retrieval import (
    BM25_B,
    BM25_K1,
    PART_CHAR,
    SPEAKER_WEIGHT,
    _split_humps,
    _surface_pattern,
    adjacent_pairs,
    bm25_scores,
    clause_coverage,
    clause_leaders,
    clause_matches,
    compound_parts,
    leading_speaker,
    part_count,
    spread_to_neighbours,
    task_clauses,
    weight_named_speakers,
)


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
    spread = spread_to_neighbours({0: 1.0, 5: 2.0}, 6, (0.5,))
    assert spread == {0: 1.0, 1: 0.5, 4: 1.0, 5: 2.0}
    assert spread_to_neighbours({2: 1.0}, 3, (0.0,)) == {2: 1.0}
    assert spread_to_neighbours({2: 1.0}, 3, ()) == {2: 1.0}


def test_spread_reaches_each_distance_of_the_window_and_stays_inside_the_history() -> None:
    spread = spread_to_neighbours({3: 1.0}, 6, (0.4, 0.2, 0.1))
    assert spread == pytest.approx({0: 0.1, 1: 0.2, 2: 0.4, 3: 1.0, 4: 0.4, 5: 0.2})


def test_a_line_between_matches_never_outranks_them() -> None:
    # every other line says the counted word: the ones between get shares from six matches
    scores = {i: 1.0 for i in range(0, 13, 2)}
    spread = spread_to_neighbours(scores, 13, (0.4, 0.2, 0.1))
    assert max(spread[i] for i in range(1, 13, 2)) == pytest.approx(0.4)
    assert min(spread[i] for i in scores) > 1.0


@given(
    scores=st.dictionaries(st.integers(0, 11), st.floats(0.1, 10.0), max_size=12),
    weights=st.lists(st.floats(0.0, 1.0), max_size=4),
)
def test_spread_matches_a_brute_force_sum(scores: dict[int, float], weights: list[float]) -> None:
    """A match gets its own score plus every share around it; a line without one gets the
    shares, capped at the largest weight times its best neighbour's score."""
    count = 12
    expected: dict[int, float] = {}
    for line in range(count):
        shares = [
            (weights[abs(other - line) - 1] * score, score)
            for other, score in scores.items()
            if 1 <= abs(other - line) <= len(weights) and weights[abs(other - line) - 1]
        ]
        if line in scores:
            expected[line] = scores[line] + sum(share for share, _ in shares)
        elif shares:
            cap = max(w for w in weights if w) * max(score for _, score in shares)
            expected[line] = min(sum(share for share, _ in shares), cap)
    spread = spread_to_neighbours(scores, count, weights)
    assert spread.keys() == expected.keys()
    for line, total in expected.items():
        assert spread[line] == pytest.approx(total)


@given(
    scores=st.dictionaries(
        st.integers(0, 29), st.sampled_from([0.0, 0.1, 0.3, 1.0, 2.5, 7.0]) | st.floats(0.0, 50.0)
    ),
    weights=st.lists(st.sampled_from([0.0, 0.1, 0.2, 0.4, 1.0]) | st.floats(0.0, 1.0), max_size=4),
    count=st.integers(0, 30),
)
def test_spread_is_the_reference_to_the_last_bit(
    scores: dict[int, float], weights: list[float], count: int
) -> None:
    """The padded lists give the line-by-line sums exactly (the ranking must not move), in any
    order of ``scores``, at the history's ends and with scores of 0."""
    scores = {line: score for line, score in scores.items() if line < count}
    assert spread_to_neighbours(scores, count, weights) == reference_spread(scores, count, weights)


@pytest.mark.parametrize(
    ("line", "speaker"),
    [
        ("Caroline: I went to the group", "caroline"),
        ("[1:56 pm on 8 May, 2023] Caroline: hi", "caroline"),
        ("user: hello", "user"),
        ("Mary Ann: hi", "mary ann"),
        ("ERROR: disk full", "error"),
        ("db_host = db-1.internal", None),
        ("12:30 done", None),
        ("see http://example.test", None),
        ("one two three four: too long for a name", None),
    ],
)
def test_leading_speaker(line: str, speaker: str | None) -> None:
    assert leading_speaker(line) == speaker


def test_a_named_speakers_lines_weigh_more_and_no_one_elses() -> None:
    rows = ["Caroline: I went to the support group", "Melanie: the support group is great"]
    scores = {0: 1.0, 1: 1.0}
    weighted = weight_named_speakers(scores, rows, "What did Caroline think of the group?")
    assert weighted == {0: SPEAKER_WEIGHT, 1: 1.0}
    assert weight_named_speakers(scores, rows, "What is the support group?") == scores
    # every word of a speaker's name must be in the task
    two = ["Mary Ann: yes", "Mary: no"]
    assert weight_named_speakers({0: 1.0, 1: 1.0}, two, "what did mary say") == {
        0: 1.0,
        1: SPEAKER_WEIGHT,
    }


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


@given(
    st.text(alphabet="ab_1 .\nİıRUN running", max_size=40),
    st.lists(st.sampled_from(["a", "ab", "b1", "run", "ru", "i̇", "ab_1", "1"]), max_size=6),
)
def test_both_surface_patterns_find_the_same_words_in_text_without_cjk(
    text: str, terms: list[str]
) -> None:
    """The pattern for text without CJK (a cheap part class) agrees with the full one there."""
    lowered = text.lower()
    plain = _surface_pattern(terms, cjk_text=False).findall(lowered)
    assert plain == _surface_pattern(terms, cjk_text=True).findall(lowered)


def test_a_long_task_compiles_the_cjk_class_at_most_twice() -> None:
    """The class walks every CJK code point when compiled (3 ms a copy): one copy per task word
    made a rebuild's pattern of 400 words take over a second."""
    terms = [f"w{n}x" for n in range(400)] + ["苹"]
    assert _surface_pattern(terms, cjk_text=True).pattern.count(PART_CHAR) == 2
    assert PART_CHAR not in _surface_pattern(terms, cjk_text=False).pattern
    found = _surface_pattern(terms, cjk_text=True).findall("苹w7x w12xs aw3x\nw399x_b")
    assert found == ["苹", "w7x", "w12xs", "\n", "w399x"]


def test_task_words_meet_identifiers() -> None:
    """A person names ``max_batch`` "max batch": identifiers are read as their parts, snake,
    kebab, dotted, SCREAMING and camelCase alike, and an identifier in the query is matched
    whole."""
    rows = [
        '{"service": "ingest-worker", "max_batch": 72613}',
        "export UPSTREAM_TOKEN_TTL=3600",
        "upstreamTokenTtl: 3600",
        "limits.maxBatch = 5",
        "nothing about it here",
        "batchmax = 9",  # one word: no part of it is "max" or "batch"
    ]
    scores = bm25_scores(rows, [6] * len(rows), query_terms("the ingest worker's max batch"))
    assert set(scores) == {0, 3}
    assert scores[0] > scores[3]  # four words of the task beat two
    scores = bm25_scores(rows, [6] * len(rows), query_terms("upstream token TTL"))
    assert set(scores) == {1, 2}
    whole = bm25_scores(
        ["deploy_target = prod", "my_deploy_target_x", "deploy"],
        [3, 3, 1],
        query_terms("What is deploy_target?"),
    )
    assert set(whole) == {0, 1}


def test_task_words_meet_the_closed_compound_a_name_makes_of_them() -> None:
    """ "The shard map client" meets ``shardmap-client``: a word that is no task word but two
    task words said one after the other, in that order, counts as both; the other order, or
    words of two different requests, do not make one."""
    rows = [
        "shardmap-client==7.26.4",
        "ShardMapClient = 3",  # camelCase is split anyway
        "mapshard = 1",  # the other order
        "shardmaps_total 4",  # an inflection of the compound
        "shard",
    ]
    scores = bm25_scores(rows, [3] * len(rows), query_terms("the shard map client library"))
    assert set(scores) == {0, 1, 3, 4}
    assert scores[0] > scores[4]  # shard + map + client beats shard
    coverage = clause_coverage(rows, task_clauses("1. the shard map\n2. the client"))
    assert coverage[0] == pytest.approx(1.0) and 2 not in coverage
    # "shard" ends one request and "map" opens the next: together they name nothing.
    apart = clause_coverage(rows, task_clauses("1. the shard\n2. the map client"))
    assert apart[0] < 1.0 and 2 not in apart


def test_a_very_long_word_is_never_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """A word far longer than any two task words together is no compound, and is not stemmed
    at every cut to find that out (that was quadratic: a pasted 200,000-letter word hung the
    compile)."""
    import tomc._core.retrieval as retrieval

    stemmed: list[str] = []

    def counted(word: str) -> str:
        stemmed.append(word)
        return stem(word)

    monkeypatch.setattr(retrieval, "stem", counted)
    pairs = adjacent_pairs(["shard", "map"])
    assert compound_parts("shard" + "m" * 2_000, pairs) is None
    assert stemmed == []
    assert compound_parts("shardmapping", pairs) == ("shard", "map")  # inside the bound
    assert stemmed
    word = "shard" + "m" * 200_000
    assert bm25_scores([word, "shard map"], [1, 2], query_terms("shard map")).keys() == {1}


_COMPOUND_ROWS = st.sampled_from(
    [
        "shard",
        "map",
        "shardmap",
        "mapshard",
        "shardmaps",
        "retry",
        "budget",
        "retrybudget",
        "retriesbudget",
        "budgetretry",
        "maps",
        "ShardMap",
        "shard_map",
        "shardy",
        "key",
    ]
)
_COMPOUND_ASKS = st.sampled_from(["shard", "map", "retries", "budget", "key", "maps"])


@given(
    st.lists(st.lists(_COMPOUND_ROWS, max_size=5).map(" ".join), min_size=1, max_size=12),
    st.lists(
        st.lists(_COMPOUND_ASKS, min_size=1, max_size=4).map(" ".join), min_size=1, max_size=4
    ),
)
def test_compounds_match_the_reference(rows: list[str], asks: list[str]) -> None:
    """BM25 and the clause shares count closed compounds as the oracles do."""
    terms = query_terms(" ".join(asks))
    lengths = [max(1, len(row.split())) for row in rows]
    fast = bm25_scores(rows, lengths, terms)
    slow = reference_bm25(rows, lengths, terms, BM25_K1, BM25_B)
    assert fast.keys() == slow.keys()
    for index, score in fast.items():
        assert score == pytest.approx(slow[index])
    clauses = [c for c in (query_terms(ask) for ask in asks) if c]
    found = clause_coverage(rows, clauses)
    expected = reference_clause_coverage(rows, clauses)
    assert found.keys() == expected.keys()
    for index, share in expected.items():
        assert found[index] == pytest.approx(share)


@given(
    st.text(alphabet="aZ0_ .\nbYİı苹", max_size=30)
    | st.text(alphabet=st.characters(max_codepoint=127), max_size=30)
)
def test_humps_are_split_as_the_reference_splits_them(text: str) -> None:
    """The byte pre-check on ASCII text never skips a hump the pattern would split."""
    assert _split_humps(text) == _humps_split(text)


def test_a_task_is_split_into_its_requests() -> None:
    task = (
        "Report these values:\n1. the retry budget in seconds;\n"
        "2. the licence key in the licensing error;\n3. the ticket tracking the clean-up. Thanks!"
    )
    assert task_clauses(task) == [
        ["report", "valu"],
        ["retr", "budget", "second"],
        ["licenc", "key", "licens", "error"],
        ["ticket", "track", "clean", "cleanup"],  # a compound also closed
        ["thank"],
    ]


def test_clause_coverage_is_the_best_share_of_one_request() -> None:
    """A line that says most of one request beats one that says a few words of several."""
    clauses = task_clauses("1. the licence key in the licensing error\n2. the retry budget")
    rows = [
        "ERROR licensing.client: licence key LK-93QF rejected",
        "retry after a licensing timeout",  # a word of each request
        "RETRY_BUDGET_SECONDS = 417",
        "nothing to see",
    ]
    coverage = clause_coverage(rows, clauses)
    assert set(coverage) == {0, 1, 2}
    assert coverage[0] == pytest.approx(1.0) and coverage[2] == pytest.approx(1.0)
    assert coverage[1] < 1.0
    # weighted by rarity: the word every line has counts least
    idf_heavy = clause_coverage(["error one", "error two", "licence error"], [["licenc", "error"]])
    assert idf_heavy[0] < 0.5 < idf_heavy[2]


_WORDS = st.sampled_from(["licence", "key", "retry", "budget", "maxBatch", "max_batch", "error"])
# Plain words: a term written as an identifier is matched whole (tested on its own).
_ASKED = st.sampled_from(["licence", "key", "retry", "budget", "max", "batch", "errors"])


@given(
    st.lists(st.lists(_WORDS, max_size=6).map(" ".join), min_size=1, max_size=25),
    st.lists(st.lists(_ASKED, min_size=1, max_size=4).map(" ".join), min_size=1, max_size=6),
    st.integers(1, 4),
)
def test_clause_coverage_and_leaders_match_the_reference(
    rows: list[str], asks: list[str], span: int
) -> None:
    clauses = [c for c in (query_terms(ask) for ask in asks) if c]
    segments = [index // span for index in range(len(rows))]  # runs of lines read as one
    for given_segments in (None, segments):
        found = clause_coverage(rows, clauses, segments=given_segments)
        expected = reference_clause_coverage(rows, clauses, given_segments)
        assert found.keys() == expected.keys()
        for index, share in expected.items():
            assert found[index] == pytest.approx(share)
        for ranks in (None, [part_count(row) for row in rows], [len(row) % 3 for row in rows]):
            leaders = clause_matches(rows, clauses, segments=given_segments, ranks=ranks).leaders
            wanted = reference_clause_leaders(rows, clauses, given_segments, ranks)
            assert len(leaders) == len(wanted) == len(clauses)
            for got, want in zip(leaders, wanted, strict=True):
                if want is None:
                    assert got is None
                else:
                    assert got is not None and got[0] == want[0]
                    assert got[1] == pytest.approx(want[1])
    parts = [part_count(row) for row in rows]
    for ranks in (None, [len(row) % 3 for row in rows]):
        leaders = clause_matches(rows, clauses, ranks=ranks, parts=parts).leaders
        wanted = reference_clause_leaders(rows, clauses, None, ranks, parts)
        assert [g and (g[0], pytest.approx(g[1])) for g in leaders] == wanted


def test_of_two_keys_with_the_same_words_of_a_request_the_one_made_of_them_leads() -> None:
    """ "the prefix the worker's metrics are sent under": ``STATSD_PREFIX`` holds one of its
    words in two parts, ``ingest-worker queue depth`` a rarer one in four and a stdlib flag in
    seven; weighed by their parts, their larger shares no longer win."""
    names = ["LOG_PREFIX", "MULTIPROCESSING_POOL_POOL__JOIN_EXITED_WORKERS_CLEANED"]
    names += ["TRACE_PREFIX", "STATSD_PREFIX", "ingest-worker queue depth", "queue", "port", "host"]
    clauses = task_clauses("the prefix the worker's metrics are sent under")
    plain = clause_matches(names, clauses).leaders[0]
    assert plain is not None and "worker" in names[plain[0]].lower()  # the rarer word here
    weighed = clause_matches(names, clauses, parts=[part_count(n) for n in names]).leaders[0]
    assert weighed is not None and names[weighed[0]] == "STATSD_PREFIX"
    assert weighed[1] < plain[1]  # the plain share, not the weighed score
    with pytest.raises(ValueError, match="segments"):
        clause_matches(names, clauses, segments=[0] * len(names), parts=[1] * len(names))


def test_of_lines_that_tie_the_lowest_rank_leads_then_the_newest() -> None:
    """A caller may order equal matches: "the container image" names ``containers.image``
    more than the newer ``containers.imagePullPolicy``, whose other words it did not say."""
    names = ["spec containers image", "spec containers imagePullPolicy", "containers image"]
    clauses = task_clauses("the worker's container image tag")
    assert [part_count(name) for name in names] == [3, 5, 2]
    assert clause_matches(names, clauses).leaders[0][0] == 2  # a three-way tie: the newest
    assert clause_matches(names, clauses, ranks=[3, 5, 3]).leaders[0][0] == 2
    assert clause_matches(names, clauses, ranks=[2, 5, 3]).leaders[0][0] == 0


def test_every_request_gets_its_best_line_even_a_weak_one() -> None:
    rows = [
        "the licence key LK-1 was rejected by the licensing service",
        "lease acquired partition=12 lease_owner=node-b7f3e",
        "an unrelated line",
    ]
    clauses = task_clauses(
        "1. the licence key in the licensing error;\n2. the node holding partition 12's lease"
    )
    leaders = clause_leaders(rows, clauses)
    assert [leader[0] for leader in leaders if leader] == [0, 1]
    assert leaders[1][1] < 1.0  # "node" and "holding" are not on the line: still its best
