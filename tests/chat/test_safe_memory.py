"""The safe compaction: every call named, notes cut to a line, no output, within its budget."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tomc.chat._conversation import ASSISTANT, TOOL, USER, Entry, ToolCall, ToolOutput
from tomc.chat._meter import meter_for
from tomc.chat._safe_memory import SAFE_LINE_CHARS, safe_memory, safe_why

METER = meter_for("o200k_base")


def _work(calls: int, argument: str = "cat src/app.py") -> list[Entry]:
    entries = [Entry(USER, "user", "Fix the retry bug.\nIt loses the second attempt.")]
    for n in range(calls):
        call = ToolCall(f"c{n}", "bash", f"{argument} # {n}")
        entries += [
            Entry(ASSISTANT, "assistant", f"Step {n}: looking again.", calls=(call,)),
            Entry(TOOL, "tool", outputs=(ToolOutput(call.id, f"secret output {n}\n" * 50),)),
        ]
    return entries


def test_it_names_every_call_and_leaves_every_output_out():
    text = safe_memory(_work(5), why="in time (within 1 s)", budget=10_000, count=METER.count)
    lines = text.splitlines()
    assert "could not be compiled in time (within 1 s)" in lines[0]
    assert [line for line in lines if line.startswith("[call ")] == [
        f"[call {n + 1} bash] cat src/app.py # {n}" for n in range(5)
    ]
    assert "secret output" not in text
    assert "user: Fix the retry bug. It loses the second attempt." in lines
    assert safe_why(text) == "in time (within 1 s)"


def test_a_short_budget_keeps_the_newest_lines_and_says_how_many_are_left_out():
    text = safe_memory(_work(200), why="x", budget=300, count=METER.count)
    assert METER.count(text) <= 300
    lines = text.splitlines()
    assert lines[1].endswith("older lines of calls and notes left out]")
    assert lines[-1] == "[call 200 bash] cat src/app.py # 199"


@given(
    st.integers(0, 40),
    st.integers(1, 3_000),
    st.text(max_size=300),
)
def test_it_never_exceeds_its_budget_once_the_header_fits(calls, budget, argument):
    text = safe_memory(_work(calls, argument), why="x", budget=budget, count=METER.count)
    header = text.splitlines()[0]
    if METER.count(header + "\n") + METER.count(f"[{2 * calls + 1} older]\n") <= budget:
        assert METER.count(text) <= budget
    # Every line it shows is one line of at most the header's or SAFE_LINE_CHARS' length.
    assert all(len(line) <= SAFE_LINE_CHARS + 40 for line in text.splitlines()[1:])


def test_a_huge_argument_costs_what_a_short_one_does():
    text = safe_memory(_work(1, "x" * 10_000_000), why="x", budget=1_000, count=METER.count)
    assert max(len(line) for line in text.splitlines()[1:]) <= SAFE_LINE_CHARS + 20
