"""The scripted agent upstream's preserved-thinking prefix check agrees with Anthropic's docs.

:mod:`agent_upstream` signs each thinking block it returns and checks the blocks sent back with
the rules in :mod:`tomc.testing.provider_rules`. One test per documented rule, each naming its
source and trying both sides (kept valid, refused), over loopback HTTP; then the first two
requests of each Claude Code version, recorded (trimmed) under
``tests/fixtures/preserved_thinking``, must pass as the documented API would pass them.

Sources (``provider_rules``' constants):

- PRESERVED_THINKING: https://platform.claude.com/docs/en/build-with-claude/preserved-thinking
- PREFIX_CHECKS: https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks
- MESSAGES_API: https://platform.claude.com/docs/en/api/messages/create
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_upstream import AgentUpstream, Script
from fake_providers import BINDING_BETA
from tomc.testing.provider_rules import failing_thinking, sign_thinking

FIXTURES = Path(__file__).parent / "fixtures" / "preserved_thinking"
SESSION = "7d1c6f1e-0000-4000-8000-00000000abcd"
TOOLS = [
    {
        "name": "Bash",
        "description": "Run a shell command.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    }
]
SYSTEM = [{"type": "text", "text": "You are a careful agent."}]
DROP = {"type": "adaptive", "block_binding": {"prefix_mismatch_behavior": "drop_block"}}
BOUND = (
    "Invalid `signature` in `thinking` block. The block is bound to a different conversation. "
    'Remove the block, or set `thinking.block_binding.prefix_mismatch_behavior` to "drop_block".'
)
NEEDS_BETA = f"That setting requires the `{BINDING_BETA}` value in the `anthropic-beta` header."


@pytest.fixture
def upstream() -> Iterator[AgentUpstream]:
    with AgentUpstream(Script(steps=20, output_chars=200)) as up:
        yield up


def _body(messages: list[Any], **options: Any) -> dict[str, Any]:
    return {
        "model": "claude-opus-5-5",
        "max_tokens": 4096,
        "system": copy.deepcopy(SYSTEM),
        "tools": copy.deepcopy(TOOLS),
        "thinking": {"type": "adaptive"},
        "messages": messages,
        **options,
    }


def _post(
    up: AgentUpstream,
    body: Mapping[str, Any],
    *,
    beta: bool = False,
    path: str = "/v1/messages",
    headers: Mapping[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    headers = dict(headers or {"x-claude-code-session-id": SESSION})
    headers["anthropic-version"] = "2023-06-01"
    if beta:
        headers["anthropic-beta"] = BINDING_BETA
    body = {**body, "stream": False}
    answer = httpx.post(up.root_url + path, json=body, headers=headers, timeout=30)
    return answer.status_code, answer.json()


def _turns(up: AgentUpstream, count: int, **options: Any) -> list[dict[str, Any]]:
    """A conversation of ``count`` tool steps, each assistant turn sent back as returned
    (thinking, text, tool_use), each answered with a tool_result."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read the log files."}]
    for _ in range(count):
        status, answer = _post(up, _body(messages, **options))
        assert status == 200, answer
        messages.append({"role": "assistant", "content": answer["content"]})
        call = answer["content"][-1]
        result = {"type": "tool_result", "tool_use_id": call["id"], "content": "ok"}
        messages.append({"role": "user", "content": [result]})
    return messages


def _thinking_paths(messages: list[Any]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, message in enumerate(messages)
        if isinstance(message["content"], list)
        for j, block in enumerate(message["content"])
        if block.get("type") == "thinking"
    ]


def _without(messages: list[Any], where: list[tuple[int, int]]) -> list[Any]:
    out = copy.deepcopy(messages)
    for i, j in sorted(where, reverse=True):
        del out[i]["content"][j]
    return out


def _refused_at(up: AgentUpstream, body: Mapping[str, Any], where: tuple[int, int]) -> str:
    status, answer = _post(up, body)
    assert status == 400, answer
    assert answer["error"]["type"] == "invalid_request_error"
    message = answer["error"]["message"]
    assert message.startswith(f"messages.{where[0]}.content.{where[1]}: {BOUND}"), message
    return message


def _accepted(up: AgentUpstream, body: Mapping[str, Any], **kwargs: Any) -> dict[str, Any]:
    status, answer = _post(up, body, **kwargs)
    assert status == 200, answer
    assert up.requests[-1].dropped_thinking == []
    return answer


# ---------------------------------------------------------------------- one test per rule


def test_appending_messages_keeps_earlier_thinking_valid(upstream):
    """PRESERVED_THINKING #what-counts-as-an-edit: "Append messages at the end: Valid"; and
    #prefix-check: the prefix is system, tools and every message before the block, so a change
    before the block fails it."""
    messages = _turns(upstream, 3)
    assert len(_thinking_paths(messages)) == 3
    _accepted(upstream, _body(messages))
    edited = copy.deepcopy(messages)
    edited[0]["content"] = "Read the log files, please."
    _refused_at(upstream, _body(edited), (1, 0))


def test_cache_control_markers_are_not_part_of_the_prefix(upstream):
    """PRESERVED_THINKING #prefix-check ("neither are cache_control markers") and
    #what-counts-as-an-edit ("Add, move, or remove cache_control markers: Valid")."""
    messages = _turns(upstream, 2)
    marked = copy.deepcopy(messages)
    marked[0]["content"] = [
        {"type": "text", "text": "Read the log files.", "cache_control": {"type": "ephemeral"}}
    ]
    marked[2]["content"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    system = [{**SYSTEM[0], "cache_control": {"type": "ephemeral"}}]
    tools = [{**TOOLS[0], "cache_control": {"type": "ephemeral"}}]
    _accepted(upstream, _body(marked, system=system, tools=tools))
    marked[2]["content"][0]["content"] = "ok, edited"  # the refused side: the text itself
    _refused_at(upstream, _body(marked, system=system, tools=tools), (3, 0))


def test_parameters_outside_system_tools_and_messages_are_not_part_of_the_prefix(upstream):
    """PRESERVED_THINKING #what-counts-as-an-edit: "Change any request parameter outside system,
    tools, and messages (effort, max_tokens, output_config, tool_choice, metadata,
    thinking.display, and so on): Valid"."""
    messages = _turns(upstream, 2)
    _accepted(
        upstream,
        _body(
            messages,
            max_tokens=128,
            output_config={"effort": "low"},
            tool_choice={"type": "auto"},
            metadata={"user_id": "someone-else"},
            thinking={"type": "adaptive", "display": "omitted"},
        ),
    )
    _refused_at(upstream, _body(messages, system="You are a different agent."), (1, 0))


def test_string_content_is_the_same_message_as_its_one_text_block(upstream):
    """MESSAGES_API: "Using a string for content is shorthand for an array of one content block
    of type text. The following input messages are equivalent" -- for every role, the
    mid-conversation role:"system" message too (what Claude Code 2.1.332 switches between)."""
    environment = "# Environment\nPrimary working directory: /work"
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": [{"type": "text", "text": "Read the log files."}]},
        {"role": "system", "content": [{"type": "text", "text": environment}]},
    ]
    status, answer = _post(upstream, _body(messages))
    assert status == 200
    call = answer["content"][-1]
    messages += [
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"]}]},
    ]
    as_strings = copy.deepcopy(messages)
    as_strings[0]["content"] = "Read the log files."
    as_strings[1]["content"] = environment
    _accepted(upstream, _body(as_strings))
    as_strings[1]["content"] = environment + " (moved)"
    _refused_at(upstream, _body(as_strings), (2, 0))
    two_blocks = copy.deepcopy(messages)  # not the shorthand: a different message
    two_blocks[1]["content"] = [
        {"type": "text", "text": "# Environment\n"},
        {"type": "text", "text": "Primary working directory: /work"},
    ]
    _refused_at(upstream, _body(two_blocks), (2, 0))


def test_editing_an_earlier_turn_fails_the_thinking_after_it_only(upstream):
    """PRESERVED_THINKING #what-counts-as-an-edit: "Clear or shorten an earlier tool_result ...
    or change an earlier tool_use input: Invalid for every later thinking block"; PREFIX_CHECKS:
    a change invalidates only the thinking already after it, thinking before it stays valid."""
    messages = _turns(upstream, 3)  # thinking at (1, 0), (3, 0), (5, 0)
    shortened = copy.deepcopy(messages)
    shortened[4]["content"][0]["content"] = ""
    _refused_at(upstream, _body(shortened), (5, 0))
    changed = copy.deepcopy(messages)
    changed[3]["content"][-1]["input"] = {"command": "cat data/step_99.log"}
    _refused_at(upstream, _body(changed), (5, 0))
    # Under drop_block only the block after the edit goes.
    status, answer = _post(upstream, _body(shortened, thinking=DROP), beta=True)
    assert status == 200
    dropped = {"type": "thinking_dropped", "path": "messages.5.content.0"}
    assert answer["input_transformations"] == [{**dropped, "reason": "prefix_binding_mismatch"}]


def test_system_and_tools_changes_fail_every_thinking_block(upstream):
    """PRESERVED_THINKING #what-counts-as-an-edit: "Change the top-level system string or
    blocks: Invalid"; "Add, remove, rename, or edit a tool in tools: Invalid"."""
    messages = _turns(upstream, 2)
    _refused_at(upstream, _body(messages, system=[{"type": "text", "text": "Be brief."}]), (1, 0))
    renamed = [{**TOOLS[0], "name": "Shell"}]
    _refused_at(upstream, _body(messages, tools=renamed), (1, 0))
    described = [{**TOOLS[0], "description": "Run one shell command."}]
    _refused_at(upstream, _body(messages, tools=described), (1, 0))


def test_a_deferred_tool_nothing_references_is_not_part_of_the_prefix(upstream):
    """PRESERVED_THINKING #what-counts-as-an-edit: "Add a tool with defer_loading: true that
    nothing has referenced yet: Valid"; #tool-changes: "the prefix check ignores a deferred tool
    until a tool_addition block references it. Adding a tool without defer_loading: true changes
    the prefix and invalidates earlier thinking"."""
    messages = _turns(upstream, 2)
    deploy = {
        "name": "deploy",
        "description": "Deploy the service.",
        "input_schema": {"type": "object", "properties": {}},
    }
    deferred = {**deploy, "defer_loading": True}
    _accepted(upstream, _body(messages, tools=[*TOOLS, deferred]))
    _refused_at(upstream, _body(messages, tools=[*TOOLS, deploy]), (1, 0))
    # Once a tool_addition before a block references it, the deferred tool is in its prefix.
    offer = {"type": "tool_addition", "tool": {"type": "tool_reference", "name": "deploy"}}
    offered = [
        {"role": "user", "content": "Deploy when the logs are clean."},
        {"role": "system", "content": [offer]},
    ]
    status, answer = _post(upstream, _body(offered, tools=[*TOOLS, deferred]))
    assert status == 200
    offered.append({"role": "assistant", "content": answer["content"]})
    call = answer["content"][-1]
    offered.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"]}]}
    )
    _accepted(upstream, _body(offered, tools=[*TOOLS, deferred]))
    redescribed = {**deferred, "description": "Deploy the service to production."}
    _refused_at(upstream, _body(offered, tools=[*TOOLS, redescribed]), (2, 0))


def test_thinking_removed_from_the_start_the_end_or_all_of_it_stays_valid(upstream):
    """PRESERVED_THINKING #prefix-check: "Earlier thinking blocks aren't in the prefix ... You can
    remove thinking blocks from the start of the history (oldest first), from the end, or all of
    them"; the model loses that reasoning, nothing fails."""
    messages = _turns(upstream, 3)
    paths = _thinking_paths(messages)
    _accepted(upstream, _body(_without(messages, paths[:1])))
    _accepted(upstream, _body(_without(messages, paths[:2])))
    _accepted(upstream, _body(_without(messages, paths[-1:])))
    _accepted(upstream, _body(_without(messages, paths)))


def test_thinking_removed_from_the_middle_fails_the_blocks_after_it(upstream):
    """PRESERVED_THINKING #prefix-check: "What fails is a gap: the thinking blocks you keep must be
    an unbroken run of the original sequence, so removing one from the middle invalidates the
    thinking blocks after it"; PREFIX_CHECKS: a prefix check "also fails if a thinking block
    between others was left out or moved"."""
    messages = _turns(upstream, 3)
    paths = _thinking_paths(messages)
    _refused_at(upstream, _body(_without(messages, paths[1:2])), (5, 0))
    moved = copy.deepcopy(messages)  # the first two blocks swapped
    moved[1]["content"][0], moved[3]["content"][0] = moved[3]["content"][0], moved[1]["content"][0]
    status, _ = _post(upstream, _body(moved))
    assert status == 400


def test_a_thinking_block_put_back_fails_the_blocks_produced_while_it_was_gone(upstream):
    """PRESERVED_THINKING #prefix-check: "Once you remove a block, leave it out. Putting it back
    invalidates the thinking blocks produced while it was gone"."""
    messages = _turns(upstream, 1)
    first = _thinking_paths(messages)[0]
    without = _without(messages, [first])
    status, answer = _post(upstream, _body(without))  # produced while the first was gone
    assert status == 200
    call = answer["content"][-1]
    tail = [
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"]}]},
    ]
    _accepted(upstream, _body(without + tail))  # still left out: valid
    _refused_at(upstream, _body(messages + tail), (3, 0))  # put back


def test_the_error_names_the_block_and_the_missing_beta_header(upstream):
    """PRESERVED_THINKING #mismatch-behavior: a 400 invalid_request_error that "begins:
    messages.1.content.0: Invalid `signature` ..." and, "If the request didn't send the beta
    header, the message continues: That setting requires ..." (FIX_BOUND shows the same)."""
    messages = _turns(upstream, 1)
    messages[0]["content"] = "Something else."
    message = _refused_at(upstream, _body(messages), (1, 0))
    assert message.endswith(NEEDS_BETA)
    status, answer = _post(upstream, _body(messages), beta=True)
    assert status == 400
    assert answer["error"]["message"] == f"messages.1.content.0: {BOUND}"
    assert upstream.client_errors()[-1].error == answer["error"]["message"]


def test_drop_block_drops_the_failing_blocks_and_later_thinking_stays_valid(upstream):
    """PRESERVED_THINKING #mismatch-behavior: with "drop_block" (and the beta header) "the API
    drops each failing block ... and the request succeeds", listed in input_transformations with
    reason prefix_binding_mismatch; PREFIX_CHECKS and the keep-tail compaction example: "Thinking
    the model produces from this request onward follows the summary and stays valid"."""
    messages = _turns(upstream, 2)
    messages[0]["content"] = "A summary of the earlier session."
    status, answer = _post(upstream, _body(messages, thinking=DROP), beta=True)
    assert status == 200
    stale = ["messages.1.content.0", "messages.3.content.0"]
    assert [t["path"] for t in answer["input_transformations"]] == stale
    assert {t["reason"] for t in answer["input_transformations"]} == {"prefix_binding_mismatch"}
    call = answer["content"][-1]
    messages += [
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call["id"]}]},
    ]
    status, answer = _post(upstream, _body(messages, thinking=DROP), beta=True)
    assert status == 200
    assert [t["path"] for t in answer["input_transformations"]] == stale  # not messages.5


def test_a_failing_block_takes_the_rest_of_its_turn_with_it():
    """PRESERVED_THINKING ("Check whether your code edits the prefix"): under enforcement "a
    failing block also takes the rest of that turn's thinking blocks with it"."""
    question = {"role": "user", "content": "Plan, then act."}
    body = _body([question])
    first = {"type": "thinking", "thinking": "plan"}
    first["signature"] = sign_thinking(_body([{"role": "user", "content": "other"}]), 1, [], "1.0")
    text = {"type": "text", "text": "Now."}
    second = {"type": "thinking", "thinking": "act"}
    second["signature"] = sign_thinking(body, 1, [first, text], "1.2")  # valid on its own
    turn = {"role": "assistant", "content": [first, text, second]}
    assert failing_thinking(_body([question, turn])) == [(1, 0), (1, 2)]
    alone = {"role": "assistant", "content": [text, second]}
    assert failing_thinking(_body([question, alone])) == []


def test_a_tampered_signature_is_a_400_whatever_the_mismatch_behavior(upstream):
    """PRESERVED_THINKING #mismatch-behavior: "A tampered or undecryptable signature is a different
    failure. It always returns a 400 (Invalid `signature` in `thinking` block with no sentence
    about the conversation), and prefix_mismatch_behavior doesn't apply to it"."""
    messages = _turns(upstream, 1)
    messages[1]["content"][0]["signature"] += "tampered"
    for kwargs in ({}, {"thinking": DROP}):
        status, answer = _post(upstream, _body(messages, **kwargs), beta=True)
        assert status == 400
        expected = "messages.1.content.0: Invalid `signature` in `thinking` block."
        assert answer["error"]["message"] == expected


def test_the_token_counting_endpoint_runs_the_same_check(upstream):
    """PRESERVED_THINKING #preserved-thinking-controls: "The token counting endpoint runs the same
    prefix check and returns the same 400"."""
    messages = _turns(upstream, 1)
    body = _body(messages)
    status, counted = _post(upstream, body, path="/v1/messages/count_tokens")
    assert status == 200 and counted["input_tokens"] > 0
    messages[0]["content"] = "Something else."
    status, refused = _post(upstream, _body(messages), path="/v1/messages/count_tokens")
    assert status == 400
    assert refused["error"]["message"] == f"messages.1.content.0: {BOUND} {NEEDS_BETA}"


def test_block_binding_needs_its_beta_header(upstream):
    """PRESERVED_THINKING #preserved-thinking-controls: "Sending it without the beta header returns
    a 400 error whose message ends block_binding: Extra inputs are not permitted"; with the header
    a first turn comes back with an empty input_transformations."""
    status, answer = _post(upstream, _body([{"role": "user", "content": "Hi."}], thinking=DROP))
    assert status == 400 and "Extra inputs are not permitted" in answer["error"]["message"]
    answer = _accepted(
        upstream, _body([{"role": "user", "content": "Hi."}], thinking=DROP), beta=True
    )
    assert answer["input_transformations"] == []


def test_only_the_models_the_docs_list_run_the_prefix_check():
    """PREFIX_CHECKS (supportedModels: Fable 5.1/5.2, Mythos 5.1/5.2, Opus/Sonnet/Haiku 5.5) and
    PRESERVED_THINKING ("models before Claude Fable 5.1 don't run the prefix check"): by default
    the fake checks those models only; ``prefix_check="always"`` checks every model."""
    for model, checked in (("claude-opus-5-5", True), ("claude-opus-4-8", False)):
        with AgentUpstream(Script(steps=5)) as up:
            messages = _turns(up, 1, model=model)
            messages[0]["content"] = "Something else."
            status, _ = _post(up, _body(messages, model=model))
            assert status == (400 if checked else 200), model
    with AgentUpstream(Script(steps=5, prefix_check="always")) as up:
        messages = _turns(up, 1, model="claude-opus-4-8")
        messages[0]["content"] = "Something else."
        _refused_at(up, _body(messages, model="claude-opus-4-8"), (1, 0))


# ---------------------------------------------------------------------- recorded traffic


@pytest.mark.parametrize("version", ["2.1.332", "2.1.197"])
def test_claude_codes_second_request_passes_as_the_documented_api_would_pass_it(version):
    """The first two main-loop requests of each Claude Code version, recorded straight against
    this upstream (trimmed alike): the second sends back the first answer's thinking block, and
    nothing before it changed but what the docs leave out of the check (2.1.332: messages[1], a
    role:"system" message, goes from one text block with a cache_control marker to the same
    text as a string; 2.1.197: cache_control markers move). The fake must accept it."""
    recorded = json.loads((FIXTURES / f"claude_code_{version}.json").read_text())
    assert recorded["agent_version"] == f"claude-code {version}"
    (first, headers), (second, _) = ((r["body"], r["headers"]) for r in recorded["requests"])
    # "always": checked whatever the model (2.1.197's claude-opus-4-8 does not run the check).
    with AgentUpstream(Script(steps=3, prefix_check="always")) as up:
        status, answer = _post(up, first, headers=headers)
        assert status == 200, answer
        produced = answer["content"][0]
        assert produced["type"] == "thinking"
        sent = second["messages"][len(first["messages"])]
        assert sent["role"] == "assistant"
        assert sent["content"][0]["thinking"] == produced["thinking"]  # sent back as returned
        # The recording run's signature is bound to the untrimmed body: re-sign with this one's.
        sent["content"][0]["signature"] = produced["signature"]
        assert second["messages"][: len(first["messages"])] != first["messages"]  # not bytewise
        _accepted(up, second, headers=headers)
        # The refused side: the same request with the task edited.
        edited = copy.deepcopy(second)
        edited["messages"][0]["content"][-1]["text"] += " Quickly."
        status, answer = _post(up, edited, headers=headers)
        assert status == 400
        where = len(first["messages"])
        assert answer["error"]["message"].startswith(f"messages.{where}.content.0: {BOUND}")
    if version == "2.1.332":
        before, after = first["messages"][1], second["messages"][1]
        assert before["role"] == after["role"] == "system"
        assert [b["text"] for b in before["content"]] == [after["content"]]
        assert "cache_control" in before["content"][0]
