"""Helpers for the chat tests: histories with tool groups, an SDK client on the fake server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx2
import openai

from fake_providers import FakeProvider
from tomc.chat._conversation import Entry
from tomc.chat.dialects import DIALECTS

SYSTEM = {"role": "system", "content": "You are a careful build engineer. Answer briefly."}


def tool_turn(turn: int, calls: int = 2, lines: int = 6) -> list[dict[str, Any]]:
    """One user request, an assistant tool_calls message, its results and a final answer."""
    ids = [f"call_{turn}_{k}" for k in range(calls)]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": f"Turn {turn}: check service s{turn} and report retries."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read_log", "arguments": json.dumps({"file": call_id})},
                }
                for call_id in ids
            ],
        },
    ]
    for k, call_id in enumerate(ids):
        body = "\n".join(
            f"log {turn}.{k}.{line}: worker w{line} finished batch {turn * 100 + line} in "
            f"{line + 3} seconds with status ok"
            for line in range(lines)
        )
        messages.append(
            {"role": "tool", "tool_call_id": call_id, "content": f"retries_s{turn} = {k}\n{body}"}
        )
    messages.append({"role": "assistant", "content": f"Service s{turn} used {calls - 1} retries."})
    return messages


def agent_history(turns: int, *, calls: int = 2, lines: int = 6) -> list[dict[str, Any]]:
    """A system prompt, ``turns`` tool turns, and a final user question."""
    history = [dict(SYSTEM)]
    for turn in range(turns):
        history.extend(tool_turn(turn, calls, lines))
    history.append({"role": "user", "content": "How many retries did service s3 use?"})
    return history


def history_tokens(history: list[dict[str, Any]]) -> int:
    """What a session counts for these messages (model without a published tokenizer)."""
    from tomc.chat._items import read_item
    from tomc.chat._meter import meter_for
    from tomc.chat.dialects import DIALECTS

    meter = meter_for(None)
    return sum(
        read_item(DIALECTS["chat"], meter, message, index).tokens
        for index, message in enumerate(history)
    )


@contextmanager
def openai_client(server: FakeProvider) -> Iterator[openai.OpenAI]:
    """The real SDK client pointed at the fake server."""
    # trust_env=False: loopback only, whatever proxy the environment configures.
    with httpx2.Client(trust_env=False) as http:
        yield openai.OpenAI(
            api_key="sk-test", base_url=server.base_url, max_retries=0, http_client=http
        )


class SpyClient:
    """Wraps a real client and keeps what ``chat.completions.create`` returned."""

    def __init__(self, inner: openai.OpenAI) -> None:
        self.inner = inner
        self.returned: list[Any] = []
        self.chat = self
        self.completions = self

    def create(self, **kwargs: Any) -> Any:
        result = self.inner.chat.completions.create(**kwargs)
        self.returned.append(result)
        return result


def entries_of(history: list[dict]) -> list[Entry]:
    return [DIALECTS["chat"].read(message, i)[0] for i, message in enumerate(history)]


def groups_of(history: list[dict]) -> list[tuple[int, int]]:
    """(start, end) of every assistant tool_calls message and the tool results after it."""
    spans, index = [], 0
    while index < len(history):
        if history[index].get("tool_calls"):
            end = index + 1
            while end < len(history) and history[end]["role"] == "tool":
                end += 1
            spans.append((index, end))
            index = end
        else:
            index += 1
    return spans
