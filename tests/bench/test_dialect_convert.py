"""Chat requests in Messages and Responses shape and back, and the replay in every format."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import pytest

from benchmarks import agent_replay as ar
from benchmarks import dialect_convert as dc
from benchmarks import trajectories as tj
from tomc import LexicalCounter
from tomc.chat.dialects import DIALECTS

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    },
]
BACK = {"messages": dc.messages_to_chat, "responses": dc.responses_to_chat}
ITEMS = {"messages": "messages", "responses": "input"}


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def conversation() -> list[dict[str, Any]]:
    """Every shape the converters handle, already in the form a round trip gives back."""
    return [
        {"role": "system", "content": "You are a coding agent.\nUse the tools."},
        {"role": "user", "content": "Fix the parser: tokens may be None."},
        {
            "role": "assistant",
            "content": "Two things to look at first.",
            "tool_calls": [
                call("call_a", "bash", command="grep -n 'tokens' pkg/parser.py"),
                call("call_b", "read", path="pkg/parser.py"),
            ],
        },
        {"role": "tool", "tool_call_id": "call_a", "content": "12:    if tokens is None:"},
        {"role": "tool", "tool_call_id": "call_b", "content": "def parse(text):\n    ..."},
        {"role": "assistant", "content": "The check is on line 12."},
        {"role": "user", "content": "Go ahead, and keep the café test — ünïcode stays."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [call("call_c", "bash", command="sed -i 's/é/e/' tests/test_ü.py")],
        },
        {"role": "tool", "tool_call_id": "call_c", "content": ""},
        {
            "role": "assistant",
            "content": "Now the fix.",
            "reasoning_content": "The None check must come before len().",
            "tool_calls": [call("call_d", "bash", command="python -m pytest -q")],
        },
        {"role": "tool", "tool_call_id": "call_d", "content": "3 passed"},
        {"role": "assistant", "content": "Done: the parser accepts None."},
    ]


def request(messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
    return {"model": "m", "messages": messages, "tools": TOOLS, "max_tokens": 512, **options}


def requests(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Every request of a conversation: the messages before each assistant message."""
    return [messages[:k] for k, m in enumerate(messages) if k and m["role"] == "assistant"]


# ---------------------------------------------------------------- round trips


@pytest.mark.parametrize("dialect", ["messages", "responses"])
def test_round_trip_gives_back_the_same_messages(dialect: str) -> None:
    messages = conversation()
    convert = dc.chat_to_messages if dialect == "messages" else dc.chat_to_responses
    for prefix in [*requests(messages), messages]:
        converted = convert(request(prefix))
        assert converted.notes == ()
        assert BACK[dialect](converted.body) == prefix
    # The source is not changed by converting it.
    assert messages == conversation()


@pytest.mark.parametrize("dialect", ["messages", "responses"])
def test_converted_requests_pass_the_format_validator(dialect: str) -> None:
    validate = DIALECTS[dialect].validate
    convert = dc.chat_to_messages if dialect == "messages" else dc.chat_to_responses
    for prefix in requests(conversation()):
        items = convert(request(prefix)).body[ITEMS[dialect]]
        assert validate(items) == [], prefix[-1]
    # The validator does fail on a broken conversion: drop the result of call_b.
    items = convert(request(conversation()[:6])).body[ITEMS[dialect]]
    if dialect == "messages":
        items[2]["content"] = items[2]["content"][:1]
    else:
        items = [
            i for i in items if i.get("call_id") != "call_b" or i["type"] != "function_call_output"
        ]
    assert validate(items)


def test_messages_shape() -> None:
    body = dc.chat_to_messages(request(conversation())).body
    assert body["system"] == "You are a coding agent.\nUse the tools."
    assert body["max_tokens"] == 512 and body["model"] == "m"
    assert body["tools"][0] == {
        "name": "bash",
        "description": "Run a shell command.",
        "input_schema": TOOLS[0]["function"]["parameters"],
    }
    first, calls, results = body["messages"][:3]
    assert first == {
        "role": "user",
        "content": [{"type": "text", "text": "Fix the parser: tokens may be None."}],
    }
    assert calls["content"][0] == {"type": "text", "text": "Two things to look at first."}
    assert calls["content"][2] == {
        "type": "tool_use",
        "id": "call_b",
        "name": "read",
        "input": {"path": "pkg/parser.py"},
    }
    # Two tool messages make one user message of tool_result blocks, in call order.
    assert results["role"] == "user"
    assert [b["tool_use_id"] for b in results["content"]] == ["call_a", "call_b"]
    assert results["content"][0]["content"] == "12:    if tokens is None:"
    # No empty text block for an assistant message without text; thinking comes first.
    assert [b["type"] for b in body["messages"][5]["content"]] == ["tool_use"]
    thinking = body["messages"][7]["content"]
    assert [b["type"] for b in thinking] == ["thinking", "text", "tool_use"]
    assert thinking[0]["thinking"] == "The None check must come before len()."
    assert thinking[0]["signature"]


def test_responses_shape() -> None:
    body = dc.chat_to_responses(request(conversation())).body
    assert body["instructions"] == "You are a coding agent.\nUse the tools."
    assert body["max_output_tokens"] == 512 and "max_tokens" not in body
    assert body["tools"][1] == {
        "type": "function",
        "name": "read",
        "description": "Read a file.",
        "parameters": TOOLS[1]["function"]["parameters"],
    }
    kinds = [(i["type"], i.get("role")) for i in body["input"]]
    assert kinds[:6] == [
        ("message", "user"),
        ("message", "assistant"),
        ("function_call", None),
        ("function_call", None),
        ("function_call_output", None),
        ("function_call_output", None),
    ]
    assert body["input"][1]["content"] == [
        {"type": "output_text", "text": "Two things to look at first."}
    ]
    assert body["input"][0]["content"] == [
        {"type": "input_text", "text": "Fix the parser: tokens may be None."}
    ]
    assert body["input"][3] == {
        "type": "function_call",
        "call_id": "call_b",
        "name": "read",
        "arguments": '{"path": "pkg/parser.py"}',
    }
    # An assistant message without text is only its function call; reasoning goes first.
    assert [i.get("role") for i in body["input"][6:8]] == ["assistant", "user"]
    assert body["input"][8]["type"] == "function_call"
    assert [i["type"] for i in body["input"][10:13]] == ["reasoning", "message", "function_call"]


# ---------------------------------------------------------------- normalisations


def test_several_system_messages_come_back_as_one() -> None:
    messages = [
        {"role": "system", "content": "Rule one."},
        {"role": "developer", "content": [{"type": "text", "text": "Rule two."}]},
        {"role": "user", "content": "Hi"},
    ]
    for convert, back in (
        (dc.chat_to_messages, dc.messages_to_chat),
        (dc.chat_to_responses, dc.responses_to_chat),
    ):
        converted = convert(request(messages))
        assert converted.notes == ("2 leading system messages joined into one",)
        assert back(converted.body) == [
            {"role": "system", "content": "Rule one.\n\nRule two."},
            {"role": "user", "content": "Hi"},
        ]


def test_results_come_back_in_call_order_and_the_reorder_is_noted() -> None:
    messages = conversation()[:5]
    messages[3], messages[4] = messages[4], messages[3]
    converted = dc.chat_to_messages(request(messages))
    assert converted.notes == ("message 3: tool results reordered to the order of their calls",)
    assert dc.messages_to_chat(converted.body) == conversation()[:5]
    # Responses pairs by call_id: nothing to reorder.
    converted = dc.chat_to_responses(request(messages))
    assert converted.notes == () and dc.responses_to_chat(converted.body) == messages


def test_arguments_that_are_not_a_json_object_are_sent_raw_and_noted() -> None:
    messages = conversation()[:4]
    messages[2] = copy.deepcopy(messages[2])
    messages[2]["tool_calls"] = [messages[2]["tool_calls"][0]]
    messages[2]["tool_calls"][0]["function"]["arguments"] = "ls -la"  # not JSON
    converted = dc.chat_to_messages(request(messages))
    assert converted.body["messages"][1]["content"][1]["input"] == {"raw": "ls -la"}
    assert converted.notes == (
        "message 2 call call_a: arguments are not a JSON object; sent as {'raw': text}",
    )
    back = dc.messages_to_chat(converted.body)
    assert back[2]["tool_calls"][0]["function"]["arguments"] == '{"raw": "ls -la"}'
    # Responses keeps the raw string.
    assert dc.responses_to_chat(dc.chat_to_responses(request(messages)).body) == messages


def test_missing_text_and_text_parts_normalise() -> None:
    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "bash", command="ls")]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]
    expected = copy.deepcopy(messages)
    expected[1]["content"] = "a\nb"
    expected[2]["content"] = ""
    assert dc.messages_to_chat(dc.chat_to_messages(request(messages)).body) == expected
    assert dc.responses_to_chat(dc.chat_to_responses(request(messages)).body) == expected


def test_responses_merges_a_call_only_message_into_the_assistant_text_before_it() -> None:
    messages = [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "Thinking aloud."},
        {"role": "assistant", "content": "", "tool_calls": [call("c1", "bash", command="ls")]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]
    back = dc.responses_to_chat(dc.chat_to_responses(request(messages)).body)
    assert back == [
        messages[0],
        {
            "role": "assistant",
            "content": "Thinking aloud.",
            "tool_calls": messages[2]["tool_calls"],
        },
        messages[3],
    ]
    # Messages keeps the boundary.
    assert dc.messages_to_chat(dc.chat_to_messages(request(messages)).body) == messages


def test_reasoning_can_be_dropped_and_is_noted() -> None:
    messages = conversation()
    for convert in (dc.chat_to_messages, dc.chat_to_responses):
        converted = convert(request(messages), reasoning="drop")
        assert converted.notes == ("message 9: reasoning_content dropped",)
        assert "The None check" not in json.dumps(converted.body)


@pytest.mark.parametrize(
    ("messages", "dialect", "problem"),
    [
        (
            [{"role": "user", "content": "a"}, {"role": "system", "content": "late"}],
            "messages",
            "message 1: a system message after the conversation started",
        ),
        (
            [
                {"role": "user", "content": "a"},
                {"role": "tool", "tool_call_id": "x", "content": ""},
            ],
            "messages",
            "message 1: tool results without an assistant tool call before them",
        ),
        (
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "u"}}]}],
            "responses",
            "message 0: a image_url content part has no converter here",
        ),
        (
            [{"role": "critic", "content": "a"}],
            "responses",
            "message 0: unsupported role 'critic'",
        ),
    ],
)
def test_requests_without_a_faithful_form_are_refused_by_name(
    messages: list[dict[str, Any]], dialect: str, problem: str
) -> None:
    with pytest.raises(dc.ConversionError, match=problem):
        dc.RequestConverter(dialect).body(request(messages))


# ---------------------------------------------------------------- the cached converter


@pytest.mark.parametrize("dialect", ["messages", "responses"])
def test_converter_reuses_items_and_gives_back_the_source_messages(dialect: str) -> None:
    messages = conversation()
    converter = dc.RequestConverter(dialect)
    earlier = converter.body(request(messages[:7]))[ITEMS[dialect]]
    later = converter.body(request(messages[:9]))[ITEMS[dialect]]
    assert all(a is b for a, b in zip(earlier, later, strict=False))
    body = converter.body(request(messages))
    sent_back = converter.back(body)
    assert len(sent_back) == len(messages)
    assert all(a is b for a, b in zip(sent_back, messages, strict=True))
    # A memory item in place of old items is read like any other item; the rest stay sources.
    items = body[ITEMS[dialect]]
    memory = DIALECTS[dialect].memory_item("[memory] line 12: if tokens is None:", "user")
    cut = 3 if dialect == "messages" else 6  # after the task and the first tool group
    rewritten = {**body, ITEMS[dialect]: [items[0], memory, *items[cut:]]}
    sent_back = converter.back(rewritten)
    assert sent_back == BACK[dialect](rewritten)
    assert sent_back[2] == {"role": "user", "content": "[memory] line 12: if tokens is None:"}
    assert sent_back[1] is messages[1] and sent_back[3] is messages[5]


@pytest.mark.parametrize("dialect", ["messages", "responses"])
def test_a_lossy_conversion_comes_back_as_what_was_sent(dialect: str) -> None:
    messages = conversation()
    converter = dc.RequestConverter(dialect, reasoning="drop")
    sent_back = converter.back(converter.body(request(messages)))
    assert sent_back[9] is not messages[9]
    assert sent_back[9] == {k: v for k, v in messages[9].items() if k != "reasoning_content"}
    assert all(a is b for a, b in zip(sent_back[:9], messages[:9], strict=True))


def test_converter_options() -> None:
    converter = dc.RequestConverter("messages")
    body = converter.body(request(conversation()[:2], temperature=0.2, tool_choice="auto"))
    assert body["temperature"] == 0.2 and "tool_choice" not in body
    assert converter.notes == ("request option 'tool_choice' has no converter and is dropped",)
    with pytest.raises(dc.ConversionError, match="dialect must be one of"):
        dc.RequestConverter("gemini")


# ---------------------------------------------------------------- the replay in every format


def agent_run(steps: int, words: int = 60) -> tj.Trajectory:
    """System, task, then ``steps`` tool groups; assistant text on two of every three."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the bug in parser.py please."},
    ]
    for step in range(steps):
        text = f"step {step}: look at file{step}.py" if step % 3 else ""
        messages.append(
            {
                "role": "assistant",
                "content": text,
                "tool_calls": [call(f"call_{step}", "bash", command=f"cat file{step}.py")],
            }
        )
        body = "\n".join(f"line {i} of file{step}.py: value_{step}_{i} = {i}" for i in range(words))
        messages.append({"role": "tool", "tool_call_id": f"call_{step}", "content": body})
    messages.append({"role": "assistant", "content": "done"})
    return tj.Trajectory("synthetic", TOOLS[:1], messages, submission="")


def test_replay_gives_the_same_decisions_in_every_format() -> None:
    prepared = ar.Prepared(agent_run(50), LexicalCounter().count)
    window, reserve = 6_000, 500
    decisions = {}
    for dialect in dc.DIALECTS:
        runner = ar.Tomc(prepared, window, reserve, dialect)
        tally = ar.Tally(window, "tomc")
        trace: list[ar.Step] = []
        ar.replay(prepared, "tomc", window, reserve, tally, runner=runner, trace=trace)
        assert runner.invalid == [] and tally.invalid == 0
        assert tally.requests == len(prepared.requests)
        decisions[dialect] = [step.reason for step in trace]
    assert {"fits", "compiled", "reused"} <= set(decisions["chat"])
    assert decisions["messages"] == decisions["chat"]
    assert decisions["responses"] == decisions["chat"]


def test_run_reports_every_format_beside_chat(tmp_path: Path) -> None:
    path = tmp_path / "runs.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        for run in (agent_run(40), agent_run(12)):
            record = {"id": run.id, "tools": run.tools, "messages": run.messages, "meta": {}}
            record["meta"]["submission"] = ""
            handle.write(json.dumps(record) + "\n")
    report = ar.run(path, windows=(5_000,), reserve=500, progress=False)
    rows = {row["dialect"]: row for row in report.dialect_rows()}
    assert list(rows) == list(dc.DIALECTS)
    chat = next(row for row in report.rows() if row["method"] == "tomc")
    assert rows["chat"]["openai_billed"] == chat["openai_billed"]
    assert "matches_chat" not in rows["chat"]
    for dialect in ("messages", "responses"):
        comparison = rows[dialect]["matches_chat"]
        assert comparison["requests"] == chat["requests"]
        assert comparison["other_decision"] == 0
        assert rows[dialect]["reasons"] == chat["reasons"]
    assert report.conversion_notes == {"messages": [], "responses": []}
    text = report.to_markdown()
    assert "#### `tomc` in each wire format, window 5,000" in text
    assert text.count("| messages |") == 1 and text.count("| responses |") == 1
    only_chat = ar.run(path, windows=(5_000,), reserve=500, progress=False, dialects=("chat",))
    assert [row["dialect"] for row in only_chat.dialect_rows()] == ["chat"]


def test_unknown_dialect_is_a_clear_error(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        ar.main(["--dialects", "chat,gemini"])
    assert "dialects must be some of chat,messages,responses" in capsys.readouterr().err
