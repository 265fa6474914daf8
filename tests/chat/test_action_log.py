"""The action log's plan: every call's header reserved, compact in a small memory."""

from __future__ import annotations

from tomc.chat._action_log import (
    COMPACT_HEADER_ARGS,
    HEADER_ARGS,
    plan_log,
    unkept_log,
)
from tomc.chat._conversation import ASSISTANT, TOOL, Entry, ToolCall, ToolOutput
from tomc.chat._meter import meter_for
from tomc.chat._work_lines import collect

METER = meter_for("o200k_base")


def _calls(count: int) -> list[Entry]:
    entries = []
    for number in range(count):
        command = (
            f"diff -u src/pkg/module_{number:02d}.py build/module_{number:02d}.py "
            "| grep -n 'def handler' | head -40"
        )
        call = ToolCall(f"c{number}", "bash", f'{{"command": "{command}"}}')
        entries += [
            Entry(ASSISTANT, "assistant", calls=(call,)),
            Entry(TOOL, "tool", outputs=(ToolOutput(call.id, f"line {number}"),)),
        ]
    return entries


def _headers(room: int, compact: bool) -> tuple[list[str], list[str], int]:
    work, _ = collect(_calls(12), 1)
    plan = plan_log(work.groups, METER.count, room, compact=compact)
    calls = [group for group in work.groups if group.number]
    return [group.header for group in calls], unkept_log(work.groups), plan.reserved


def _shown(header: str) -> str:
    return header.split("] ", 1)[1] if "] " in header else ""


def test_a_full_log_shows_each_call_s_arguments_up_to_its_limit():
    headers, log, reserved = _headers(20_000, compact=False)
    assert all(0 < len(_shown(header)) <= HEADER_ARGS for header in headers)
    # Folded rows name each call by every file its arguments touch.
    assert "src/pkg/module_03.py build/module_03.py" in "\n".join(log)
    assert reserved == METER.count("\n".join(log) + "\n")


def test_a_compact_log_names_a_call_by_its_first_file_within_its_share():
    headers, log, reserved = _headers(2_000, compact=True)
    assert all(len(_shown(header)) <= COMPACT_HEADER_ARGS for header in headers)
    text = "\n".join(log)
    assert "src/pkg/module_03.py" in text and "build/module_03.py" not in text
    assert reserved <= 2_000
    full = _headers(2_000, compact=False)[2]
    assert reserved < full
