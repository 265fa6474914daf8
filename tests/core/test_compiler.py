"""compile_memory end to end: semantics, packing invariants, routing, strategies, bad input."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

import tomc
from reference import reference_pack
from tomc import (
    CompileResult,
    InvalidHistoryError,
    InvalidOptionError,
    LexicalCounter,
    TomcError,
    compile_memory,
)
from tomc._core.budget import MAX_BUDGET_TOKENS
from tomc._core.tokens import CHARS_PER_TOKEN_FLOOR, get_counter, row_costs, safe_cost

SEED_HISTORY = "A = 3\nB copies A\nA = 8\nC copies B\n"


def _state(result: CompileResult) -> dict[str, tuple[str, tuple[str, ...]]]:
    return {r.key: (r.value, r.source_ids) for r in result.ledger if r.kind == "state"}


def test_seed_example_records_only() -> None:
    result = compile_memory(SEED_HISTORY, "What are A, B and C?", strategy="tomc")
    state = _state(result)
    assert state["A"] == ("8", ("u2",))
    assert state["B"] == ("3", ("u0", "u1"))
    assert state["C"] == ("3", ("u0", "u1", "u3"))
    assert "STATE C = 3 (u0,u1,u3)" in result.compiled_memory
    assert result.route == "state"


def test_sentences_are_not_state_updates() -> None:
    history = "preference = tea\nI might switch to tea\nmaybe preference is coffee now"
    result = compile_memory(history, "What is the current preference?", strategy="tomc")
    assert _state(result) == {"preference": ("tea", ("u0",))}


def test_sources_keep_roles_and_positions() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "A = 1\n\nhello there"},
        {"role": "assistant", "content": [{"type": "text", "text": "ok\nA = 2"}]},
    ]
    result = compile_memory(messages, "value of A?")
    units = [(u.id, u.text, u.role, u.message_index, u.line_index) for u in result.sources]
    assert units == [
        ("u0", "be brief", "system", 0, 0),
        ("u1", "A = 1", "user", 1, 0),
        ("u2", "hello there", "user", 1, 2),
        ("u3", "ok", "assistant", 2, 0),
        ("u4", "A = 2", "assistant", 2, 1),
    ]
    assert _state(result)["A"] == ("2", ("u4",))


def _log_history(n: int) -> str:
    lines = []
    for i in range(n):
        lines.append(f"[{i:05d}] worker-{i % 7} processed batch {i} in {i % 13} ms")
        if i % 10 == 3:
            lines.append(f"var{i % 40} = {i}")
        if i % 10 == 7:
            lines.append(f"var{(i + 5) % 40} copies var{i % 40}")
        if i % 25 == 0:
            lines.append(f"node{i % 9} -[feeds]-> node{(i + 1) % 9}")
    return "\n".join(lines)


@pytest.mark.parametrize("strategy", ["tomc", "tomc_raw", "rag", "auto"])
@pytest.mark.parametrize("budget", [0, 5, 60, 400, 5000])
def test_budget_never_exceeded_and_every_candidate_once(strategy: str, budget: int) -> None:
    result = compile_memory(
        _log_history(300), "What is var13?", budget_tokens=budget, strategy=strategy
    )
    assert (
        result.memory_tokens <= result.budget_tokens == budget
        or result.applied_strategy == "unchanged"
    )
    assert safe_cost("lexical", result.compiled_memory) == result.memory_tokens
    keys = [(row.kind, row.key) for row in result.ledger]
    assert len(keys) == len(set(keys))
    packed = "".join(
        row.text + "\n" for row in result.ledger if row.included and row.kind != "source"
    )
    assert result.compiled_memory.startswith(packed)
    assert sum(r.tokens for r in result.ledger if r.included) == result.memory_tokens


def test_source_lines_restored_to_source_order_and_whole() -> None:
    history = _log_history(200)
    result = compile_memory(history, "batch 150 worker-3", budget_tokens=300, strategy="rag")
    kept = [row for row in result.ledger if row.kind == "source" and row.included]
    assert [int(r.key[1:]) for r in kept] == sorted(int(r.key[1:]) for r in kept)
    assert result.compiled_memory == "".join(r.text + "\n" for r in kept)
    assert "processed batch 150 " in result.compiled_memory  # the best BM25 match is kept


def test_tomc_raw_gives_records_42_percent_and_unused_flows_to_source() -> None:
    history = _log_history(400)
    result = compile_memory(history, "What is var13?", budget_tokens=1000, strategy="tomc_raw")
    record_tokens = sum(result.tokens_by_kind[k] for k in ("state", "relation", "count"))
    assert 0 < record_tokens <= 420
    assert result.memory_tokens > 900  # the record share left over went to source lines
    records_only = compile_memory(history, "What is var13?", budget_tokens=1000, strategy="tomc")
    assert records_only.tokens_by_kind["source"] == 0


def test_tiny_budget_gives_empty_memory_not_overrun() -> None:
    result = compile_memory(SEED_HISTORY, "What is C?", budget_tokens=3, strategy="tomc")
    assert result.compiled_memory == ""
    assert result.memory_tokens == 0
    assert all("over record budget" in r.reason for r in result.ledger if r.kind == "state")


def test_default_budget_applies() -> None:
    result = compile_memory(_log_history(3000), "What is var13?")
    assert result.budget_tokens == tomc.default_budget(result.input_tokens)
    assert result.memory_tokens <= result.budget_tokens


def test_auto_returns_fitting_history_unchanged() -> None:
    result = compile_memory(SEED_HISTORY, "What is C?", budget_tokens=10_000, strategy="auto")
    assert result.applied_strategy == "unchanged"
    assert result.compiled_memory == SEED_HISTORY


def test_auto_picks_tomc_raw_for_routes_and_rag_for_retrieval() -> None:
    history = _log_history(300)
    assert (
        compile_memory(
            history, "What is var13?", budget_tokens=200, strategy="auto"
        ).applied_strategy
        == "tomc_raw"
    )
    plain = compile_memory(
        history, "which worker processed batch 12", budget_tokens=200, strategy="auto"
    )
    assert (plain.route, plain.applied_strategy) == ("raw", "rag")
    wording = compile_memory(
        history, "quote exactly what worker-3 logged", budget_tokens=200, strategy="auto"
    )
    assert wording.applied_strategy == "tomc_raw"


def test_relation_route_joins_requested_sequence() -> None:
    history = "alice -[assigned]-> team\nteam -[owns]-> archive\nbob -[owns]-> team\nchatter"
    result = compile_memory(history, "relation: assigned > owns", strategy="tomc")
    assert result.route == "relation"
    rows = [r for r in result.ledger if r.kind == "relation"]
    assert [(r.key, r.source_ids) for r in rows] == [
        ("alice -[assigned]-> team -[owns]-> archive", ("u0", "u1"))
    ]


def test_relation_caps_and_uncapped_mode() -> None:
    lines = [f"hub -[to]-> m{i}" for i in range(20)]
    lines += [f"m{i} -[to]-> leaf{j}" for i in range(20) for j in range(10)]
    history = "\n".join(lines)
    capped = compile_memory(history, "relation: to > to", strategy="tomc", budget_tokens=100_000)
    assert capped.caps_exceeded["relation"]
    assert sum(r.kind == "relation" for r in capped.ledger) == 120
    uncapped = compile_memory(
        history, "relation: to > to", strategy="tomc", budget_tokens=100_000, uncapped=True
    )
    assert uncapped.caps_exceeded["relation"]
    assert sum(r.kind == "relation" and r.included for r in uncapped.ledger) == 200


def test_state_cap_keeps_relevant_rows_first() -> None:
    history = "\n".join(f"v{i} = {i}" for i in range(150))
    result = compile_memory(
        history, "What is the value of v3?", strategy="tomc", budget_tokens=100_000
    )
    state = [r for r in result.ledger if r.kind == "state"]
    assert state[0].key == "v3" and state[0].included
    assert sum(r.included for r in state) == 96
    assert result.caps_exceeded["state"]
    assert all(r.reason == "over cap (96 state rows)" for r in state if not r.included)
    uncapped = compile_memory(
        history, "value of v3?", strategy="tomc", budget_tokens=100_000, uncapped=True
    )
    assert sum(r.included for r in uncapped.ledger if r.kind == "state") == 150


def test_count_route_named_terms_only_common_words_when_asked() -> None:
    history = "apple banana apple\ncherry apple\nbanana kiwi\nthe the the the"
    result = compile_memory(history, 'How many times does "apple" appear?', strategy="tomc")
    counts = [(r.key, r.value, r.source_ids) for r in result.ledger if r.kind == "count"]
    assert counts == [("apple", "3", ("u0", "u1"))]  # no filler rows for words not asked about
    top = compile_memory(history, "What are the 3 most common words?", strategy="tomc")
    keys = [r.key for r in top.ledger if r.kind == "count"]
    assert keys == ["apple", "banana", "cherry"]  # exactly the 3 asked for
    assert "the" not in keys  # stopwords are not "common words"


def test_chinese_routing_and_cjk_counting() -> None:
    history = "我喜欢苹果\n苹果和香蕉\n今天天气很好"
    result = compile_memory(history, "苹果出现了几次？", strategy="tomc")
    assert result.route == "count" and "几次" in result.route_reason
    counts = {r.key: r.value for r in result.ledger if r.kind == "count"}
    assert counts["苹果"] == "2"
    assert compile_memory("A = 1\n数据", "A的当前值是多少", strategy="tomc").route in (
        "count",
        "state",
    )
    assert compile_memory("x -[管理]-> y", "它们之间的关系", strategy="tomc").route == "relation"
    assert compile_memory("状态 = 好", "当前状态", strategy="tomc").route == "state"
    assert LexicalCounter().count("我喜欢apple!") == 5


@pytest.mark.parametrize(
    ("task", "route"),
    [
        ("relation: assigned > owns", "relation"),
        ("How many errors were logged?", "count"),
        ("What is the current deploy target?", "raw"),  # no variable defined: nothing to read
        ("What did alice say about the canary?", "raw"),
        ("Who is related to alice?", "relation"),
    ],
)
def test_router_cues(task: str, route: str) -> None:
    history = "alice: the canary is fine\nalice -[assigned]-> team"
    result = compile_memory(history, task, strategy="tomc")
    assert result.route == route
    assert result.route_reason


def test_deterministic_output() -> None:
    history = _log_history(500)
    a = compile_memory(history, "What is var23 and batch 77?", budget_tokens=700)
    b = compile_memory(history, "What is var23 and batch 77?", budget_tokens=700)
    assert a.compiled_memory == b.compiled_memory
    assert a.ledger == b.ledger


def test_to_dict_is_json_and_inspect_lists_everything() -> None:
    result = compile_memory(SEED_HISTORY, "What is C?", budget_tokens=12)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["route"] == "state" and len(data["sources"]) == 4
    text = result.inspect()
    for unit in result.sources:
        assert unit.id in text
    assert "over " in text and "TOKENS" in text


@pytest.mark.parametrize(
    ("history", "task", "kwargs", "error", "words"),
    [
        ("", "q", {}, InvalidHistoryError, "empty"),
        ("\n \n", "q", {}, InvalidHistoryError, "empty"),
        ("a", "  ", {}, InvalidHistoryError, "task is empty"),
        ("a", "q", {"strategy": "best"}, InvalidOptionError, "unknown strategy"),
        ("a", "q", {"counter": "words"}, InvalidOptionError, "unknown counter"),
        ("a", "q", {"counter": "o200k_base"}, InvalidOptionError, "name the encoding"),
        ("a", "q", {"budget_tokens": -1}, InvalidOptionError, ">= 0"),
        ("a", "q", {"budget_tokens": 1.5}, InvalidOptionError, "int"),
        (
            [{"role": "user", "content": [{"type": "image_url"}]}],
            "q",
            {},
            InvalidHistoryError,
            "image_url",
        ),
        ([{"content": "x"}], "q", {}, InvalidHistoryError, "role"),
        (b"bytes", "q", {}, InvalidHistoryError, "bytes"),
        ("bin\x00ary", "q", {}, InvalidHistoryError, "binary"),
        (42, "q", {}, InvalidHistoryError, "list of chat messages"),
    ],
)
def test_bad_input_names_the_problem(history, task, kwargs, error, words) -> None:
    with pytest.raises(error) as info:
        compile_memory(history, task, **kwargs)
    assert isinstance(info.value, TomcError)
    assert words in str(info.value)


def test_malformed_operations_and_huge_lines_are_source_text() -> None:
    history = "A =\n= 3\nB copies\n-[x]-> y\n" + "word " * 50_000
    result = compile_memory(history, "what words", strategy="tomc_raw", budget_tokens=60_000)
    assert [r for r in result.ledger if r.kind == "state"] == []
    assert result.memory_tokens <= 60_000


@given(
    st.lists(st.text(max_size=60), min_size=1, max_size=20).map("\n".join),
    st.text(min_size=1, max_size=40),
    st.integers(min_value=0, max_value=400),
    st.sampled_from(["tomc", "tomc_raw", "rag", "auto"]),
)
def test_never_crashes_on_arbitrary_unicode(
    history: str, task: str, budget: int, strategy: str
) -> None:
    try:
        result = compile_memory(history, task, budget_tokens=budget, strategy=strategy)
    except (InvalidHistoryError, InvalidOptionError):
        return  # empty history / task, NUL bytes: named errors are the right answer
    if result.applied_strategy != "unchanged":
        assert result.memory_tokens <= budget
    assert safe_cost("lexical", result.compiled_memory) == result.memory_tokens


def test_bpe_counter_budget_and_recount() -> None:
    pytest.importorskip("bpe_openai")
    history = _log_history(200) + "\n    indented code line\n中文内容也在这里。\n"
    for name in ("bpe:o200k_base", "bpe:cl100k_base"):
        result = compile_memory(history, "What is var13?", budget_tokens=500, counter=name)
        assert result.counter == name
        assert tomc.get_counter(name).count(result.compiled_memory) == result.memory_tokens <= 500


def test_custom_counter_object() -> None:
    class CharCounter:
        name = "chars"

        def count(self, text: str) -> int:
            return len(text)

    result = compile_memory(SEED_HISTORY, "What is C?", budget_tokens=40, counter=CharCounter())
    assert result.counter == "chars" and len(result.compiled_memory) == result.memory_tokens <= 40


def test_records_only_counts_the_history_once_and_only_when_asked() -> None:
    class CharCounter:
        name = "chars"

        def __init__(self) -> None:
            self.seen: list[str] = []

        def count(self, text: str) -> int:
            self.seen.append(text)
            return len(text)

    history = [{"role": "user", "content": f"A = {n}\nfiller line {n}"} for n in range(50)]
    counter = CharCounter()
    result = compile_memory(
        history, "What is A?", budget_tokens=40, strategy="tomc", counter=counter
    )
    assert "A = 49" in result.compiled_memory
    whole = "".join(f"user: A = {n}\nuser: filler line {n}\n" for n in range(50))
    assert whole not in counter.seen  # nothing in compiling records needed the history's size
    assert result.input_tokens == len(whole) == result.to_dict()["input_tokens"]
    assert counter.seen.count(whole) == 1  # counted on first access, then kept
    rows = compile_memory(history, "What is A?", budget_tokens=40, counter=CharCounter())
    assert rows.input_tokens == len(whole)  # per row, the same figure


@given(
    st.lists(
        st.one_of(
            st.builds(
                lambda n, v: f"v{n} = {v}",
                st.integers(0, 30),
                st.text("xyz0123 ", min_size=1, max_size=12),
            ),
            st.builds(lambda a, b: f"v{a} copies v{b}", st.integers(0, 30), st.integers(0, 30)),
            st.text("abc ", min_size=1, max_size=20),
        ),
        min_size=1,
        max_size=60,
    ),
    st.integers(0, 300),
)
def test_record_packing_matches_reference_greedy(lines: list[str], budget: int) -> None:
    history = "\n".join(lines)
    if not history.strip():
        return
    result = compile_memory(
        history, "What is the value of v3?", budget_tokens=budget, strategy="tomc"
    )
    rows = [r for r in result.ledger if r.kind == "state"]
    within_cap = rows[: tomc.CAPS["state"]]
    expected = reference_pack([r.tokens for r in within_cap], budget)
    assert [i for i, r in enumerate(within_cap) if r.included] == expected
    assert not any(r.included for r in rows[tomc.CAPS["state"] :])


def test_relation_cap_keeps_paths_from_the_named_entity() -> None:
    lines = [f"p{i} -[to]-> m{i}" for i in range(200)] + [f"m{i} -[to]-> end" for i in range(200)]
    lines.append("zed -[to]-> m3")  # the named start comes last in the history
    history = "\n".join(lines)
    result = compile_memory(
        history, "Where does zed lead? relation: to > to", strategy="tomc", budget_tokens=100_000
    )
    assert result.caps_exceeded["relation"]
    keys = [r.key for r in result.ledger if r.kind == "relation"]
    assert keys[0] == "zed -[to]-> m3 -[to]-> end"


def test_relation_rows_relevant_by_named_entity_or_label_on_other_routes() -> None:
    history = (
        "rollback_target = staging\nplatform_team -[owns]-> deploy_pipeline\n"
        "dave -[assigned]-> data_team\nlunch order: pizza"
    ) + "".join(f"\nheartbeat {i}: all quiet" for i in range(40))  # more than the memory
    task = "What is rollback_target? Who owns the deploy pipeline?"
    result = compile_memory(history, task, strategy="tomc_raw", budget_tokens=200)
    assert result.route == "state"
    rows = {r.key: r for r in result.ledger if r.kind == "relation"}
    assert rows["platform_team -[owns]-> deploy_pipeline"].included
    assert not rows["dave -[assigned]-> data_team"].included


def test_detect_chat_messages_reads_only_json_lists_of_objects() -> None:
    from tomc._core.sources import detect_chat_messages

    assert detect_chat_messages('[{"role": "user", "content": "hi"}]') == [
        {"role": "user", "content": "hi"}
    ]
    assert detect_chat_messages('[{"content": "no role"}]') == [{"content": "no role"}]
    for text in ("[10:02] deploy done", "[1, 2]", "[]", "plain", "[" * 100_000):
        assert detect_chat_messages(text) is None


@pytest.mark.parametrize("strategy", ["tomc", "tomc_raw", "rag", "auto"])
@pytest.mark.parametrize("budget", [10**400, 2**64, MAX_BUDGET_TOKENS + 1])
def test_absurd_budgets_are_clamped_not_crashes(strategy: str, budget: int) -> None:
    result = compile_memory(SEED_HISTORY, "What is C?", budget_tokens=budget, strategy=strategy)
    assert result.budget_tokens == MAX_BUDGET_TOKENS
    assert "STATE C = 3" in result.compiled_memory or result.applied_strategy != "tomc"
    assert result.memory_tokens <= result.budget_tokens


@pytest.mark.parametrize("strategy", ["tomc", "tomc_raw", "rag", "auto"])
def test_unbroken_runs_cannot_overrun_a_lexical_budget(strategy: str) -> None:
    run = "QUJD" * 250_000  # a 1,000,000-character word (base64-like): one lexical token
    history = f"deploy_target = staging\n{run}\nnote: the blob above is the build artefact"
    result = compile_memory(history, "What is deploy_target?", budget_tokens=5, strategy=strategy)
    assert result.applied_strategy != "unchanged"
    assert len(result.compiled_memory) <= 5 * CHARS_PER_TOKEN_FLOOR
    assert result.memory_tokens <= 5
    assert safe_cost("lexical", result.compiled_memory) == result.memory_tokens
    assert result.input_tokens >= 1_000_000 // CHARS_PER_TOKEN_FLOOR  # fit decisions see it
    if strategy != "tomc":
        blob = next(r for r in result.ledger if r.kind == "source" and r.text == run)
        assert blob.tokens == 1_000_000 // CHARS_PER_TOKEN_FLOOR and not blob.included


@pytest.mark.parametrize(
    "history",
    ["int x = 1;\n// comment\n", "see ->\n/tmp is full\n", "a;\n/\n//\n/x;\n/y\nplain\n"],
)
@pytest.mark.parametrize("counter", ["bpe:o200k_base", "bpe:cl100k_base"])
@pytest.mark.parametrize("strategy", ["tomc_raw", "rag", "auto"])
def test_bpe_packing_is_exact_across_joined_lines(
    history: str, counter: str, strategy: str
) -> None:
    pytest.importorskip("bpe_openai")
    bpe = tomc.get_counter(counter)
    for budget in range(bpe.count(history) + 2):
        result = compile_memory(
            history, "what is full?", budget_tokens=budget, strategy=strategy, counter=counter
        )
        assert bpe.count(result.compiled_memory) == result.memory_tokens
        if result.applied_strategy == "unchanged":
            assert result.compiled_memory == history and result.memory_tokens == bpe.count(history)
            continue
        assert result.memory_tokens <= budget
        assert sum(r.tokens for r in result.ledger if r.included) == result.memory_tokens


code_lines = st.one_of(
    st.sampled_from(["int x = 1;", "// comment", "/tmp is full", "see ->", "//", "/", "a = b;"]),
    st.sampled_from(["/* block */", "x += 2;", "v1 = 3", "v1 copies v2", "return x;"]),
    st.text(alphabet="/;.->( )xyv1=中", min_size=1, max_size=10),
).filter(str.strip)


@given(
    st.lists(code_lines, min_size=1, max_size=25).map("\n".join),
    st.integers(0, 120),
    st.sampled_from(["tomc", "tomc_raw", "rag"]),
    st.sampled_from(["bpe:o200k_base", "bpe:cl100k_base"]),
)
def test_bpe_never_over_budget_and_exact_on_code(
    history: str, budget: int, strategy: str, counter: str
) -> None:
    pytest.importorskip("bpe_openai")
    result = compile_memory(
        history, "what is v1 and x?", budget_tokens=budget, strategy=strategy, counter=counter
    )
    assert tomc.get_counter(counter).count(result.compiled_memory) == result.memory_tokens
    if result.applied_strategy == "unchanged":  # the memory would have cost more than this
        assert result.compiled_memory == history and result.memory_tokens <= budget
        return
    assert result.memory_tokens <= budget
    assert sum(r.tokens for r in result.ledger if r.included) == result.memory_tokens


@pytest.mark.parametrize(
    "task",
    [
        "relation: assigned > owns. Which archive does alice reach?",
        "Using relation: assigned > owns, which archive does alice reach?",
        "Which archive does alice reach (relation: assigned > owns)?",
        "relation：assigned ＞ owns；alice 能到哪个档案？",
    ],
)
def test_relation_predicate_inside_a_sentence(task: str) -> None:
    history = "alice -[assigned]-> team\nteam -[owns]-> archive\nbob -[owns]-> team"
    result = compile_memory(history, task, strategy="tomc")
    assert result.route == "relation"
    assert "relation: assigned > owns" in result.route_reason
    keys = [r.key for r in result.ledger if r.kind == "relation"]
    assert keys == ["alice -[assigned]-> team -[owns]-> archive"]


def test_relation_predicate_with_multi_word_labels_uses_the_history_labels() -> None:
    history = "ann -[works with]-> bo\nbo -[reports to]-> cy"
    result = compile_memory(history, "relation: works with > reports to. who?", strategy="tomc")
    assert [r.key for r in result.ledger if r.kind == "relation"] == [
        "ann -[works with]-> bo -[reports to]-> cy"
    ]


def test_relation_cap_keeps_paths_to_the_named_end_node() -> None:
    lines = [f"root -[l1]-> mid{i}" for i in range(40)]
    lines += [f"mid{i} -[l2]-> leaf{i}_{j}" for i in range(40) for j in range(30)]
    result = compile_memory(
        "\n".join(lines), "Which path reaches leaf32_7? relation: l1 > l2", strategy="tomc"
    )
    rows = [r for r in result.ledger if r.kind == "relation"]
    assert result.caps_exceeded["relation"] and len(rows) == 120
    assert rows[0].key == "root -[l1]-> mid32 -[l2]-> leaf32_7" and rows[0].included
    assert "root -[l1]-> mid32 -[l2]-> leaf32_7" in result.compiled_memory


@pytest.mark.parametrize(
    ("history", "task", "name"),
    [
        ("deploy_target = staging\nnoise", "deploy_target的当前值是什么？", "deploy_target"),
        ("deploy_target = staging\nnoise", "请问deploy_target现在是多少", "deploy_target"),
        ("温度 = 21\n湿度 = 40\n其他记录", "温度的当前值是什么？", "温度"),
        ("温度 = 21\n湿度 = 40\n其他记录", "现在的温度是多少？", "温度"),
        ("温度 = 21\n室内温度 copies 温度", "室内温度是多少", "室内温度"),
    ],
)
def test_names_glued_to_chinese_are_found(history: str, task: str, name: str) -> None:
    result = compile_memory(history, task, strategy="tomc", budget_tokens=200)
    assert result.route == "state" and name in result.route_reason
    first = next(r for r in result.ledger if r.kind == "state")
    assert first.key == name and first.included and "task-relevant" in first.reason


def test_one_cjk_character_is_not_a_mention() -> None:
    result = compile_memory("值 = 5\n温度 = 21", "温度的值是多少", strategy="tomc")
    relevant = [r.key for r in result.ledger if r.kind == "state" and "task-relevant" in r.reason]
    assert relevant == ["温度"]


history_lines = st.one_of(
    st.sampled_from(["A = 3", "B copies A", "x -[owns]-> y", "build passed", "ok", "A = 8"]),
    st.text(alphabet="abc =-[]>", min_size=1, max_size=12),
).filter(str.strip)


@given(
    st.lists(history_lines, min_size=1, max_size=12),
    st.sampled_from(["What is A?", "How many builds passed?", "relation: owns", "hello"]),
    st.one_of(st.none(), st.integers(0, 200)),
    st.sampled_from(["tomc", "tomc_raw", "rag", "auto"]),
    st.booleans(),
)
def test_memory_never_larger_than_its_history(
    lines: list[str], task: str, budget: int | None, strategy: str, chat: bool
) -> None:
    history: str | list[dict[str, str]] = "\n".join(lines)
    if chat:
        history = [
            {"role": ("user", "assistant")[i % 2], "content": t} for i, t in enumerate(lines)
        ]
    result = compile_memory(history, task, budget_tokens=budget, strategy=strategy)
    if strategy != "tomc":  # records only is asked for by name and stays records
        assert result.memory_tokens <= result.input_tokens
    if result.applied_strategy == "unchanged":
        assert result.memory_tokens == result.input_tokens <= result.budget_tokens
        if isinstance(history, str):
            assert result.compiled_memory == history
    else:
        assert result.memory_tokens <= result.budget_tokens


def test_records_added_to_a_fitting_history_give_it_back_unchanged() -> None:
    chat = [
        {"role": "user", "content": "deploy_target = staging"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "What is the current value of deploy_target?"},
    ]
    result = compile_memory(chat, "What is the current value of deploy_target?")
    assert result.applied_strategy == "unchanged"
    assert result.memory_tokens == result.input_tokens < result.budget_tokens
    assert all("would be larger than the history" in r.reason for r in result.ledger)


@given(
    people=st.lists(
        st.sampled_from(["alice", "bob", "carol", "dave", "erin", "frank", "grace"]),
        min_size=2,
        max_size=6,
        unique=True,
    ),
    chatter=st.integers(min_value=100, max_value=300),
)
def test_relations_asked_in_plain_words_bring_their_edges(people, chatter) -> None:
    lines = [f"status check {n}: all services green" for n in range(chatter)]
    edges = [f"{a} -[reports_to]-> {b}" for a, b in itertools.pairwise(people)]
    owned = [f"{person} -[owns]-> system_{k}" for k, person in enumerate(people)]
    for k, line in enumerate(edges + owned):
        lines.insert((k * 37) % (len(lines) + 1), line)
    history = "\n".join(lines)
    result = compile_memory(history, "Who reports to whom?", budget_tokens=300)
    assert result.route == "relation" and "reports_to" in result.route_reason
    for a, b in itertools.pairwise(people):
        assert f"RELATION {a} -[reports_to]-> {b} (" in result.compiled_memory
    owner = people[-1]
    result = compile_memory(history, f"What does {owner} own?", budget_tokens=300)
    assert f"RELATION {owner} -[owns]-> system_{len(people) - 1} (" in result.compiled_memory


_GREEK = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


@given(
    lines=st.lists(
        st.lists(st.sampled_from(_GREEK), min_size=1, max_size=8).map(" ".join),
        min_size=20,
        max_size=120,
    ),
    k=st.integers(min_value=1, max_value=12),
    budget=st.integers(min_value=10, max_value=400),
)
def test_count_rows_come_first_and_say_how_many_of_how_many(lines, k, budget) -> None:
    task = f"What are the {k} most common words?"
    result = compile_memory("\n".join(lines), task, budget_tokens=budget)
    if result.applied_strategy == "unchanged":
        return
    memory = result.compiled_memory.splitlines()
    counts = [i for i, line in enumerate(memory) if line.startswith("COUNT ")]
    assert counts == list(range(len(counts)))  # every count row before any source line
    asked = [
        row
        for row in result.ledger
        if row.kind == "count" and row.key != "rows shown" and "not asked" not in row.reason
    ]
    shown = [row for row in asked if row.included]
    notes = [row for row in result.ledger if row.kind == "count" and row.key == "rows shown"]
    if len(shown) < len(asked):
        expected = (
            f"COUNT rows shown: {len(shown)} of {len(asked)}; "
            f"{len(asked) - len(shown)} more did not fit the budget"
        )
        if not notes:  # only a budget too small for the note itself goes without it
            assert not shown and row_costs(get_counter("lexical"), [expected])[0] > budget
            return
        assert [note.text for note in notes] == [expected]
        assert expected in memory
    else:
        assert not notes


def _two_person_chat(seed: int) -> tuple[list[str], str, str, str]:
    """A generated chat between two people: filler, one line of each about the same thing,
    and a line two turns after a question that answers it without repeating its words."""
    import random

    rng = random.Random(seed)
    first, second = rng.sample(["Ann", "Bob", "Chen", "Dana", "Eli", "Fay"], 2)
    pet = rng.choice(["puppy", "kitten", "parrot"])
    filler = [
        f"{rng.choice((first, second))}: the weather was {rng.choice(('mild', 'grey', 'warm'))} "
        f"and work was {rng.choice(('busy', 'slow', 'fine'))} {i}"
        for i in range(60)
    ]
    theirs = f"{second}: we adopted a {pet}, a tiny {pet}"  # more of the task's words
    answer = f"{first}: I adopted a {pet} from the shelter"
    rows = [*filler[:20], theirs, *filler[20:40], answer, *filler[40:]]
    rows[50:50] = [
        f"{second}: what did you do at the weekend, {first}?",
        f"{first}: oh, so much",
        f"{first}: we went camping by the lake",
    ]
    return rows, f"Which {pet} did {first} adopt?", answer, theirs


@pytest.mark.parametrize("seed", range(8))
def test_a_line_said_by_the_person_the_task_names_comes_before_another_s(seed: int) -> None:
    rows, task, answer, theirs = _two_person_chat(seed)
    cost = row_costs(get_counter("lexical"), [answer])[0]
    result = tomc.compile_memory("\n".join(rows), task, budget_tokens=cost, strategy="rag")
    assert result.compiled_memory == answer + "\n"
    ledger = {row.text: row for row in result.ledger}
    assert float(ledger[answer].value) > float(ledger[theirs].value)


@pytest.mark.parametrize("seed", range(4))
def test_evidence_two_lines_after_a_match_ranks_above_lines_far_from_any(seed: int) -> None:
    rows, _, _, _ = _two_person_chat(seed)
    person = rows[50].rsplit(" ", 1)[1].rstrip("?")
    result = tomc.compile_memory(
        "\n".join(rows), f"What did {person} do at the weekend?", budget_tokens=40, strategy="rag"
    )
    assert rows[52] in result.compiled_memory  # no word of the task, two lines after the question
    ledger = {row.text: row for row in result.ledger}
    assert float(ledger[rows[52]].value) > 0.0
