from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tomc import BpeCounter, InvalidOptionError, LexicalCounter, default_budget, get_counter
from tomc.errors import CounterUnavailableError


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


@given(
    st.lists(
        st.text(
            alphabet=st.characters(blacklist_characters="\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"),
            min_size=1,
            max_size=25,
        ).filter(lambda r: not r[0].isspace()),
        max_size=8,
    )
)
def test_bpe_additivity_property(rows: list[str]) -> None:
    pytest.importorskip("bpe_openai")
    counter = get_counter("bpe:cl100k_base")
    assert counter.count("".join(r + "\n" for r in rows)) == sum(
        counter.count(r + "\n") for r in rows
    )


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
