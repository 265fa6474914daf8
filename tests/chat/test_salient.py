"""Lines that stand out: the kinds searched one by one against one pattern of all of them."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from reference import REFERENCE_SALIENT
from tomc.chat._salient import _says_so, salient

#: Pieces of the lines the kinds are made of, so that random lines hit every kind and its edges.
PIECES = st.sampled_from(
    [
        "ERROR",
        "WARNING",
        "WARN",
        "FAILED",
        "FAILURE",
        "Traceback",
        "Exception",
        "panic",
        "ValueError",
        "Error",
        '  File "',
        "File",
        "http://",
        "https://x",
        "ABC-12",
        "A-1",
        "deadbeef00",
        "0123456789abcdef",
        "x==1",
        "y=2",
        "=",
        "v1.2.3",
        "1.2",
        "10.20.30",
        " ",
        "_",
        "-",
        ".",
        "a",
        "Z",
        "9",
        "é",
        "\t",
    ]
)


@settings(max_examples=2000, deadline=None)
@given(st.lists(PIECES, max_size=8).map("".join))
def test_each_kind_searched_alone_finds_what_one_pattern_finds(line: str) -> None:
    assert _says_so(line) == (REFERENCE_SALIENT.search(line) is not None)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60))
def test_any_text_is_judged_as_the_one_pattern_judges_it(line: str) -> None:
    assert _says_so(line) == (REFERENCE_SALIENT.search(line) is not None)


def test_an_error_among_ordinary_lines_stands_out():
    lines = ["x = compute(a)", "ValueError: bad retries", "y = compute(b)"]
    assert salient(lines) == [False, True, False]
