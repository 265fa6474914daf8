"""Hypothesis strategies: Chat Completions histories with tool groups, chats and agent loops."""

from __future__ import annotations

import json

from hypothesis import strategies as st

WORDS = st.sampled_from(
    [
        "alpha",
        "x = 3",
        "y copies x",
        "deploy",
        "failed",
        "retry",
        "ok",
        "build 42",
        "def handler(request):",
        "src/app/views.py",
        "\u4e2d\u6587",
    ]
)
TEXT = st.lists(st.lists(WORDS, min_size=1, max_size=10).map(" ".join), min_size=1, max_size=6).map(
    "\n".join
)


@st.composite
def tool_group(draw, number: int) -> list[dict]:
    """An assistant message with 1-3 tool calls and all their results (in any order)."""
    ids = [f"call_{number}_{k}" for k in range(draw(st.integers(1, 3)))]
    calls = [
        {
            "id": call_id,
            "type": "function",
            "function": {"name": "bash", "arguments": json.dumps({"command": f"cat f{number}.py"})},
        }
        for call_id in ids
    ]
    results = [{"role": "tool", "tool_call_id": i, "content": draw(TEXT)} for i in ids]
    order = draw(st.permutations(results))  # providers accept results in any order
    return [{"role": "assistant", "content": draw(st.none() | TEXT), "tool_calls": calls}, *order]


@st.composite
def histories(draw, pending: bool = False) -> list[dict]:
    """Mixed chats: instructions, user and assistant turns and tool groups, ending with a task."""
    history: list[dict] = []
    if draw(st.booleans()):
        history.append({"role": "system", "content": draw(TEXT)})
    for number in range(draw(st.integers(0, 24))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "tools", "developer"]))
        if kind == "tools":
            history.extend(draw(tool_group(number)))
        else:
            history.append({"role": kind, "content": draw(TEXT)})
    history.append({"role": "user", "content": draw(TEXT)})
    if pending:
        group = draw(tool_group(99))
        history.extend(group[: draw(st.integers(1, len(group) - 1))])
    return history


@st.composite
def agent_loops(draw) -> list[dict]:
    """One task followed by many finished tool groups (an agent's loop), as a request holds it:
    older turns may come first, and the list ends with the latest group's results."""
    history: list[dict] = [{"role": "system", "content": draw(TEXT)}]
    for number in range(draw(st.integers(0, 3))):  # earlier tasks, with or without tools
        history.append({"role": "user", "content": draw(TEXT)})
        if draw(st.booleans()):
            history.extend(draw(tool_group(1000 + number)))
        history.append({"role": "assistant", "content": draw(TEXT)})
    history.append({"role": "user", "content": "TASK: " + draw(TEXT)})
    for number in range(draw(st.integers(1, 40))):
        if draw(st.integers(0, 5)) == 0:
            history.append({"role": "assistant", "content": draw(TEXT)})
        history.extend(draw(tool_group(number)))
    return history
