from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tomc._core.operations import Copy, Relation, Set, parse_operation


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("A = 3", Set("A", "3")),
        ("  preference = tea  ", Set("preference", "tea")),
        ("user.name = Bob Smith", Set("user.name", "Bob Smith")),
        ("url = http://x?a=b", Set("url", "http://x?a=b")),
        ("状态 = 好", Set("状态", "好")),
        ("B copies A", Copy("B", "A")),
        ("B copies A.", Copy("B", "A")),
        ("VAR ABCDE = 12345.", Set("ABCDE", "12345")),
        ("VAR FGHIJ = VAR ABCDE.", Copy("FGHIJ", "ABCDE")),
        ("alice -[assigned]-> team", Relation("alice", "assigned", "team")),
        ("Alice Smith -[reports to]-> Team A", Relation("Alice Smith", "reports to", "Team A")),
    ],
)
def test_operations(line: str, expected: object) -> None:
    assert parse_operation(line) == expected


@pytest.mark.parametrize(
    "line",
    [
        "I might switch to tea",
        "The result = good",  # two words before '=': a sentence, not a name
        "a == b",
        "x =",
        "= 3",
        "B copies",
        "-[x]-> y",
        "a -[x]-> b and c -[y]-> d",
        "3 = 4",
        "Bob copies the file to disk",
    ],
)
def test_plain_text_is_not_an_operation(line: str) -> None:
    assert parse_operation(line) is None


@given(st.text())
def test_parser_total_on_arbitrary_text(line: str) -> None:
    op = parse_operation(line)
    assert op is None or isinstance(op, Set | Copy | Relation)
