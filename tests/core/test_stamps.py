"""Shared stamps: a session's stamp is written once above the kept lines of its group."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tomc
from tomc._core.stamps import find_stamp_groups
from tomc._core.tokens import LexicalCounter, get_counter, row_costs

HEADER = re.compile(r"\[[^\]\n]*\d[^\]\n]*\]")


def chat(sessions: list[list[str]]) -> list[str]:
    """Lines of a dated chat: each session's lines open with its date."""
    rows = []
    for number, lines in enumerate(sessions, start=1):
        rows.extend(f"[10:0{number % 10} am on {number} May, 2023] {line}" for line in lines)
    return rows


def restored(memory: str) -> list[str]:
    """The memory's lines with each group's stamp put back in front of them."""
    out, stamp = [], None
    for line in memory.splitlines():
        if line.startswith("[the line above "):
            out[-1] += "\n" + line  # a note on the line above belongs to it
        elif HEADER.fullmatch(line):
            stamp = line
        elif line:  # a line with a stamp of its own is not in a group
            out.append(f"{stamp} {line}" if stamp and not HEADER.match(line) else line)
    return out


def test_a_run_of_one_stamp_is_a_group_and_a_lone_stamp_is_not() -> None:
    rows = [
        "[1 May 2023] Ann: hi",
        "[1 May 2023] Bob: hello",
        "[2 May 2023] Ann: alone on this day",
        "[3 May 2023] Bob: again",
        "[3 May 2023] Ann: yes",
        "[4 May 2023] [5 May 2023] two stamps",
        "[4 May 2023] [5 May 2023] read as one's own",
    ]
    counter = LexicalCounter()
    groups = find_stamp_groups(rows, row_costs(counter, rows), counter)
    assert groups.group_of == {0: 0, 1: 0, 3: 1, 4: 1}
    assert groups.headers == ["[1 May 2023]", "[3 May 2023]"]
    assert groups.rows[0] == "Ann: hi" and groups.rows[2] == rows[2] and groups.rows[5] == rows[5]
    assert groups.row_tokens == row_costs(counter, groups.rows)
    assert groups.header_tokens == row_costs(counter, groups.headers)


@pytest.mark.parametrize(
    "odd_one",
    ["[INFO] a level is no stamp", "db_host = db-1.internal", "[1 May 2023]no space after it"],
)
def test_no_groups_unless_every_line_opens_with_a_stamp(odd_one: str) -> None:
    # in the memory, a line without a stamp would read as said at the group's time
    rows = ["[1 May 2023] Ann: hi", "[1 May 2023] Bob: hello", odd_one, "[1 May 2023] Ann: bye"]
    counter = LexicalCounter()
    groups = find_stamp_groups(rows, row_costs(counter, rows), counter)
    assert not groups.grouped and groups.rows == rows


def test_the_memory_writes_each_stamp_once_and_keeps_each_line_after_it_exactly() -> None:
    rows = chat(
        [
            ["Ann: I adopted a dog called Max", "Bob: what breed is Max?", "Ann: a beagle"],
            ["Bob: I painted a lake", "Ann: which lake?", "Bob: the one near home"],
        ]
    )
    result = tomc.compile_memory("\n".join(rows), "What dog did Ann adopt?", budget_tokens=40)
    memory = result.compiled_memory
    assert memory.count("[10:01 am on 1 May, 2023]") == 1
    assert "Ann: I adopted a dog called Max\n" in memory
    assert set(restored(memory)) <= set(rows)
    first = next(r for r in result.ledger if r.source_ids == ("u0",))
    assert first.included and "written once above it" in first.reason


def test_stamps_free_room_for_more_lines_in_the_same_budget() -> None:
    sessions = [[f"Ann: line {s} {i} about the garden" for i in range(6)] for s in range(4)]
    rows = chat(sessions)
    budget = 60
    grouped = tomc.compile_memory("\n".join(rows), "garden", budget_tokens=budget, strategy="rag")
    counter = LexicalCounter()
    costs = row_costs(counter, rows)
    # the most whole stamped lines this budget can hold
    whole = 0
    for cost in sorted(costs):
        if budget < cost:
            break
        budget -= cost
        whole += 1
    assert len(restored(grouped.compiled_memory)) > whole


lines_of_a_session = st.lists(
    st.sampled_from(["Ann: the dog ran", "Bob: a cat sat", "Ann: tea?", "Bob: the lake", "x = 1"]),
    min_size=1,
    max_size=5,
)


@pytest.mark.parametrize("counter", ["lexical", "bpe:o200k_base"])
@settings(max_examples=60, deadline=None)
@given(
    sessions=st.lists(lines_of_a_session, min_size=1, max_size=5),
    budget=st.integers(5, 120),
    task=st.sampled_from(["What did Ann say about the dog?", "lake", "cat tea"]),
)
def test_restoring_the_stamps_gives_back_the_kept_source_lines_within_the_budget(
    counter: str, sessions: list[list[str]], budget: int, task: str
) -> None:
    rows = chat(sessions)
    result = tomc.compile_memory(
        "\n".join(rows), task, budget_tokens=budget, strategy="rag", counter=counter
    )
    if result.applied_strategy == "unchanged":
        return
    memory = result.compiled_memory
    kept = [row for row in result.ledger if row.kind == "source" and row.included]
    assert restored(memory) == [row.text for row in kept]
    assert result.memory_tokens == get_counter(counter).count(memory) <= budget
    assert sum(row.tokens for row in kept) == result.memory_tokens
    # a stamp line is only ever written above a line of its own group
    headers = [line for line in memory.splitlines() if HEADER.fullmatch(line)]
    assert len(headers) == len(set(headers))
