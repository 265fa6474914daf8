"""Replayable conversations for the cache-cost simulator.

A workload yields the caller's original history at each logical model request, append-only,
as an agent loop would hold it. Synthetic agent sessions are generated from a seed; LoCoMo
conversations are read at run time from the file the caller points to (never bundled).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Workload", "agent_workload", "locomo_workloads"]

Message = dict[str, Any]

_SERVICES = ["billing", "auth", "search", "ingest", "gateway", "scheduler", "reports", "cache"]
_VERBS = ["finished", "retried", "skipped", "queued", "flushed", "rotated", "synced"]
_TOOLS = ["read_file", "run_tests", "grep", "shell", "http_get"]


@dataclass(frozen=True)
class Workload:
    """A named conversation replay under a given effective window and output limit."""

    name: str
    window: int
    max_tokens: int
    replay: Callable[[], Iterator[list[Message]]]
    note: str = ""


def _tool_result(rng: random.Random, turn: int, call: int, lines: int) -> str:
    rows = []
    for line in range(lines):
        service = rng.choice(_SERVICES)
        if rng.random() < 0.08:
            rows.append(f"{service}_retries = {rng.randint(0, 9)}")
        else:
            rows.append(
                f"[{turn:03d}.{call}.{line:02d}] {service} worker w{rng.randint(1, 64)} "
                f"{rng.choice(_VERBS)} batch {rng.randint(1000, 9999)} in "
                f"{rng.randint(1, 900)} ms (queue depth {rng.randint(0, 40)})"
            )
    return "\n".join(rows)


def _agent_replay(turns: int, seed: int) -> Iterator[list[Message]]:
    rng = random.Random(seed)
    history: list[Message] = [
        {
            "role": "system",
            "content": "You are a coding agent working in a large service repository. "
            "Use the tools to inspect logs and files; keep answers short and exact.\n"
            + "\n".join(f"Rule {k}: {rng.choice(_VERBS)} before you report." for k in range(20)),
        }
    ]
    for turn in range(turns):
        service = rng.choice(_SERVICES)
        history.append(
            {
                "role": "user",
                "content": f"Task {turn}: find why {service} is slow and how many retries "
                f"{service} used; set {service}_budget = {rng.randint(10, 99)} if needed.",
            }
        )
        for round_ in range(rng.randint(1, 4)):
            yield history  # the model is asked what to do next
            calls = [f"call_{turn}_{round_}_{k}" for k in range(rng.randint(1, 2))]
            history = [
                *history,
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": call_id,
                            "type": "function",
                            "function": {
                                "name": rng.choice(_TOOLS),
                                "arguments": json.dumps({"target": service, "n": k}),
                            },
                        }
                        for k, call_id in enumerate(calls)
                    ],
                },
                *(
                    {
                        "role": "tool",
                        "tool_call_id": call_id,
                        "content": _tool_result(rng, turn, k, rng.randint(5, 60)),
                    }
                    for k, call_id in enumerate(calls)
                ),
            ]
        yield history  # the model writes its answer
        history = [
            *history,
            {"role": "assistant", "content": f"{service} retried {rng.randint(0, 9)} times."},
        ]


def agent_workload(
    name: str, *, turns: int, window: int, seed: int = 7, max_tokens: int = 4096
) -> Workload:
    """A synthetic coding-agent session: user tasks, 1-4 tool rounds each, long tool output."""
    return Workload(
        name=name,
        window=window,
        max_tokens=max_tokens,
        replay=lambda: _agent_replay(turns, seed),
        note=f"synthetic agent, {turns} tasks, seed {seed}",
    )


def _locomo_replay(sample: dict[str, Any]) -> Iterator[list[Message]]:
    conversation = sample["conversation"]
    speaker_a, speaker_b = conversation["speaker_a"], conversation["speaker_b"]
    history: list[Message] = [
        {"role": "system", "content": f"You are {speaker_b}, chatting with {speaker_a}."}
    ]
    number = 1
    while f"session_{number}" in conversation:
        date = conversation.get(f"session_{number}_date_time", "")
        for position, turn in enumerate(conversation[f"session_{number}"]):
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            if position == 0 and date:
                text = f"[{date}] {text}"
            if turn["speaker"] == speaker_b:
                yield history  # the model speaks as speaker_b
                history = [*history, {"role": "assistant", "content": text}]
            else:
                history = [*history, {"role": "user", "content": text}]
        number += 1


def locomo_workloads(
    path: str | Path, *, window: int, conversations: int | None = None, max_tokens: int = 1024
) -> list[Workload]:
    """LoCoMo conversations as chats: one request before each of the second speaker's turns.

    The file is read here, at run time; its licence (CC BY-NC 4.0) forbids bundling it.
    """
    samples = json.loads(Path(path).read_text("utf-8"))[:conversations]
    return [
        Workload(
            name=f"LoCoMo {sample.get('sample_id', index)}",
            window=window,
            max_tokens=max_tokens,
            replay=lambda sample=sample: _locomo_replay(sample),
            note="LoCoMo conversation replayed as a chat",
        )
        for index, sample in enumerate(samples)
    ]
