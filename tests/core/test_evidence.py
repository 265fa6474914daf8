"""Evidence around records: the writing line first, later mentions named, no stale last word,
each identical line once."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from reference import reference_mentions
from tomc import compile_memory
from tomc._core.evidence import PROMOTED_MENTIONS, evidence_order, key_mentions, plan_evidence

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


@given(lines=st.lists(_LINES, min_size=1, max_size=80), budget=st.integers(8, 400))
def test_no_identical_line_is_packed_twice(lines, budget) -> None:
    result = compile_memory("\n".join(lines), "what happened to the jobs?", budget_tokens=budget)
    if result.applied_strategy == "unchanged":
        return  # a history that fits comes back as it is
    kept = [
        lines[int(row.key[1:])] for row in result.ledger if row.kind == "source" and row.included
    ]
    assert len(kept) == len(set(kept))
    for row in result.ledger:
        if row.kind == "source" and row.included and lines.count(lines[int(row.key[1:])]) > 1:
            times = lines.count(lines[int(row.key[1:])])
            line, note = row.text.split("\n")
            assert line == lines[int(row.key[1:])]  # the source line itself, verbatim
            assert note.startswith(f"[the line above occurs {times} times: ")
            assert row.text in result.compiled_memory


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
