"""``tomc mcp`` inside the real Claude Code and Codex CLIs, registered as the README says.

A scripted loopback model calls the tools (prepare_context on a 190,000-character history with
default arguments, notebook_save, notebook_recall, inspect_sources, a bad ``strategy``,
notebook_delete); what each host hands the model must be what the server sent, whole: not cut,
not saved to a file, writes not refused, errors in TOMC's words. The CLIs come from ``npm ci``
at the repository root; without them these tests skip and say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from agent_upstream import McpScript
from mcp_hosts import McpRun, run_mcp_session, tool_results
from real_agents import AGENTS, agent_binary
from tomc._mcp.server import create_server
from tomc._notebooks import NotebookStore


def _big_history() -> str:
    lines, i = [], 0
    while sum(len(line) + 1 for line in lines) < 190_000:
        i += 1
        lines.append(
            f"[line {i:05d}] worker={('alpha', 'bravo', 'charlie')[i % 3]} status=ok "
            f"latency_ms={(i * 37) % 900} queue_depth={(i * 7) % 41}"
        )
    lines.insert(100, "deploy_region = eu-north-7b")
    return "\n".join(lines)[:190_000]


BIG = _big_history()
SMALL = "deploy_target = staging\nalice -[assigned]-> payments\ndeploy_target = prod\n"
CALLS = (
    ("prepare_context", {"history": BIG, "task": "What is deploy_region?"}),
    ("notebook_save", {"name": "ops", "text": SMALL}),
    ("notebook_recall", {"name": "ops", "task": "What is deploy_target?"}),
    ("inspect_sources", {"history": SMALL, "task": "What is deploy_target?"}),
    ("prepare_context", {"history": SMALL, "task": "t", "strategy": "best"}),
    ("notebook_delete", {"name": "ops"}),
)
_RUNS: dict[str, McpRun] = {}


def _run(agent: str) -> McpRun:
    if agent_binary(agent) is None:
        pytest.skip(
            f"the real {agent} CLI is not installed: run `npm ci` at the repository root "
            "(package.json pins it)"
        )
    if agent not in _RUNS:
        _RUNS[agent] = run_mcp_session(agent, McpScript(calls=CALLS), timeout_s=120)
    return _RUNS[agent]


def _expected(tmp: Path) -> list[dict[str, Any]]:
    """What the server sends for the deterministic calls, in-process."""

    async def main() -> list[dict[str, Any]]:
        async with Client(create_server(NotebookStore(tmp))) as client:
            out = []
            for index in (0, 3):
                result = await client.call_tool(CALLS[index][0], dict(CALLS[index][1]))
                out.append(result.structured_content)
            return out

    return anyio.run(main)


def _received(run: McpRun) -> list[tuple[dict[str, Any] | None, str, bool | None]]:
    """Per call: the structured content the model got (None if not JSON), the text, is_error."""
    out = []
    for result in tool_results(run):
        text = result.text
        if run.agent == "codex":
            # Codex's exec output: a status header, then what the script printed.
            text = text.split("Output:\n", 1)[-1]
            try:
                whole = json.loads(text)
            except ValueError:
                out.append((None, result.text, None))
                continue
            error = bool(whole.get("isError"))
            message = "".join(p.get("text", "") for p in whole.get("content") or [])
            out.append((whole.get("structuredContent"), message, error))
        else:
            try:
                data = json.loads(text)
            except ValueError:
                data = None
            out.append((data if isinstance(data, dict) else None, text, result.is_error))
    return out


def _steady(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """The inspector report without its measured latency line."""
    if data is None or "inspection" not in data:
        return data
    lines = data["inspection"].splitlines()
    return {**data, "inspection": [line for line in lines if not line.startswith("latency:")]}


@pytest.mark.parametrize("agent", AGENTS)
def test_hosts_hand_the_model_every_result_whole(agent: str, tmp_path: Path) -> None:
    run = _run(agent)
    received = _received(run)
    assert len(received) == len(CALLS), run.explain()
    prepared, inspected = _expected(tmp_path)
    # The 190,000-character history with default arguments: capped, whole, not refused.
    assert received[0][0] == prepared, (received[0][1][:600], run.explain())
    assert "Budget capped" in prepared["budget_note"]
    assert "eu-north-7b" in prepared["compiled_memory"]
    assert _steady(received[3][0]) == _steady(inspected), received[3][1][:600]
    for (data, text, error), (tool, _) in zip(received, CALLS, strict=True):
        assert "exceeds maximum allowed tokens" not in text and "truncated" not in text, tool
        if tool != "prepare_context" or data is not None:
            assert error in (False, None), (tool, text[:600])


@pytest.mark.parametrize("agent", AGENTS)
def test_writes_are_not_refused(agent: str) -> None:
    received = _received(_run(agent))
    saved, recalled, deleted = received[1][0], received[2][0], received[5][0]
    assert saved is not None and saved["seq"] == 1 and saved["chars"] == len(SMALL), received[1]
    assert recalled is not None and "deploy_target = prod" in recalled["compiled_memory"]
    assert deleted == {"name": "ops", "entries_removed": 1}, received[5]


@pytest.mark.parametrize("agent", AGENTS)
def test_a_bad_argument_reads_as_tomcs_message(agent: str) -> None:
    _, text, error = _received(_run(agent))[4]
    assert error in (True, None), text
    assert (
        "invalid arguments for prepare_context: 'strategy' must be one of 'auto', 'tomc', "
        "'tomc_raw' or 'rag', not 'best'" in text
    )
    assert "pydantic" not in text and "http" not in text
