"""Exact BPE counts: the shipped vocabulary, counting in pieces, lines that join, errors."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tomc import BpeCounter, get_counter
from tomc._core import bpe
from tomc._core.bpe import split_is_exact
from tomc._core.errors import CounterError, CounterUnavailableError
from tomc._core.tokens import safe_cost


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


@pytest.mark.parametrize("native", [True, False])
def test_bpe_library_errors_become_tomc_errors(monkeypatch: pytest.MonkeyPatch, native) -> None:
    pytest.importorskip("bpe_openai")

    def refuse(text: str) -> list[int]:
        raise ValueError("Input too long to encode safely")

    # Either door into the library: its native count, or encode_ordinary without it.
    monkeypatch.setattr(bpe, "_native_count", lambda name: refuse if native else None)
    counter = BpeCounter("cl100k_base")
    monkeypatch.setattr(counter._encoder, "encode_ordinary", refuse)
    with pytest.raises(CounterError, match=r"cl100k_base.*Input too long"):
        counter.count("hello")


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@given(text=st.text(max_size=40) | st.text(alphabet="ab /;.'\n\t-é中😀\ud800<|>", max_size=40))
def test_the_native_count_is_the_length_of_encode_ordinary(encoding: str, text: str) -> None:
    pytest.importorskip("bpe_openai")
    counter = BpeCounter(encoding)
    assert counter._native is not None  # the installed bpe-openai has it: the fast path runs
    assert counter.count(text) == len(counter._encoder.encode_ordinary(text))


def test_missing_bpe_extra_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "bpe_openai":
            raise ImportError("no module")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(CounterUnavailableError, match="optional bpe extra") as caught:
        BpeCounter("o200k_base")
    # No package index serves tomc: the hint is a command that works where it is installed.
    assert "-m pip install -e" in str(caught.value)
    assert "pip install 'tomc[bpe]'" not in str(caught.value)


def test_safe_cost_of_bpe_is_its_count() -> None:
    pytest.importorskip("bpe_openai")
    counter = get_counter("bpe:o200k_base")
    assert safe_cost(counter, "x" * 80) == counter.count("x" * 80)


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@given(text=st.text(alphabet="abXY19 /;.'\n\t\r-é中😀\u3000\x1c", min_size=2, max_size=25))
def test_exact_splits_add_up(encoding: str, text: str) -> None:
    pytest.importorskip("bpe_openai")
    counter = BpeCounter(encoding)
    whole = counter.count(text)
    for index in range(1, len(text)):
        if split_is_exact(text, index, slash_joins=encoding == "o200k_base"):
            assert counter.count(text[:index]) + counter.count(text[index:]) == whole
