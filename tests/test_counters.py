from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tomc import BpeCounter, InvalidOptionError, LexicalCounter, default_budget, get_counter
from tomc.counters import CHARS_PER_TOKEN_FLOOR, safe_cost
from tomc.errors import CounterError, CounterUnavailableError


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("hello world", ["hello", "world"]),
        ("don't stop!", ["don", "'", "t", "stop", "!"]),
        ("snake_case v2.0", ["snake_case", "v2", ".", "0"]),
        ("中文abc", ["中", "文", "abc"]),
        ("カタカナ한국", ["カ", "タ", "カ", "ナ", "한", "국"]),
        ("  \n\t ", []),
    ],
)
def test_lexical_tokens(text: str, tokens: list[str]) -> None:
    assert LexicalCounter().tokenize(text) == tokens
    assert LexicalCounter().count(text) == len(tokens)


@given(st.lists(st.text(alphabet=st.characters(blacklist_characters="\n\r"), max_size=30)))
def test_lexical_counter_is_additive_over_lines(rows: list[str]) -> None:
    counter = LexicalCounter()
    assert counter.count("".join(r + "\n" for r in rows)) == sum(
        counter.count(r + "\n") for r in rows
    )


def test_bpe_counter_ships_vocabulary_and_is_additive_over_rows() -> None:
    pytest.importorskip("bpe_openai")
    counter = get_counter("bpe:o200k_base")
    assert counter.name == "bpe:o200k_base"
    assert counter.count("hello world") == 2
    rows = ["STATE A = 8 (u2)", "    indented = code", "tail...", "中文。", "x" * 50, "a  b  "]
    assert counter.count("".join(r + "\n" for r in rows)) == sum(
        counter.count(r + "\n") for r in rows
    )


_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
# Rows as the packer sees them: nonblank single lines, including code and paths that start
# with "/" after a line that ends in punctuation (o200k joins those across the line break).
packed_rows = st.lists(
    st.one_of(
        st.text(alphabet=st.characters(blacklist_characters=_LINE_BREAKS), min_size=1, max_size=25),
        st.text(alphabet="/;.->( )xy1中'", min_size=1, max_size=8),
        st.sampled_from(["// comment", "/tmp is full", "int x = 1;", "see ->", "//", "/", "a;"]),
    ).filter(str.strip),
    max_size=8,
)


def _joined_runs_count(counter: BpeCounter, rows: list[str]) -> int:
    """Rows counted apart, except runs that ``joins`` says must be counted together."""
    total, run = 0, rows[:1]
    for row, next_row in itertools.pairwise(rows):
        if counter.joins(row, next_row):
            run.append(next_row)
        else:
            total += counter.count("".join(r + "\n" for r in run))
            run = [next_row]
    return total + counter.count("".join(r + "\n" for r in run))


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@given(rows=packed_rows)
def test_bpe_rows_add_up_except_where_joins_says(encoding: str, rows: list[str]) -> None:
    pytest.importorskip("bpe_openai")
    counter = BpeCounter(encoding)
    assert counter.count("".join(r + "\n" for r in rows)) == _joined_runs_count(counter, rows)


def test_o200k_joins_a_slash_line_to_a_line_ending_in_punctuation() -> None:
    pytest.importorskip("bpe_openai")
    o200k, cl100k = BpeCounter("o200k_base"), BpeCounter("cl100k_base")
    for row, next_row in (("int x = 1;", "// comment"), ("see ->", "/tmp is full")):
        joined = o200k.count(f"{row}\n{next_row}\n")
        assert joined != o200k.count(row + "\n") + o200k.count(next_row + "\n")
        assert o200k.joins(row, next_row) and not cl100k.joins(row, next_row)
    assert not o200k.joins("see", "/tmp") and not o200k.joins("a;", "tmp")


def test_bpe_counts_texts_over_the_library_limits_in_exact_pieces() -> None:
    pytest.importorskip("bpe_openai")
    counter = BpeCounter("o200k_base")
    backend = getattr(counter._encoder, "_backend", None)  # the Rust tokenizer, no size limit
    if backend is None:
        pytest.skip("bpe-openai has no unlimited backend to compare with")
    texts = [
        "我们今天去公园散步，天气很好。" * 20_000,  # 300K characters, 220K tokens
        "see ->\n/tmp is full; 🦩🦩 ok\n" * 40_000,  # 1.1M characters
        "𠀀𠀁, " * 60_000,  # rare CJK: several tokens a character
    ]
    for text in texts:
        assert counter.count(text) == backend.count(text)
    # One pre-token longer than a piece cannot be split exactly: bounded by its UTF-8 bytes.
    run = "🦩" * 120_000
    assert backend.count(run) <= counter.count(run) == len(run.encode())


def test_bpe_library_errors_become_tomc_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("bpe_openai")
    counter = BpeCounter("cl100k_base")

    def refuse(text: str) -> list[int]:
        raise ValueError("Input too long to encode safely")

    monkeypatch.setattr(counter._encoder, "encode_ordinary", refuse)
    with pytest.raises(CounterError, match=r"cl100k_base.*Input too long"):
        counter.count("hello")


def test_counter_errors() -> None:
    with pytest.raises(InvalidOptionError, match="bpe:o200k_base"):
        get_counter("bpe:p50k")
    with pytest.raises(InvalidOptionError):
        get_counter(3)  # type: ignore[arg-type]


def test_missing_bpe_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "bpe_openai":
            raise ImportError("no module")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(CounterUnavailableError, match=r"tomc\[bpe\]"):
        BpeCounter("o200k_base")


@pytest.mark.parametrize(
    ("tokens", "budget"),
    [
        (0, 1024),
        (1000, 1024),
        (10_000, 8000),
        (100_000, 70_000),
        (1_000_000, 600_000),
        (5_000_000, 3_000_000),
    ],
)
def test_default_budget(tokens: int, budget: int) -> None:
    assert default_budget(tokens) == budget


def test_default_budget_slides_monotonically() -> None:
    ratios = [default_budget(n) / n for n in (20_000, 50_000, 200_000, 500_000)]
    assert all(0.6 < r < 0.8 for r in ratios)
    assert ratios == sorted(ratios, reverse=True)


@pytest.mark.parametrize(
    ("text", "cost"),
    [
        ("hello world", 2),  # ordinary text: the lexical count
        ("x" * 80, 10),  # an unbroken run: one token per 8 characters
        ("x" * 81, 11),
        ("    indented = 1", 3),  # white space at the ends does not count towards the floor
        ("a" * 16 + "\n" + "b" * 16 + "\n\n   \n", 4),  # per line, so additive over lines
        ("中文" * 10, 20),  # CJK characters are one token each already
        ("", 0),
    ],
)
def test_safe_cost_floors_lexical_counts_by_characters(text: str, cost: int) -> None:
    assert safe_cost("lexical", text) == cost == safe_cost(LexicalCounter(), text)


@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=40)))
def test_safe_cost_is_additive_over_lines_and_at_least_the_count(lines: list[str]) -> None:
    rows = [line for row in lines for line in row.splitlines()]
    text = "".join(row + "\n" for row in rows)
    assert safe_cost("lexical", text) == sum(safe_cost("lexical", row) for row in rows)
    assert safe_cost("lexical", text) >= LexicalCounter().count(text)
    assert safe_cost("lexical", text) * CHARS_PER_TOKEN_FLOOR >= sum(len(r.strip()) for r in rows)


def test_safe_cost_of_bpe_is_its_count() -> None:
    pytest.importorskip("bpe_openai")
    counter = get_counter("bpe:o200k_base")
    assert safe_cost(counter, "x" * 80) == counter.count("x" * 80)
