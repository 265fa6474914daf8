"""Long agent loops: finished tool work inside one task is compiled; no request over the window."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading

import bpe_openai
import httpx2
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks import request_overhead
from chat_fixtures import openai_client
from chat_strategies import agent_loops
from fake_providers import FakeProvider, Usage
from tomc import UnsupportedClientError
from tomc.chat import AutomaticChatSession, check_tool_pairing
from tomc.chat._memory import CONTINUED_PREFIX, HISTORY_HEADER, WORK_HEADER

O200K = bpe_openai.get_encoding("o200k_base")
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
WORK_MARK = WORK_HEADER.split(":")[0]
HISTORY_MARK = HISTORY_HEADER.split(" {count}")[0]


def o200k_prompt(body: dict) -> int:
    """An independent o200k count of a request: contents, calls, tool schemas, 3 per message."""
    total = 3 + len(O200K.encode_ordinary(json.dumps(body.get("tools") or [])))
    for message in body["messages"]:
        total += 3 + len(O200K.encode_ordinary(message.get("content") or ""))
        for call in message.get("tool_calls") or ():
            function = call["function"]
            total += 3 + len(O200K.encode_ordinary(function["name"] + function["arguments"]))
    return total


def agent_step(step: int) -> list[dict]:
    """One tool call and its 20-line output, as a coding agent produces them."""
    return request_overhead.agent_step(step, lines=20)


TASK = [request_overhead.SYSTEM, request_overhead.TASK]


def test_two_hundred_tool_calls_stay_inside_the_window_on_every_request():
    window, reserve = 16_000, 2_048
    session = AutomaticChatSession(deployment_context_limit=window, backoff_thresholds=())
    with FakeProvider() as server, openai_client(server) as client:
        history = list(TASK)
        for step in range(200):
            session.create(
                client, model="gpt-4o", messages=history, tools=TOOLS, max_tokens=reserve
            )
            body = server.requests[-1].body
            assert o200k_prompt(body) <= window - reserve, step
            assert check_tool_pairing(body["messages"]) == []
            assert body["messages"][1] == TASK[1]  # the task, byte-identical, in place
            history += agent_step(step)
    codes = [decision.code for decision in session.decisions]
    assert codes.count("compiled") == session.rebuilds >= 2
    assert codes.count("reused") > 3 * session.rebuilds  # one rebuild lasts many requests
    assert set(codes) <= {"fits", "compiled", "reused"}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    agent_loops(), st.floats(0.25, 0.9), st.integers(0, 6), st.sampled_from(["task", "task+step"])
)
def test_rewrites_keep_task_tail_order_and_pairing(history, share, keep, query):
    from chat_fixtures import history_tokens

    session = AutomaticChatSession(
        deployment_context_limit=max(400, int(history_tokens(history) * share)),
        output_reserve=64,
        keep_recent_messages=keep,
        backoff_thresholds=(),
        work_query=query,
    )
    sent, decision = session.prepare(model="m", messages=history)
    if decision.action == "passthrough":
        assert sent is history
        return
    assert decision.tokens_after <= decision.effective_window - decision.output_reserve
    assert check_tool_pairing(sent) == []
    task = max(i for i, m in enumerate(history) if m["role"] == "user")
    position = {id(m): i for i, m in enumerate(history)}
    order, memories = [], []
    for item in sent:
        if id(item) in position:
            order.append(position[id(item)])
        else:  # a memory: what it stands for sits where it is
            memories.append((len(order), item["content"]))
    assert order == sorted(order) and task in order  # chronological, task kept (same object)
    if keep:  # the newest items are sent as they are (and as the very same objects)
        assert order[-keep:] == list(range(len(history) - keep, len(history)))
    for at, text in memories:
        before = order[at - 1] if at else -1
        if text.startswith(WORK_MARK):
            assert before == task  # the work memory follows the task directly
        else:  # before the task; raw items the recent tail keeps may sit between them
            assert text.startswith(HISTORY_MARK) and (at == len(order) or order[at] <= task)


def test_an_advance_keeps_the_history_memory_and_appends_work_blocks():
    earlier = []
    for turn in range(30):
        earlier += [
            {"role": "user", "content": f"Earlier task {turn}: report the status of job {turn}."},
            {"role": "assistant", "content": f"Job {turn} finished with code {turn % 3}. " * 8},
        ]
    history = [TASK[0], *earlier, TASK[1]]
    session = AutomaticChatSession(deployment_context_limit=9_000, backoff_thresholds=())
    rebuilt = []
    for step in range(60):
        sent, decision = session.prepare(
            model="gpt-4o", messages=history, options={"max_tokens": 1024}
        )
        if decision.code == "compiled":
            rebuilt.append((decision.rebuild, [m["content"] for m in sent if m not in history]))
        history = history + agent_step(step)
    kinds = [kind for kind, _ in rebuilt]
    assert len(rebuilt) >= 3 and kinds[0] == "build" and "append" in kinds
    history_memories = {texts[0] for _, texts in rebuilt if texts[0].startswith(HISTORY_MARK)}
    assert len(history_memories) == 1  # every advance kept the identical history memory
    for (_, before), (kind, after) in itertools.pairwise(rebuilt):
        if kind == "append":
            # Every block already sent stays byte-identical; one block follows them.
            assert after[: len(before)] == before and len(after) == len(before) + 1
            assert after[-1].startswith(CONTINUED_PREFIX)
        else:
            assert after[-1].startswith(WORK_MARK)


def test_a_session_refuses_a_client_it_cannot_drive_before_anything_changes():
    session = AutomaticChatSession(deployment_context_limit=8_000)
    async_client = openai.AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(UnsupportedClientError, match="acreate"):
        session.create(async_client, model="gpt-4o", messages=TASK)
    with pytest.raises(UnsupportedClientError, match="has no method"):
        session.create(object(), model="gpt-4o", messages=TASK)
    assert session.decisions == type(session.decisions)() and session.last_decision is None
    sync_client = openai.OpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(UnsupportedClientError, match="create"):
        asyncio.run(session.acreate(sync_client, model="gpt-4o", messages=TASK))
    assert not session.decisions and session.rebuilds == 0


def test_acreate_awaits_an_async_client_and_reads_its_usage():
    async def run(server: FakeProvider) -> tuple:
        async with httpx2.AsyncClient(trust_env=False) as http:
            client = openai.AsyncOpenAI(
                api_key="sk-test", base_url=server.base_url, max_retries=0, http_client=http
            )
            session = AutomaticChatSession(deployment_context_limit=100_000)
            first = await session.acreate(client, model="gpt-4o", messages=TASK, max_tokens=64)
            mine = session.last_decision
            second = await session.acreate(client, model="gpt-4o", messages=TASK)
            return first, mine, second, session.last_decision

    with FakeProvider(usage=Usage(input_tokens=4321)) as server:
        first, mine, _, last = asyncio.run(run(server))
    assert isinstance(first, openai.types.chat.ChatCompletion)
    assert mine.code == "fits" and mine.request == 1
    assert (last.request, last.context_hint, last.hint_source) == (2, 4321, "usage")


def test_each_thread_sees_its_own_last_decision():
    session = AutomaticChatSession(deployment_context_limit=100_000)
    seen: dict[str, int] = {}
    barrier = threading.Barrier(2)

    def worker(name: str, model: str) -> None:
        barrier.wait()
        for _ in range(50):
            session.prepare(model=model, messages=TASK)
            assert session.last_decision.model == model
        seen[name] = session.last_decision.request

    threads = [
        threading.Thread(target=worker, args=(name, model))
        for name, model in (("a", "gpt-4o"), ("b", "gpt-4o-mini"))
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(seen) == ["a", "b"] and seen["a"] != seen["b"]
    assert len(session.decisions) == 100
