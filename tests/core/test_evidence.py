"""Evidence around records: the writing line first, later mentions named, no stale last word,
each identical line once."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference import reference_mentions, reference_state
from tomc import LexicalCounter, compile_memory
from tomc._core.evidence import PROMOTED_MENTIONS, evidence_order, key_mentions, plan_evidence
from tomc._core.mentions import TaskMentions
from tomc._core.operations import Copy, Set, parse_operation
from tomc._core.tokens import get_counter, row_costs

KEYS = ["db_host", "region", "db", "host.name", "温度"]
_WORDS = ["db_host", "region", "db", "host.name", "温度", "xdb", "db_hostx", "the", "is", "now"]


@given(
    texts=st.lists(
        st.lists(st.sampled_from([*_WORDS, " ", "_", ".", "-", "=", "室内"]), max_size=8).map(
            "".join
        ),
        max_size=30,
    ),
    names=st.sets(st.sampled_from(KEYS), max_size=5),
)
def test_key_mentions_match_the_reference(texts, names) -> None:
    found = key_mentions(texts, names)
    assert found == {name: reference_mentions(texts, name) for name in names}


def test_the_plan_puts_writers_first_then_the_newest_later_mentions() -> None:
    plan = plan_evidence([(10, [11, 12, 13, 14, 15], [2, 10, 11, 12, 13, 14, 15]), (4, [], [4, 7])])
    assert PROMOTED_MENTIONS == 3  # the newest three later mentions of key 10, then key 4
    assert plan.first == [10, 15, 14, 13, 4]
    assert plan.needs[2] == (10,) and plan.needs[7] == (4,) and 10 not in plan.needs
    assert evidence_order([7, 4, 1, 10, 0], plan) == [10, 15, 14, 13, 4, 7, 1, 0]


_LINES = st.one_of(
    st.builds(lambda k, v: f"{k} = v{v}", st.sampled_from(KEYS[:3]), st.integers(0, 5)),
    # A long value: its line may not fit where a shorter line about the key would.
    st.builds(
        lambda k, n: f"{k} = " + " ".join(f"part{i}" for i in range(n)),
        st.sampled_from(KEYS[:3]),
        st.integers(5, 40),
    ),
    st.builds(lambda k: f"backup copies {k}", st.sampled_from(KEYS[:3])),
    st.builds(
        lambda k, v: f"we moved {k} to v{v} in a sentence",
        st.sampled_from(KEYS[:3]),
        st.integers(0, 5),
    ),
    st.builds(lambda n: f"ci: job {n} passed", st.integers(0, 9)),
    st.sampled_from(["chatter about lunch", "standup notes", "the weather is fine"]),
)


@given(
    lines=st.lists(_LINES, min_size=1, max_size=80),
    key=st.sampled_from(KEYS[:3]),
    budget=st.integers(min_value=8, max_value=160),
)
def test_the_newest_writing_line_is_kept_whenever_a_line_of_its_key_is(lines, key, budget) -> None:
    result = compile_memory(
        "\n".join(lines), f"What is the current value of {key}?", budget_tokens=budget
    )
    kept = {int(row.key[1:]) for row in result.ledger if row.kind == "source" and row.included}
    for row in result.ledger:
        if row.kind != "state" or not row.included or row.key != key:
            continue  # the rule holds for the keys the task names (evidence.py)
        writer = _writer(row.text)
        for unit in kept:
            if unit in reference_mentions(lines, row.key):
                assert writer in kept, (row.text, unit, lines[unit])


@given(
    lines=st.lists(_LINES, min_size=1, max_size=80),
    budget=st.integers(8, 400),
    strategy=st.sampled_from(["tomc_raw", "rag"]),
)
def test_no_identical_line_is_packed_twice(lines, budget, strategy) -> None:
    task = "what happened to the jobs?"
    result = compile_memory("\n".join(lines), task, budget_tokens=budget, strategy=strategy)
    if result.applied_strategy == "unchanged":
        return  # a history that fits comes back as it is
    kept = [
        lines[int(row.key[1:])] for row in result.ledger if row.kind == "source" and row.included
    ]
    assert len(kept) == len(set(kept))
    # notes for the keys the task names or whose row the memory shows
    keys = {text.split(" = ", 1)[0] for text in _reference_replaced(lines).values()}
    named = set(TaskMentions(task).variables(keys))
    shown = {r.key for r in result.ledger if r.kind == "state" and r.included} | named
    replaced = {
        unit: text
        for unit, text in _reference_replaced(lines).items()
        if text.split(" = ", 1)[0] in shown
    }
    for row in result.ledger:
        if row.kind != "source" or not row.included:
            continue
        unit = int(row.key[1:])
        times = lines.count(lines[unit])
        if times == 1 and unit not in replaced:
            assert row.text == lines[unit]
            continue
        line, note = row.text.split("\n")
        assert line == lines[unit]  # the source line itself, verbatim
        assert note.startswith("[the line above ") and note.endswith("]")
        if times > 1:
            assert note.startswith(f"[the line above occurs {times} times: ")
        if unit in replaced:  # a superseded value is never shown as current
            assert note.endswith(f"was replaced: {replaced[unit]}]")
            assert "its value was replaced later" in row.reason
        else:
            assert "replaced" not in note
        assert f"\n{row.text}\n" in f"\n{result.compiled_memory}"


def _reference_replaced(lines: list[str]) -> dict[int, str]:
    """Unit -> ``key = value at uN`` (its key's value now, and the line that wrote it), for
    every line that wrote a value another value replaced later: a literal replay per prefix."""
    program = [
        (unit, op)
        for unit, op in enumerate(map(parse_operation, lines))
        if isinstance(op, Set | Copy)
    ]
    final = reference_state(program)
    replaced = {}
    for at, (unit, op) in enumerate(program):
        name = op.name if isinstance(op, Set) else op.target
        value, _ = reference_state(program[: at + 1])[name]
        now, chain = final[name]
        if value != now:
            replaced[unit] = f"{name} = {now} at u{chain[-1]}"
    return replaced


def _writer(state_text: str) -> int:
    """The unit that wrote a STATE row's value: the last id of its provenance."""
    ids = re.search(r"\(([^;)]*)", state_text)[1].split(",")
    return int(ids[-1].strip().lstrip("u"))


def test_a_stale_value_is_never_the_last_word() -> None:
    lines = [f"db_host = db-{n % 7}.internal" for n in range(200)]
    lines += (
        ["ci: job passed"] * 50 + ["db_host = db-9.internal"] + [f"ci: job {n}" for n in range(300)]
    )
    result = compile_memory(
        "\n".join(lines), "What is the current value of db_host?", budget_tokens=120
    )
    memory = result.compiled_memory
    assert memory.startswith("STATE db_host = db-9.internal (u250)")
    body = memory.splitlines()[1:]
    last = [line for line in body if "db_host" in line][-1]
    assert last.startswith("db_host = db-9.internal")


def test_an_update_in_a_sentence_is_named_by_the_record_and_kept() -> None:
    chat = []
    for n in range(30):
        chat.append({"role": "user", "content": f"status {n}?"})
        chat.append({"role": "assistant", "content": "region = eu-west"})
    chat.append({"role": "user", "content": "ok, now region = us-east, the eu cluster is drained"})
    chat.append({"role": "assistant", "content": "Done. region = us-east from now on."})
    result = compile_memory(chat, "What is the current region?", budget_tokens=120)
    lines = result.compiled_memory.splitlines()
    assert lines[0] == "STATE region = eu-west (u59; mentioned later: u60,u61)"
    assert "user: ok, now region = us-east, the eu cluster is drained" in lines
    assert "assistant: Done. region = us-east from now on." in lines
    # Thirty identical replies are one line that says where they were.
    at = lines.index("assistant: region = eu-west")
    assert lines[at + 1] == "[the line above occurs 30 times: u1,u3,u5,u7,…,u53,u55,u57,u59]"


# A record is never crowded out by its own annotation (the lines that mention its key later).


def _deploy_history() -> list[str]:
    lines = [f"checked deploy_target health on node {n}" for n in range(300)]
    lines[10] = "deploy_target = staging"
    lines[200] = "deploy_target = prod"
    return lines


@pytest.mark.parametrize("counter", ["lexical", "bpe:o200k_base"])
def test_a_record_is_never_crowded_out_by_its_later_mentions(counter: str) -> None:
    lines = _deploy_history()
    task = "What is the current value of deploy_target?"
    result = compile_memory("\n".join(lines), task, budget_tokens=60, counter=counter)
    memory = result.compiled_memory.splitlines()
    # The whole row (99 later mentions, 8 ids shown) no longer fits the record share; the
    # newest three, the ones packed beside it, do.
    assert (
        memory[0]
        == "STATE deploy_target = prod (u200; mentioned later: 99 lines, newest u297,u298,u299)"
    )
    assert result.memory_tokens == get_counter(counter).count(result.compiled_memory) <= 60
    row = next(r for r in result.ledger if r.kind == "state")
    assert row.included and row.text == memory[0]
    assert "its 99 later mentions shortened to the newest 3: the whole row needs" in row.reason
    assert "deploy_target = prod" in memory
    if "deploy_target = staging" in memory:  # a stale line says what replaced it
        at = memory.index("deploy_target = staging")
        assert memory[at + 1] == "[the line above was replaced: deploy_target = prod at u200]"


def test_the_annotation_shrinks_to_what_is_left_then_goes() -> None:
    lines = _deploy_history()
    history = "\n".join(lines)
    task = "What is the current value of deploy_target?"
    counter = LexicalCounter()
    plain = "STATE deploy_target = prod (u200)"
    seen = []
    for budget in range(0, 80):
        result = compile_memory(history, task, budget_tokens=budget, strategy="tomc")
        row = next(r for r in result.ledger if r.kind == "state")
        if row_costs(counter, [plain])[0] > budget:
            assert not row.included and "without its later mentions" in row.reason
            continue
        assert row.included and row.text.startswith(plain[:-1])
        seen.append(row.text.removeprefix(plain[:-1]))
    # every form, fullest last, as the budget grows
    assert seen[0] == ")" and "left out of the row" in _reason_at(history, task, 11)
    assert dict.fromkeys(seen) == dict.fromkeys(
        [
            ")",
            "; mentioned later: 99 lines)",
            "; mentioned later: 99 lines, newest u299)",
            "; mentioned later: 99 lines, newest u298,u299)",
            "; mentioned later: 99 lines, newest u297,u298,u299)",
            "; mentioned later: u201,u202,u203,u204,…,u296,u297,u298,u299)",
        ]
    )


def _reason_at(history: str, task: str, budget: int) -> str:
    result = compile_memory(history, task, budget_tokens=budget, strategy="tomc")
    return next(r for r in result.ledger if r.kind == "state").reason


def test_an_asked_row_past_the_record_share_is_packed_before_the_source_lines() -> None:
    value = " ".join(f"part{i}" for i in range(20))
    lines = [f"ci: job {n} passed" for n in range(100)]
    lines[40] = f"db_host = {value}"
    result = compile_memory("\n".join(lines), "What is db_host now?", budget_tokens=40)
    # The plain row costs more than the record share (42% of 40), less than the budget.
    assert result.compiled_memory.startswith(f"STATE db_host = {value} (u40)\n")
    row = next(r for r in result.ledger if r.kind == "state")
    assert "past the record share" in row.reason
    assert result.memory_tokens <= 40


_ASKED_LINES = st.one_of(
    st.builds(lambda k, v: f"{k} = v{v}", st.sampled_from(KEYS[:3]), st.integers(0, 5)),
    st.builds(
        lambda k, n: f"{k} = " + " ".join(f"part{i}" for i in range(n)),
        st.sampled_from(KEYS[:3]),
        st.integers(5, 30),
    ),
    st.builds(
        lambda k, n: f"checked {k} health on node {n}",
        st.sampled_from(KEYS[:3]),
        st.integers(0, 99),
    ),
    st.builds(
        lambda k, v: f"we moved {k} to v{v} in a sentence",
        st.sampled_from(KEYS[:3]),
        st.integers(0, 5),
    ),
    st.builds(lambda n: f"ci: job {n} passed", st.integers(0, 9)),
)


def _oracle_current(lines: list[str], key: str) -> tuple[str, int]:
    """The asked key's value and the line that wrote it: its last ``key = value`` line."""
    unit = max(i for i, line in enumerate(lines) if line.startswith(f"{key} = "))
    return lines[unit].removeprefix(f"{key} = "), unit


@pytest.mark.parametrize("counter", ["lexical", "bpe:o200k_base"])
@pytest.mark.parametrize("strategy", ["tomc_raw", "tomc"])
@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(_ASKED_LINES, min_size=1, max_size=120),
    key=st.sampled_from(KEYS[:3]),
    value=st.integers(0, 5),
    at=st.integers(0, 119),
    budget=st.integers(0, 120),
)
def test_the_asked_key_s_record_is_kept_whenever_its_plain_form_fits(
    counter: str, strategy: str, lines, key, value, at, budget
) -> None:
    lines.insert(at % (len(lines) + 1), f"{key} = v{value}")  # the key is defined
    current, unit = _oracle_current(lines, key)
    result = compile_memory(
        "\n".join(lines),
        f"What is the current value of {key}?",
        budget_tokens=budget,
        strategy=strategy,
        counter=counter,
    )
    tokens = get_counter(counter)
    assert result.memory_tokens == tokens.count(result.compiled_memory)
    if result.applied_strategy == "unchanged":
        assert result.memory_tokens == result.input_tokens <= budget
        return
    assert result.memory_tokens <= budget
    plain = f"STATE {key} = {current} (u{unit})"
    memory = result.compiled_memory.splitlines()
    if row_costs(tokens, [plain])[0] <= budget:
        assert memory, (plain, result.ledger)
        assert memory[0].startswith(plain[:-1])
        assert memory[0] == plain or memory[0].startswith(f"{plain[:-1]}; mentioned later: ")
    assert not any(line.startswith(f"STATE {key} = ") for line in memory[1:])


# A superseded value is never shown as current in the source text.


def _retry_history() -> list[str]:
    lines = [f"ci: job {n} passed" for n in range(60)]
    lines[5] = "retry_limit = 3"
    lines[57] = "retry_limit = 6"
    return lines


@pytest.mark.parametrize("strategy", ["tomc_raw", "rag"])
@pytest.mark.parametrize("counter", ["lexical", "bpe:o200k_base"])
def test_a_superseded_line_says_what_replaced_it(strategy: str, counter: str) -> None:
    lines = _retry_history()
    result = compile_memory(
        "\n".join(lines),
        "What did we set retry_limit to?",
        budget_tokens=80,
        strategy=strategy,
        counter=counter,
    )
    memory = result.compiled_memory.splitlines()
    at = memory.index("retry_limit = 3")
    assert memory[at + 1] == "[the line above was replaced: retry_limit = 6 at u57]"
    assert "retry_limit = 6" in memory  # the line that replaced it carries no note
    assert memory[memory.index("retry_limit = 6") + 1] != "[the line above"
    stale = next(r for r in result.ledger if r.key == "u5")
    assert stale.text == "retry_limit = 3\n[the line above was replaced: retry_limit = 6 at u57]"
    assert stale.reason.endswith(
        "; its value was replaced later (retry_limit = 6 at u57): a note below it says so, "
        "counted with it"
    )
    assert stale.tokens == row_costs(get_counter(counter), [stale.text])[0]
    assert sum(r.tokens for r in result.ledger if r.included) == result.memory_tokens <= 80
    assert result.memory_tokens == get_counter(counter).count(result.compiled_memory)
    assert "its value was replaced later (retry_limit = 6 at u57)" in result.inspect()


def test_a_repeated_superseded_line_has_one_note_that_says_both() -> None:
    lines = _retry_history()
    lines[1] = "retry_limit = 3"
    result = compile_memory("\n".join(lines), "retry_limit", budget_tokens=80, strategy="rag")
    memory = result.compiled_memory.splitlines()
    at = memory.index("retry_limit = 3")
    assert memory[at + 1] == (
        "[the line above occurs 2 times: u1,u5; it was replaced: retry_limit = 6 at u57]"
    )


def test_copies_are_replaced_too_and_the_same_value_again_replaces_nothing() -> None:
    lines = ["A = 3", "B copies A", "A = 8", "B = 9", "C = 1", "C=1", "B copies A"]
    lines += [f"filler {n}" for n in range(40)]
    # B copies A at u1 (3) is replaced by B copies A at u6 (8), its newest copy: u1 is packed
    # as u6, which is current. A = 3 is replaced by A = 8; C = 1 again replaces nothing.
    result = compile_memory("\n".join(lines), "A B C", budget_tokens=60, strategy="rag")
    assert result.applied_strategy == "rag"
    rows = {r.key: r.text for r in result.ledger if r.kind == "source"}
    assert rows["u0"] == "A = 3\n[the line above was replaced: A = 8 at u2]"
    assert rows["u3"] == "B = 9\n[the line above was replaced: B = 8 at u6]"
    assert rows["u4"] == "C = 1" and rows["u2"] == "A = 8"
    assert rows["u6"] == "B copies A\n[the line above occurs 2 times: u1,u6]"
