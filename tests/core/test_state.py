"""State replay against its reference oracle, plus the seed's worked examples."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reference import reference_state
from tomc import UNKNOWN
from tomc._core.operations import Copy, Set, parse_operation
from tomc._core.state import replaced_writes, replay_state


def _program(lines: list[str]) -> list[tuple[int, Set | Copy]]:
    ops = ((i, parse_operation(line)) for i, line in enumerate(lines))
    return [(i, op) for i, op in ops if isinstance(op, Set | Copy)]


def test_seed_snapshot_example() -> None:
    lines = ["A = 3", "B copies A", "A = 8", "C copies B"]
    state = {e.name: e for e in replay_state(_program(lines))}
    assert (state["A"].value, state["B"].value, state["C"].value) == ("8", "3", "3")
    assert state["C"].source_units == (0, 1, 3)  # the whole chain: A=3, B copies A, C copies B
    assert state["A"].source_units == (2,)


def test_copy_of_undefined_is_unknown() -> None:
    state = {e.name: e for e in replay_state(_program(["B copies NOPE"]))}
    assert state["B"].value == UNKNOWN
    assert state["B"].source_units == (0,)


def test_ruler_variable_tracking_form() -> None:
    lines = ["VAR AAAAA = 12345.", "noise", "VAR BBBBB = VAR AAAAA.", "VAR AAAAA = 999."]
    state = {e.name: e.value for e in replay_state(_program(lines))}
    assert state == {"AAAAA": "999", "BBBBB": "12345"}


names = st.sampled_from(["A", "B", "C", "D", "x.y", "VAR_1"])
values = st.sampled_from(["1", "2", "tea", "coffee", "42"])
op_lines = st.one_of(
    st.builds(lambda n, v: f"{n} = {v}", names, values),
    st.builds(lambda a, b: f"{a} copies {b}", names, names),
    st.builds(lambda n, v: f"VAR {n} = {v}.", names, values),
    st.builds(lambda a, b: f"VAR {a} = VAR {b}.", names, names),
    st.sampled_from(["I might switch to tea", "the value is high", "A == B", "log: build ok"]),
    st.text(max_size=30),
)


@given(st.lists(op_lines, max_size=40))
def test_state_kernel_matches_reference(lines: list[str]) -> None:
    program = _program(lines)
    fast = {e.name: (e.value, e.source_units) for e in replay_state(program)}
    assert fast == reference_state(program)


@given(st.lists(op_lines, max_size=40))
def test_replaced_writes_match_a_replay_of_each_prefix(lines: list[str]) -> None:
    program = _program(lines)
    final = reference_state(program)
    expected = {}
    for at, (unit, op) in enumerate(program):
        name = op.name if isinstance(op, Set) else op.target
        if reference_state(program[: at + 1])[name][0] != final[name][0]:
            expected[unit] = (name, *final[name])
    fast = {unit: (e.name, e.value, e.source_units) for unit, e in replaced_writes(program).items()}
    assert fast == expected


def test_copy_chain_shares_provenance_and_compiles_in_linear_memory() -> None:
    import tracemalloc

    from tomc import compile_memory

    n = 5_000
    history = "\n".join(["V0 = 1", *(f"V{i} copies V{i - 1}" for i in range(1, n))])
    tracemalloc.start()
    result = compile_memory(history, f"What is V{n - 1}?", budget_tokens=10_000, strategy="tomc")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # Materialising every chain holds n*(n+1)/2 unit ids at once (100 MB here); shared chains
    # keep the compile linear, a few MB.
    assert peak < 30_000_000, peak
    shown = f"STATE V{n - 1} = 1 (u0,u1,u2,u3,…,u{n - 4},u{n - 3},u{n - 2},u{n - 1})"
    assert shown in result.compiled_memory
    row = next(r for r in result.ledger if r.key == f"V{n - 1}")
    assert row.source_ids == tuple(f"u{i}" for i in range(n))  # the ledger has the whole chain


def test_chain_knows_length_head_and_tail() -> None:
    lines = ["A = 1", *(f"{chr(66 + i)} copies {chr(65 + i)}" for i in range(10))]
    entries = {e.name: e for e in replay_state(_program(lines))}
    chain = entries["K"].chain
    assert len(chain) == 11
    assert chain.head == (0, 1, 2, 3) and chain.tail == (7, 8, 9, 10)
    assert tuple(chain) == tuple(range(11)) == entries["K"].source_units
    assert entries["B"].chain.head == (0, 1) == entries["B"].chain.tail
