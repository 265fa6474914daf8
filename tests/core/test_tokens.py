from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tomc import InvalidOptionError, LexicalCounter, default_budget, get_counter
from tomc._core.tokens import CHARS_PER_TOKEN_FLOOR, safe_cost


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


def test_counter_errors() -> None:
    with pytest.raises(InvalidOptionError, match="bpe:o200k_base"):
        get_counter("bpe:p50k")
    with pytest.raises(InvalidOptionError):
        get_counter(3)  # type: ignore[arg-type]


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


_ASCII_TEXT = st.text(alphabet=st.characters(max_codepoint=127), max_size=300)


@given(_ASCII_TEXT)
def test_the_ascii_pattern_finds_the_lexical_tokens_of_ascii_text(text):
    """The fast path for ASCII text is the same tokenizer, not an approximation."""
    from tomc._core.lexicon import ASCII_LEXICAL_PATTERN, LEXICAL_PATTERN, lexical_pattern

    assert ASCII_LEXICAL_PATTERN.findall(text) == LEXICAL_PATTERN.findall(text)
    assert lexical_pattern(text) is ASCII_LEXICAL_PATTERN
    assert lexical_pattern(text + "é") is LEXICAL_PATTERN


@given(st.lists(_ASCII_TEXT.map(lambda t: t.replace("\n", " ")), max_size=8), st.text(max_size=20))
def test_row_costs_are_the_same_with_or_without_a_non_ascii_row(rows, other):
    """The ASCII rows take the fast path beside rows that are not ASCII, wherever those stand:
    every row costs what the Unicode pattern says."""
    from tomc._core.lexicon import LEXICAL_PATTERN
    from tomc._core.tokens import _floored, get_counter, row_costs

    other = other.replace("\n", " ").replace("\r", " ")
    for mixed in ([*rows, other], [other, *rows], [*rows[:2], other, *rows[2:], other]):
        expected = [_floored(r, len(LEXICAL_PATTERN.findall(r))) for r in mixed]
        assert row_costs(get_counter("lexical"), mixed) == expected


@given(st.lists(_ASCII_TEXT.map(lambda t: t.replace("\n", " ")), max_size=12))
def test_the_ascii_row_counts_are_the_lexical_pattern_s(rows):
    """Rows of ASCII text are counted by byte translations, not the regex: the same counts,
    white space of every kind (\\r, \\x0b, \\x1c-\\x1f) and punctuation included."""
    from tomc._core.lexicon import LEXICAL_PATTERN
    from tomc._core.tokens import _ascii_lexical_counts

    assert _ascii_lexical_counts(rows) == [len(LEXICAL_PATTERN.findall(r)) for r in rows]


def test_the_ascii_row_counts_refuse_a_row_with_a_line_break():
    from tomc._core.tokens import _ascii_lexical_counts, get_counter, row_costs

    assert _ascii_lexical_counts(["a b", "c\nd"]) is None
    assert row_costs(get_counter("lexical"), ["a b", "c\nd"]) == [2, 2]
    assert _ascii_lexical_counts(["\x1c,\x1f a_b!c"]) == [4]
