"""``tomc mcp`` inside the real Claude Code and Codex CLIs, registered as the README says.

A scripted loopback model (:class:`mcp_hosts.SearchingModel`) works through the six tools:
prepare_context on a 190,000-character history with default arguments, notebook_save,
notebook_list, notebook_recall, inspect_sources, a bad ``strategy``, notebook_delete. Where the
host defers MCP tools (Claude Code 2.1.332's ``ToolSearch``; Codex 0.171's ``tool_search`` and
its code mode's ``ALL_TOOLS``), the model first searches with the words a person would use,
reads what the host found and calls that; the first host that lists the tools up front (Claude
Code 2.1.197) gets direct calls. What each host hands the model must be what the server sent,
whole: not cut, not saved to a file, writes not refused, errors in TOMC's words. The words and
what they find are the table in docs/mcp.md. The CLIs come from ``npm ci`` at the repository
root (or ``$TOMC_AGENTS_BIN``); without them these tests skip and say so.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_hosts import HOSTS, Host, McpPlan, McpRun, McpStep, StepOutcome, run_mcp_session
from real_agents import REPO, agent_binary
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
TASK = "What is deploy_target?"
#: The words a person would search with, per tool: the table in docs/mcp.md uses these.
QUERIES = {
    "prepare_context": "compile a long history into a memory for one task",
    "notebook_save": "save notes to a notebook",
    "notebook_list": "list my saved notebooks",
    "notebook_recall": "recall a notebook for a new task",
    "inspect_sources": "show which source lines were kept and why",
    "notebook_delete": "delete a notebook",
}
PLAN = McpPlan(
    steps=(
        McpStep(
            "prepare_context",
            {"history": BIG, "task": "What is deploy_region?"},
            QUERIES["prepare_context"],
        ),
        McpStep("notebook_save", {"name": "ops", "text": SMALL}, QUERIES["notebook_save"]),
        McpStep("notebook_list", {}, QUERIES["notebook_list"]),
        McpStep("notebook_recall", {"name": "ops", "task": TASK}, QUERIES["notebook_recall"]),
        McpStep("inspect_sources", {"history": SMALL, "task": TASK}, QUERIES["inspect_sources"]),
        # Found by the first search: called directly.
        McpStep("prepare_context", {"history": SMALL, "task": "t", "strategy": "best"}),
        McpStep("notebook_delete", {"name": "ops"}, QUERIES["notebook_delete"]),
    )
)
TOOLS = frozenset(QUERIES)
_RUNS: dict[str, McpRun] = {}


def _run(host: Host) -> McpRun:
    if agent_binary(host.agent) is None:
        pytest.skip(
            f"the real {host.agent} CLI is not installed: run `npm ci` at the repository root "
            "(package.json pins it)"
        )
    if host.name not in _RUNS:
        _RUNS[host.name] = run_mcp_session(host, PLAN, timeout_s=180)
    return _RUNS[host.name]


def _steps(host: Host) -> list[StepOutcome]:
    run = _run(host)
    assert [s.tool for s in run.steps] == [s.tool for s in PLAN.steps], run.explain()
    assert all(s.result is not None for s in run.steps), run.explain()
    assert run.exit_code == 0 and "TASK COMPLETE" in run.stdout, run.explain()
    return run.steps


def _defers(run: McpRun) -> bool:
    """Whether the host held the tomc tools back from the first request (a search tool
    instead of their schemas)."""
    return any(s.query is not None and s.found is not None for s in run.steps)


def _expected(tmp: Path) -> list[dict[str, Any]]:
    """What the server sends for the deterministic calls, in-process."""

    async def main() -> list[dict[str, Any]]:
        async with Client(create_server(NotebookStore(tmp))) as client:
            out = []
            for index in (0, 4):
                step = PLAN.steps[index]
                result = await client.call_tool(step.tool, dict(step.arguments))
                out.append(result.structured_content)
            return out

    return anyio.run(main)


def _steady(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """The inspector report without its measured latency line."""
    if data is None or "inspection" not in data:
        return data
    lines = data["inspection"].splitlines()
    return {**data, "inspection": [line for line in lines if not line.startswith("latency:")]}


@pytest.mark.parametrize("host", HOSTS, ids=str)
def test_the_model_finds_each_tool_by_plain_words(host: Host) -> None:
    """Where the host defers the tools, each of the six is found by a person's words for it
    (the host's own search, or code mode's filter of ALL_TOOLS) and then called; where it does
    not, all six are in the first request with their schemas."""
    run = _run(host)
    steps = _steps(host)
    first = run.first_main()
    assert first is not None, run.explain()
    if not _defers(run):
        assert all(s.found is None for s in steps), run.explain()
        offered = {str(t.get("name")) for t in first.body.get("tools") or []}
        assert {PLAN.prefix + tool for tool in TOOLS} <= offered, sorted(offered)
        return
    searched = {s.tool: s for s in steps if s.query is not None}
    assert set(searched) == TOOLS, run.explain()
    for tool, step in searched.items():
        assert step.query == QUERIES[tool]
        assert step.found and tool in step.found, (tool, step.query, step.found, run.explain())


@pytest.mark.parametrize("host", HOSTS, ids=str)
def test_a_deferring_host_names_the_tools_without_their_schemas(host: Host) -> None:
    """What the host sends first when it defers: the tomc tools named (a system message or a
    namespace), a search tool, and no tomc tool's schema."""
    run = _run(host)
    first = run.first_main()
    assert first is not None, run.explain()
    if not _defers(run):
        pytest.skip(f"{host} lists the MCP tools up front")
    body = first.body
    text = repr(body)
    search = {s.search_tool for s in run.steps if s.search_tool}
    assert len(search) == 1, search
    if host.agent == "claude":
        names = {str(t.get("name")) for t in body.get("tools") or []}
        assert search == {"ToolSearch"} and "ToolSearch" in names, sorted(names)
        assert not any(name.startswith(PLAN.prefix) for name in names), sorted(names)
        assert all(PLAN.prefix + tool in text for tool in TOOLS)
    else:
        assert "Deferred tool namespaces" in text and "mcp__tomc" in text
        assert "mcp__tomc__notebook_save(args" not in text  # no declaration of a tomc tool
        assert search == ({"tool_search"} if host.model else {"ALL_TOOLS"}), search


@pytest.mark.parametrize("host", HOSTS, ids=str)
def test_hosts_hand_the_model_every_result_whole(host: Host, tmp_path: Path) -> None:
    steps = _steps(host)
    prepared, inspected = _expected(tmp_path)
    big, small_inspected = steps[0].result, steps[4].result
    assert big is not None and small_inspected is not None
    # The 190,000-character history with default arguments: capped, whole, not refused.
    assert big.structured == prepared, (big.text[:600], _run(host).explain())
    assert "Budget capped" in prepared["budget_note"]
    assert "eu-north-7b" in prepared["compiled_memory"]
    assert _steady(small_inspected.structured) == _steady(inspected), small_inspected.text[:600]
    for step, planned in zip(steps, PLAN.steps, strict=True):
        result = step.result
        assert result is not None
        assert "exceeds maximum allowed tokens" not in result.text, step.tool
        assert "truncated" not in result.text, step.tool
        if "strategy" not in planned.arguments:
            assert result.is_error in (False, None), (step.tool, result.text[:600])
            assert result.structured is not None, (step.tool, result.text[:600])


@pytest.mark.parametrize("host", HOSTS, ids=str)
def test_writes_are_not_refused(host: Host) -> None:
    steps = _steps(host)
    saved, listed, recalled, deleted = (steps[i].result for i in (1, 2, 3, 6))
    assert saved and saved.structured, saved
    assert saved.structured["seq"] == 1 and saved.structured["chars"] == len(SMALL)
    assert listed and listed.structured, listed
    assert [(n["name"], n["entries"]) for n in listed.structured["notebooks"]] == [("ops", 1)]
    assert recalled and recalled.structured, recalled
    assert "deploy_target = prod" in recalled.structured["compiled_memory"]
    assert deleted and deleted.structured == {"name": "ops", "entries_removed": 1}, deleted


@pytest.mark.parametrize("host", HOSTS, ids=str)
def test_a_bad_argument_reads_as_tomcs_message(host: Host) -> None:
    result = _steps(host)[5].result
    assert result is not None
    assert result.is_error in (True, None), result.text
    assert (
        "invalid arguments for prepare_context: 'strategy' must be one of 'auto', 'tomc', "
        "'tomc_raw' or 'rag', not 'best'" in result.text
    )
    assert "pydantic" not in result.text and "http" not in result.text


# ---------------------------------------------------------------------- the table in docs/mcp.md

DOC = REPO / "docs" / "mcp.md"
_COLUMN = re.compile(r"^(?P<agent>Claude Code|Codex) (?P<version>[0-9.]+)(?: (?P<how>.+))?$")


def _doc_table() -> tuple[list[str], dict[str, dict[str, list[str]]]]:
    """The query table of docs/mcp.md: its host columns, and per query the tools each found."""
    text = DOC.read_text("utf-8")
    section = text.split("## Finding the tools by search", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in rows[0].strip("|").split("|")]
    table: dict[str, dict[str, list[str]]] = {}
    for row in rows[2:]:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        query = cells[0].strip('"')
        table[query] = {
            column: re.findall(r"`(\w+)`", cell)
            for column, cell in zip(header[2:], cells[2:], strict=True)
        }
    return header[2:], table


def _version(agent: str) -> str | None:
    binary = agent_binary(agent)
    if binary is None:
        return None
    out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    match = re.search(r"\d+\.\d+\.\d+", out.stdout)
    return match.group(0) if match else None


def _column(header: str) -> Host | None:
    match = _COLUMN.match(header)
    assert match, header
    agent = "claude" if match["agent"] == "Claude Code" else "codex"
    how = match["how"] or ""
    model = re.search(r"gpt-[0-9.]+", how)
    return next(
        (h for h in HOSTS if h.agent == agent and h.model == (model.group(0) if model else None)),
        None,
    )


def test_the_docs_table_uses_the_tests_words() -> None:
    """Every query in the table is one the tests search with, for the tool its row names, and
    each row's tool is among what every host found."""
    columns, table = _doc_table()
    assert set(table) == set(QUERIES.values())
    text = DOC.read_text("utf-8")
    for tool, query in QUERIES.items():
        assert re.search(rf'\| "{re.escape(query)}" \| `{tool}` \|', text), (tool, query)
        for column in columns:
            assert tool in table[query][column], (query, column, table[query][column])


@pytest.mark.parametrize("host", HOSTS, ids=str)
def test_the_docs_table_is_what_the_hosts_found(host: Host) -> None:
    """The table's column for this host is what its search found (the tomc tools, best first),
    when the CLI is the version the column names."""
    columns, table = _doc_table()
    column = next((c for c in columns if _column(c) == host), None)
    assert column is not None, (host, columns)
    documented = _COLUMN.match(column)
    assert documented is not None
    if _version(host.agent) != documented["version"]:
        pytest.skip(f"{host.agent} is not {documented['version']}, the version the table shows")
    steps = _steps(host)
    for step in steps:
        if step.query is None:
            continue
        found = [name for name in step.found or [] if name in TOOLS]
        assert table[step.query][column] == found, (step.query, column, found)
