"""Golden requests: realistic captured-shape request bodies per format, with the rewrite pinned.

``tests/chat/golden/<case>.request.json`` is what a client sends (frozen from the builders in
``dialect_fixtures``: a coding agent's Chat Completions tool session; a Claude Code ``/v1/messages``
stream with thinking blocks, tool_use and an image in the raw tail; a Codex ``/v1/responses``
stream with reasoning items, a compaction item and function calls). ``<case>.rewritten.json`` pins
what the session makes of it under a fixed model profile: the decision (without its measured
latency), the headers it adds and the body it sends.

The test rewrites each request twice (the output must be byte-identical: same input and settings,
same bytes) and compares with the pinned file. After a deliberate change to the compiler or the
session, regenerate the pinned files and review their diff::

    TOMC_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_chat_golden.py

With ``TOMC_UPDATE_GOLDEN=1`` the test writes the files and passes; the checks of the rewrite
itself (format rules, what stays byte-identical) still run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tomc.chat import AutomaticChatSession
from tomc.chat.dialects import DIALECTS

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("TOMC_UPDATE_GOLDEN") == "1"
UNCHANGED = "the request, unchanged"
SOURCE = "tests/golden: a fixed window, so that the rewrite does not follow the bundled table"

# case: (api, session settings, history key). Windows are fixed per model id.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat_tool_session": (
        "chat",
        {"model_profiles": {"gpt-4o": {"context_window": 16_000, "encoding": "o200k_base"}}},
    ),
    "messages_thinking_image": (
        "messages",
        {"model_profiles": {"claude-opus-4-8": {"context_window": 40_000}}},
    ),
    "messages_thinking_image.passthrough": (
        "messages",
        {
            "model_profiles": {"claude-opus-4-8": {"context_window": 40_000}},
            "thinking_prefix": "passthrough",
        },
    ),
    "responses_reasoning_compaction": (
        "responses",
        {"model_profiles": {"gpt-5.3-codex": {"context_window": 20_000, "encoding": "o200k_base"}}},
    ),
}
EXPECTED_CODES = {
    "chat_tool_session": "compiled",
    "messages_thinking_image": "compiled",
    "messages_thinking_image.passthrough": "thinking_bound",
    "responses_reasoning_compaction": "compiled",
}


def request_path(case: str) -> Path:
    return GOLDEN / f"{case.split('.')[0]}.request.json"


def rewrite(case: str) -> str:
    """The pinned text for ``case``: decision, added headers and the body sent."""
    api, settings = CASES[case]
    profiles = {
        model: {**profile, "source": SOURCE}
        for model, profile in settings["model_profiles"].items()
    }
    session = AutomaticChatSession(**{**settings, "model_profiles": profiles})
    request = json.loads(request_path(case).read_text("utf-8"))
    prepared = session.prepare_request(request, api=api)
    decision = prepared.decision.to_dict()
    del decision["compile_latency_s"]  # measured, so never the same twice
    del decision["prepare_s"]
    body: Any = prepared.body
    if decision["action"] == "passthrough":
        assert body == request
        body = UNCHANGED  # not a second copy of the request
    pinned = {"decision": decision, "headers": dict(prepared.headers), "body": body}
    return json.dumps(pinned, indent=2, ensure_ascii=False) + "\n"


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_rewrite(case):
    api, _ = CASES[case]
    text = rewrite(case)
    assert rewrite(case) == text  # deterministic: the same request gives the same bytes
    pinned_path = GOLDEN / f"{case}.rewritten.json"
    if UPDATE:
        pinned_path.write_text(text, "utf-8")
    assert pinned_path.exists(), "no pinned file: run with TOMC_UPDATE_GOLDEN=1 to create it"
    assert text == pinned_path.read_text("utf-8"), (
        f"the rewrite of {case} changed; if that is intended, run with TOMC_UPDATE_GOLDEN=1 "
        "and review the diff of tests/chat/golden"
    )

    pinned = json.loads(text)
    request = json.loads(request_path(case).read_text("utf-8"))
    key = DIALECTS[api].items_key
    assert pinned["decision"]["code"] == EXPECTED_CODES[case]
    if pinned["decision"]["action"] == "passthrough":
        assert pinned["body"] == UNCHANGED and pinned["headers"] == {}
        return
    sent, original = pinned["body"][key], request[key]
    assert DIALECTS[api].validate(sent) == []
    rest = {k: v for k, v in pinned["body"].items() if k not in (key, "thinking")}
    assert rest == {k: v for k, v in request.items() if k not in (key, "thinking")}
    raw_tail = sent[-5:]
    assert raw_tail == original[-5:]  # the newest items go out as they came


def test_golden_cases_keep_what_each_format_protects():
    messages = json.loads((GOLDEN / "messages_thinking_image.rewritten.json").read_text("utf-8"))
    assert messages["headers"] == {"anthropic-beta": "thinking-binding-controls-2026-08-01"}
    sent = messages["body"]["messages"]
    assert sent[-1]["content"][0]["content"][0]["type"] == "image"
    assert sent[-2]["content"][0]["type"] == "thinking"  # the latest assistant turn's, as sent
    request = json.loads(request_path("messages_thinking_image").read_text("utf-8"))
    assert messages["body"]["system"] == request["system"]  # cache_control where it was

    responses = json.loads(
        (GOLDEN / "responses_reasoning_compaction.rewritten.json").read_text("utf-8")
    )
    sent = responses["body"]["input"]
    original = json.loads(request_path("responses_reasoning_compaction").read_text("utf-8"))
    at = next(i for i, item in enumerate(original["input"]) if item.get("type") == "compaction")
    assert sent[: at + 1] == original["input"][: at + 1]  # nothing before it moved or changed
    memory = sent[at + 1]
    assert memory["content"][0]["text"].startswith("[TOMC memory of ")
    assert not any("gAAAA" in part["text"] for part in memory["content"])  # never flattened
