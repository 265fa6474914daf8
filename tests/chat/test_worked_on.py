"""What the agent works on: re-read lines, lines a later call quotes, the newest copy."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tomc.chat._conversation import ASSISTANT, TOOL, Entry, ToolCall, ToolOutput
from tomc.chat._meter import meter_for
from tomc.chat._work_lines import collect, quoted_lines_of
from tomc.chat._work_memory import build_work_memory
from tomc.chat._worked_on import QUOTED_WEIGHT, REPEAT_WEIGHT, line_signals, place

METER = meter_for("o200k_base")
OLD = "            args = () if kwargs else match.groups()"
NEAR = "            kwargs = match.groupdict()  # named groups"


def call(number: int, tool: str, arguments: dict | str, output: str) -> list[Entry]:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    made = ToolCall(f"c{number}", tool, text)
    return [
        Entry(ASSISTANT, "assistant", calls=(made,)),
        Entry(TOOL, "tool", outputs=(ToolOutput(made.id, output),)),
    ]


def bash(number: int, command: str, output: str) -> list[Entry]:
    return call(number, "bash", {"command": command}, output)


def signals_of(entries, earlier=None, focus_calls=()):
    work, _ = collect(entries, 1)
    before = collect(earlier, 1)[0] if earlier is not None else None
    found = line_signals(work, "", before, focus_calls)
    return {
        text: (alive, bonus)
        for text, alive, bonus in zip(work.texts, found.alive, found.bonus, strict=True)
    }


def test_a_line_a_later_edit_quotes_gets_the_quoted_weight():
    entries = bash(0, "sed -n 150,160p resolvers.py", f"{OLD}\n{NEAR}")
    entries += call(1, "str_replace", {"path": "resolvers.py", "old_str": OLD, "new_str": "x"}, "")
    found = signals_of(entries)
    assert found[OLD] == (True, QUOTED_WEIGHT)
    assert found[NEAR] == (True, 0.0)


def test_a_call_s_own_arguments_do_not_quote_its_output():
    entries = bash(0, f"grep -n '{OLD.strip()}' resolvers.py", OLD)
    assert signals_of(entries)[OLD] == (True, 0.0)


def test_the_latest_step_s_call_quotes_too():
    entries = bash(0, "cat resolvers.py", f"{OLD}\n{NEAR}")
    patch = f"*** Begin Patch\n*** Update File: resolvers.py\n@@\n-{OLD}\n+{OLD} or ()\n"
    focus = (ToolCall("c9", "apply_patch", patch),)
    found = signals_of(entries, focus_calls=focus)
    assert found[OLD][1] == QUOTED_WEIGHT  # a patch's removed line, marker and all
    assert found[NEAR][1] == 0.0


def test_re_reads_count_the_calls_the_blocks_before_stand_for():
    earlier = bash(0, "sed -n 140,170p resolvers.py", OLD)
    earlier += bash(1, "pytest -q", NEAR)
    entries = bash(2, "python show_match.py", f"{OLD}\n{NEAR}")
    entries += bash(3, "pytest -q", NEAR)  # the same command: no re-read
    alone, after = signals_of(entries), signals_of(entries, earlier=earlier)
    assert alone[OLD][1] == 0.0
    assert after[OLD][1] == REPEAT_WEIGHT / 2  # two origins: 1 - 1/2
    assert after[NEAR][1] == alone[NEAR][1] == REPEAT_WEIGHT / 2  # pytest and the script


def test_short_lines_are_not_quotes():
    made = ToolCall("c1", "edit", json.dumps({"old_string": "return None\n    }\nelse:"}))
    assert quoted_lines_of(made) == frozenset()


@given(st.text(max_size=200))
def test_any_arguments_are_read_without_error(arguments):
    keys = quoted_lines_of(ToolCall("c1", "tool", arguments))
    assert all(len(key) >= 12 and key == " ".join(key.split()) for key in keys)


def test_arguments_nested_past_the_json_parser_s_depth_are_read_as_text():
    deep = "[" * 100_000
    entries = call(0, "tool", deep, "done: " + "ok " * 5)
    memory = build_work_memory(
        entries, task="", focus=(), later_text="", budget=500, count=METER.count, header="[m]"
    )
    assert "done: ok ok ok ok ok" in memory.text


def test_a_small_block_keeps_the_old_line_the_agent_patched_over_newer_code():
    """The replay's case (django-12184 at 24K): a small block of the newest version of a
    function kept every line of it and lost the line the agent's script replaced."""
    newest = "\n".join(f"            line_{i} = compute_{i}(match, kwargs)" for i in range(12))

    def memory(script: str) -> str:
        entries = bash(0, "python fix_match.py", f"Old method:\n{OLD}\nReplaced.")
        entries += call(1, "write_file", {"path": "fix_match.py", "content": script}, "")
        entries += bash(2, "sed -n 150,170p resolvers.py", newest)
        for number in range(3, 11):  # steps after it that print nothing
            entries += bash(number, f"touch step_{number}.txt", "")
        return build_work_memory(
            entries,
            task="fix the handler",
            focus=(),
            later_text="",
            budget=260,
            count=METER.count,
            header="[m]",
        ).text

    quoting = memory(f"old = '''\n{OLD}\n'''\nsrc = src.replace(old, new)")
    assert OLD in quoting
    assert sum(f"line_{i} =" in quoting for i in range(12)) < 12  # the room was tight
    assert OLD not in memory("src = src.replace(old, new)")  # recency alone keeps the newer


def test_a_call_that_touches_a_file_the_latest_step_works_on_is_in_focus():
    work, _ = collect(bash(0, "cat src/app.py", "x = 1") + bash(1, "cat src/db.py", "y = 2"), 1)
    place(work.groups, {"src/app.py"})
    assert [group.focus for group in work.groups if group.number] == [True, False]
