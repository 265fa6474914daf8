"""Run ``tomc mcp`` INSIDE the real Claude Code and Codex CLIs, offline, with a model that searches.

``run_mcp_session(host, plan)`` registers the server exactly as the README says (Claude Code:
``claude mcp add tomc -- tomc mcp`` with the venv's ``tomc`` on ``PATH``; Codex: the README's
``[mcp_servers.tomc]`` block appended to the config that points Codex at the loopback model),
then runs the agent once against :class:`SearchingModel`, a scripted model on loopback HTTP that
works through an :class:`McpPlan`: one :class:`McpStep` per tool call, in order.

**Tool search.** Hosts may defer MCP tools: the first request names them but carries no schema,
and the model must search for them first. Per request the model looks at what the host offers:

- Claude Code 2.1.332 and later: a ``ToolSearch`` tool (and the tomc tools named in a system
  message, not in ``tools``). The model calls ``ToolSearch`` with the step's plain words; the
  answer is a ``tool_result`` whose content holds one ``tool_reference`` block per tool found
  (``{"type": "tool_reference", "tool_name": "mcp__tomc__notebook_save"}``), best first.
- Codex with a model whose tools are plain functions (``gpt-5.5``): a ``tool_search`` tool
  (``{"type": "tool_search", "execution": "client", ...}``). The model answers with a
  ``tool_search_call`` item (``arguments: {"query": ..., "limit": ...}``); Codex runs a BM25
  search over the tools' names, descriptions and parameters and sends back a
  ``tool_search_output`` item whose ``tools`` are namespaces (``mcp__tomc``) holding the
  functions found, best first; the model then calls one as a ``function_call`` with that
  ``namespace``.
- Codex in code mode (its default models, ``gpt-6.2-sol``): one ``exec`` tool that runs
  JavaScript; its description says deferred tools are left out of it but sit on the global
  ``tools`` object and in ``ALL_TOOLS`` (``{name, description}`` entries), "to find one,
  filter ``ALL_TOOLS`` by ``name`` and ``description``". The model runs such a filter of its
  own (:func:`_all_tools_filter`: the step's words on each tool's name and summary, best
  first) and prints the names; then calls ``tools.<name>(arguments)`` in a second ``exec``.
- Otherwise (Claude Code 2.1.197) the tools are in ``tools`` with their schemas and the model
  calls each directly.

After a search the model reads which tools the answer names, calls the step's tool if it is
among them, and stops with a final text otherwise. Every request is recorded, so the tests read
back, per step, the words, what the host found and what the host handed the model for the call
(:attr:`McpRun.steps`).

The model never answers with ``thinking`` blocks (Claude Code 2.1.332 asks for adaptive
thinking): what hosts do with thinking is the concern of the gateway tests and their upstream
(tests/agent_upstream.py, whose signatures bind each block to its prefix), not of these.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from fake_providers import (
    _messages_problem,
    _responses_problem,
    read_request,
)
from real_agents import (
    _base_env,
    _codex_config,
    _temp_root,
    agent_binary,
    run_command,
    tomc_binary,
)
from tomc.testing.loopback import LoopbackFake

__all__ = [
    "CLAUDE_README_COMMAND",
    "CODEX_README_BLOCK",
    "FINAL_MARK",
    "HOSTS",
    "Host",
    "McpPlan",
    "McpRun",
    "McpStep",
    "ModelRequest",
    "SearchingModel",
    "StepOutcome",
    "ToolResult",
    "run_mcp_session",
]

#: The README's Claude Code registration (the first form), run in the workspace.
CLAUDE_README_COMMAND = ["mcp", "add", "tomc", "--", "tomc", "mcp"]
#: The README's Codex block; ``{tomc}`` and ``{home}`` are filled in.
CODEX_README_BLOCK = """\
[mcp_servers.tomc]
command = "{tomc}"
args = ["mcp"]
env = {{ TOMC_HOME = "{home}" }}  # optional
default_tools_approval_mode = "approve"  # let codex exec run the write tools
"""
FINAL_MARK = "TASK COMPLETE"
#: Claude Code's search tool.
CLAUDE_SEARCH = "ToolSearch"
#: Words a person's filter would skip (Codex code mode: the model's own filter of ALL_TOOLS).
STOPWORDS = frozenset(
    "a an and are as at be by for from i in into is it its me my of on or our that the this "
    "to was were what which with".split()
)


# ---------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class McpStep:
    """One tool call. ``query``: the plain words the model searches with first when the host
    defers its MCP tools (``None``: call directly, the tool having been found before)."""

    tool: str
    arguments: Mapping[str, Any]
    query: str | None = None


@dataclass(frozen=True)
class McpPlan:
    steps: tuple[McpStep, ...]
    server: str = "tomc"
    #: How many tools a search asks for (Claude Code's ``max_results``, Codex's ``limit``).
    max_results: int = 5

    def task(self) -> str:
        return f"Use the {self.server} MCP tools as planned, then say '{FINAL_MARK}'."

    @property
    def prefix(self) -> str:
        return f"mcp__{self.server}__"


@dataclass(frozen=True)
class Host:
    """A host to run: the agent CLI and, for Codex, the model named in its config."""

    name: str
    agent: str  # "claude" | "codex"
    model: str | None = None  # None: the CLI's default model

    def __str__(self) -> str:
        return self.name


#: Claude Code (ToolSearch from 2.1.332 on), Codex's default code mode (ALL_TOOLS) and Codex
#: with a function-tool model (its tool_search tool).
HOSTS = (
    Host("claude", "claude"),
    Host("codex", "codex"),
    Host("codex-gpt-5.5", "codex", "gpt-5.5"),
)


# ---------------------------------------------------------------------- records


@dataclass
class ToolResult:
    """What the host handed the model for one call: the text, and for a tomc tool the
    structured content and whether the host marked it an error (``None``: it does not say)."""

    call_id: str
    text: str
    is_error: bool | None = None
    structured: dict[str, Any] | None = None


@dataclass
class ModelRequest:
    """One request to the loopback model and what it answered."""

    number: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    kind: str = "other"  # main | side | count_tokens | models | other
    status: int = 200
    error: str | None = None
    #: What the model did: ``{"action": "search"|"call"|"final", "call_id", "tool", "query"}``.
    action: dict[str, Any] | None = None


@dataclass
class StepOutcome:
    """One step as it went: the words searched (None: no search), what the host found (tool
    names, best first; None: no search), and the call's result (None: not called)."""

    tool: str
    query: str | None
    found: list[str] | None
    result: ToolResult | None
    search_tool: str | None = None  # ToolSearch | tool_search | ALL_TOOLS


@dataclass
class McpRun:
    host: Host
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    requests: list[ModelRequest]
    registration: str  # what `claude mcp add` printed, or the Codex config written
    steps: list[StepOutcome] = field(default_factory=list)

    @property
    def agent(self) -> str:
        return self.host.agent

    def first_main(self) -> ModelRequest | None:
        return next((r for r in self.requests if r.kind == "main" and r.status < 400), None)

    def explain(self) -> str:
        errors = [f"#{r.number} {r.status}: {r.error}" for r in self.requests if r.status >= 400]
        actions = [r.action for r in self.requests if r.action]
        return (
            f"{self.host}: exit {self.exit_code} in {self.seconds:.1f}s, "
            f"{len(self.requests)} requests, errors {errors}\nactions: {actions}\n"
            f"stdout tail: {self.stdout[-600:]}\nstderr tail: {self.stderr[-1500:]}\n"
            f"registration: {self.registration[-600:]}"
        )


# ---------------------------------------------------------------------- reading requests


def _blocks(content: Any) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [b for b in content if isinstance(b, Mapping)] if isinstance(content, list) else []


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(str(b.get("text", "")) for b in _blocks(content))


def _bare(name: str, prefix: str) -> str:
    return name[len(prefix) :] if name.startswith(prefix) else name


def _responses_tools(body: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """Every tool a Responses request offers: ``tools``, and Codex's ``additional_tools`` input
    items (its "responses lite" requests carry them there), namespaces opened."""
    tools: list[Mapping[str, Any]] = list(body.get("tools") or [])
    for item in body.get("input") or []:
        if isinstance(item, Mapping) and item.get("type") == "additional_tools":
            tools += list(item.get("tools") or [])
    out: list[Mapping[str, Any]] = []
    while tools:
        tool = tools.pop(0)
        if not isinstance(tool, Mapping):
            continue
        out.append(tool)
        if tool.get("type") == "namespace":
            tools[:0] = [{**t, "namespace": tool.get("name")} for t in tool.get("tools") or []]
    return out


@dataclass
class _Exchange:
    """A tool call the model made earlier in the conversation, and the host's answer."""

    call_id: str
    action: str  # search | call
    tool: str  # the tomc tool (call) or the step's tool searched for (search)
    output: Any = None  # Claude: the tool_result block; Codex: the output item
    after: list[Mapping[str, Any]] = field(default_factory=list)  # Claude: blocks after it


# ---------------------------------------------------------------------- the model


def _sse(event: str, data: Mapping[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n".encode()


def _pieces(text: str, size: int = 60) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class SearchingModel(LoopbackFake):
    """The loopback model (see the module docstring). ``with SearchingModel(plan) as model:``;
    ``model.root_url`` for Claude Code, ``model.base_url`` for Codex; ``model.requests``."""

    def __init__(self, plan: McpPlan) -> None:
        self.plan = plan
        self.requests: list[ModelRequest] = []
        #: Every action, by call id (the ids are the model's own, so unique in a run).
        self.actions: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> SearchingModel:
        app = Starlette(
            routes=[Route("/{path:path}", self._handle, methods=["GET", "POST", "HEAD"])]
        )
        self._serve(app, "searching model", backlog=64)
        return self

    # ------------------------------------------------------------------ routing

    async def _handle(self, request: Request) -> Response:
        raw, body, headers = await read_request(request)
        path = request.url.path
        with self._lock:
            record = ModelRequest(len(self.requests) + 1, request.method, path, headers, body)
            self.requests.append(record)
            if request.method == "HEAD" or path in ("", "/"):
                return Response(b"", status_code=200)
            if request.method == "GET" and path.rstrip("/") == "/v1/models":
                record.kind = "models"
                models = [{"id": "gpt-6.2-sol", "object": "model", "owned_by": "openai"}]
                return JSONResponse({"object": "list", "data": models})
            if request.method != "POST" or not isinstance(body, Mapping):
                return self._fail(record, 404, f"Unknown request URL: {request.method} {path}")
            if path == "/v1/messages/count_tokens":
                record.kind = "count_tokens"
                return JSONResponse({"input_tokens": max(1, len(raw) // 4)})
            if path == "/v1/messages":
                return self._messages(record, body, headers)
            if path == "/v1/responses":
                return self._responses(record, body, headers)
            return self._fail(record, 404, f"Unknown request URL: {request.method} {path}")

    def _fail(self, record: ModelRequest, status: int, message: str) -> Response:
        record.status, record.error = status, message
        if record.path.startswith("/v1/messages"):
            error = {"type": "invalid_request_error" if status == 400 else "not_found_error"}
            return JSONResponse(
                {"type": "error", "error": {**error, "message": message}}, status_code=status
            )
        return JSONResponse(
            {"error": {"message": message, "type": "invalid_request_error", "code": None}},
            status_code=status,
        )

    # ------------------------------------------------------------------ the plan, per request

    def _next(self, exchanges: Sequence[_Exchange], searching: bool) -> dict[str, Any]:
        """The next action, from what the conversation holds: ``exchanges`` are the model's
        earlier calls with the host's answers; ``searching``: the host defers MCP tools."""
        steps = self.plan.steps
        done = sum(1 for e in exchanges if e.action == "call")
        if exchanges and exchanges[-1].action == "search":
            step = steps[done]
            found = self.actions[exchanges[-1].call_id].get("found") or []
            if step.tool not in found:
                return {"action": "final", "text": f"I found no tool for {step.query!r}."}
            return {"action": "call", "tool": step.tool, "arguments": dict(step.arguments)}
        if done >= len(steps):
            return {"action": "final", "text": f"{FINAL_MARK}."}
        step = steps[done]
        if searching and step.query is not None:
            return {"action": "search", "tool": step.tool, "query": step.query}
        return {"action": "call", "tool": step.tool, "arguments": dict(step.arguments)}

    def _record(self, record: ModelRequest, action: dict[str, Any], call_id: str | None) -> None:
        action = {**action, "call_id": call_id, "request": record.number}
        record.action = action
        if call_id is not None:
            self.actions[call_id] = action

    # ------------------------------------------------------------------ Anthropic (Claude Code)

    def _claude_exchanges(self, body: Mapping[str, Any]) -> list[_Exchange]:
        exchanges: dict[str, _Exchange] = {}
        order: list[str] = []
        for message in body.get("messages") or []:
            if not isinstance(message, Mapping):
                continue
            blocks = _blocks(message.get("content"))
            if message.get("role") == "assistant":
                for block in blocks:
                    ident = str(block.get("id"))
                    if block.get("type") == "tool_use" and ident in self.actions:
                        mine = self.actions[ident]
                        exchanges[ident] = _Exchange(ident, mine["action"], mine["tool"])
                        order.append(ident)
                continue
            current: _Exchange | None = None
            for block in blocks:
                ident = str(block.get("tool_use_id"))
                if block.get("type") == "tool_result" and ident in exchanges:
                    current = exchanges[ident]
                    current.output = block
                elif current is not None:
                    current.after.append(block)
        return [exchanges[i] for i in order]

    def _claude_found(self, exchange: _Exchange) -> list[str]:
        """The tools a ToolSearch answer names, best first: its ``tool_reference`` blocks, then
        any it says are already loaded ("Already available in this conversation: ...")."""
        prefix = self.plan.prefix
        content = (exchange.output or {}).get("content")
        found = [
            _bare(str(b.get("tool_name")), prefix)
            for b in _blocks(content)
            if b.get("type") == "tool_reference"
        ]
        text = _text_of(content) + "".join(_text_of([b]) for b in exchange.after)
        for name in re.findall(rf"{re.escape(prefix)}(\w+)", text):
            if name not in found:
                found.append(name)
        return found

    def _messages(self, record: ModelRequest, body: Mapping[str, Any], headers: Mapping[str, str]):
        problem = _messages_problem(body, headers)
        if problem:
            return self._fail(record, 400, problem)
        names = [str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, Mapping)]
        if "Bash" not in names:  # a title, a summary: not the agent's own loop
            record.kind = "side"
            return self._anthropic_answer(record, body, [{"type": "text", "text": "OK"}])
        record.kind = "main"
        exchanges = self._claude_exchanges(body)
        for exchange in exchanges:
            if exchange.action == "search" and exchange.output is not None:
                self.actions[exchange.call_id]["found"] = self._claude_found(exchange)
        action = self._next(exchanges, searching=CLAUDE_SEARCH in names)
        call_id = f"toolu_01Sm{record.number:014d}"
        if action["action"] == "search":
            self._record(record, {**action, "search_tool": CLAUDE_SEARCH}, call_id)
            query = {"query": action["query"], "max_results": self.plan.max_results}
            blocks = [
                {"type": "text", "text": f"Searching for a tool: {action['query']}."},
                {"type": "tool_use", "id": call_id, "name": CLAUDE_SEARCH, "input": query},
            ]
        elif action["action"] == "call":
            self._record(record, action, call_id)
            name = self.plan.prefix + action["tool"]
            blocks = [
                {"type": "text", "text": f"Calling {name}."},
                {"type": "tool_use", "id": call_id, "name": name, "input": action["arguments"]},
            ]
        else:
            self._record(record, action, None)
            blocks = [{"type": "text", "text": action["text"]}]
        return self._anthropic_answer(record, body, blocks)

    def _anthropic_answer(
        self, record: ModelRequest, body: Mapping[str, Any], blocks: list[dict[str, Any]]
    ) -> Response:
        stop = "tool_use" if any(b["type"] == "tool_use" for b in blocks) else "end_turn"
        usage = {
            "input_tokens": max(1, len(json.dumps(body)) // 4),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": max(1, len(json.dumps(blocks)) // 4),
        }
        message = {
            "id": f"msg_01Sm{record.number:016d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", ""),
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            return JSONResponse(message)
        events = [
            _sse(
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        **message,
                        "content": [],
                        "stop_reason": None,
                        "usage": {**usage, "output_tokens": 1},
                    },
                },
            )
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                opening: dict[str, Any] = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"])]
            else:
                opening = {**block, "input": {}}
                deltas = [
                    {"type": "input_json_delta", "partial_json": p}
                    for p in _pieces(json.dumps(block["input"]))
                ]
            start = {"type": "content_block_start", "index": index, "content_block": opening}
            events.append(_sse("content_block_start", start))
            for delta in deltas:
                data = {"type": "content_block_delta", "index": index, "delta": delta}
                events.append(_sse("content_block_delta", data))
            events.append(
                _sse("content_block_stop", {"type": "content_block_stop", "index": index})
            )
        events.append(
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": usage["output_tokens"]},
                },
            )
        )
        events.append(_sse("message_stop", {"type": "message_stop"}))
        return StreamingResponse(iter(events), media_type="text/event-stream; charset=utf-8")

    # ------------------------------------------------------------------ Responses (Codex)

    def _codex_exchanges(self, body: Mapping[str, Any]) -> list[_Exchange]:
        exchanges: dict[str, _Exchange] = {}
        order: list[str] = []
        calls = ("function_call", "custom_tool_call", "tool_search_call")
        outputs = ("function_call_output", "custom_tool_call_output", "tool_search_output")
        for item in body.get("input") or []:
            if not isinstance(item, Mapping):
                continue
            ident = str(item.get("call_id"))
            if item.get("type") in calls and ident in self.actions:
                mine = self.actions[ident]
                exchanges[ident] = _Exchange(ident, mine["action"], mine["tool"])
                order.append(ident)
            elif item.get("type") in outputs and ident in exchanges:
                exchanges[ident].output = item
        return [exchanges[i] for i in order]

    def _codex_found(self, exchange: _Exchange) -> list[str]:
        """The tools a ``tool_search_output`` holds, or the names a code-mode search printed,
        best first."""
        item = exchange.output or {}
        prefix = self.plan.prefix
        if item.get("type") == "tool_search_output":
            found = []
            for tool in _responses_tools({"tools": item.get("tools") or []}):
                if tool.get("type") == "function" and tool.get("namespace") == prefix[:-2]:
                    found.append(str(tool.get("name")))
            return found
        printed = _codex_output(item.get("output"))
        try:
            names = json.loads(printed)
        except ValueError:
            return []
        return [_bare(str(n), prefix) for n in names] if isinstance(names, list) else []

    def _responses(self, record: ModelRequest, body: Mapping[str, Any], headers: Mapping[str, str]):
        problem = _responses_problem(body, headers) or _unanswered_search(body)
        if problem:
            return self._fail(record, 400, problem)
        try:
            meta = json.loads(headers.get("x-codex-turn-metadata") or "{}")
        except ValueError:
            meta = {}
        n = record.number
        if isinstance(meta, Mapping) and meta.get("request_kind") not in (None, "turn"):
            record.kind = "side"
            return self._responses_answer(body, n, [_message_item(n, "OK")])
        record.kind = "main"
        tools = _responses_tools(body)
        search = next((t for t in tools if t.get("type") == "tool_search"), None)
        exec_tool = next(
            (t for t in tools if t.get("type") == "custom" and t.get("name") == "exec"), None
        )
        code_search = exec_tool is not None and "ALL_TOOLS" in str(exec_tool.get("description"))
        exchanges = self._codex_exchanges(body)
        for exchange in exchanges:
            if exchange.action == "search" and exchange.output is not None:
                self.actions[exchange.call_id]["found"] = self._codex_found(exchange)
        action = self._next(exchanges, searching=search is not None or code_search)
        call_id = f"call_Sm{n:08d}"
        prefix = self.plan.prefix
        if action["action"] == "search" and search is not None:
            self._record(record, {**action, "search_tool": "tool_search"}, call_id)
            arguments = {"query": action["query"], "limit": self.plan.max_results}
            item: dict[str, Any] = {
                "type": "tool_search_call",
                "id": f"tsc_Sm{n:08d}",
                "call_id": call_id,
                "status": "completed",
                "execution": "client",
                "arguments": arguments,
            }
        elif action["action"] == "search":
            self._record(record, {**action, "search_tool": "ALL_TOOLS"}, call_id)
            item = _exec_item(n, call_id, _all_tools_filter(action["query"], self.plan))
        elif action["action"] == "call" and exec_tool is not None:
            self._record(record, action, call_id)
            arguments = json.dumps(action["arguments"], ensure_ascii=False)
            source = (
                f"const r = await tools.{prefix}{action['tool']}({arguments});\n"
                "text(JSON.stringify(r));\n"
            )
            item = _exec_item(n, call_id, source)
        elif action["action"] == "call":
            self._record(record, action, call_id)
            item = {
                "type": "function_call",
                "id": f"fc_Sm{n:08d}",
                "call_id": call_id,
                "status": "completed",
                "namespace": prefix[:-2],
                "name": action["tool"],
                "arguments": json.dumps(action["arguments"], ensure_ascii=False),
            }
        else:
            self._record(record, action, None)
            item = _message_item(n, action["text"])
        return self._responses_answer(body, n, [item])

    def _responses_answer(
        self, body: Mapping[str, Any], n: int, items: list[dict[str, Any]]
    ) -> Response:
        prompt = max(1, len(json.dumps(body)) // 4)
        output = max(1, len(json.dumps(items)) // 4)
        response = {
            "id": f"resp_Sm{n:08d}",
            "object": "response",
            "created_at": 1_760_000_000 + n,
            "status": "completed",
            "model": body.get("model", ""),
            "output": items,
            "usage": {
                "input_tokens": prompt,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": output,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": prompt + output,
            },
        }
        if not body.get("stream"):
            return JSONResponse(response)
        pending = {**response, "status": "in_progress", "output": [], "usage": None}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": pending},
            {"type": "response.in_progress", "response": pending},
        ]
        for index, item in enumerate(items):
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": item}
            )
            if item["type"] == "message":
                text = item["content"][0]["text"]
                at = {"item_id": item["id"], "output_index": index, "content_index": 0}
                events += [
                    {"type": "response.output_text.delta", **at, "delta": p} for p in _pieces(text)
                ]
                events.append({"type": "response.output_text.done", **at, "text": text})
            events.append(
                {"type": "response.output_item.done", "output_index": index, "item": item}
            )
        events.append({"type": "response.completed", "response": response})
        chunks = [_sse(e["type"], {**e, "sequence_number": s}) for s, e in enumerate(events)]
        return StreamingResponse(iter(chunks), media_type="text/event-stream")


def _message_item(n: int, text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": f"msg_Sm{n:08d}",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def _exec_item(n: int, call_id: str, source: str) -> dict[str, Any]:
    return {
        "type": "custom_tool_call",
        "id": f"ctc_Sm{n:08d}",
        "call_id": call_id,
        "status": "completed",
        "name": "exec",
        "input": source,
    }


def _stems(query: str) -> list[str]:
    """The query's words, stop words left out, plural and past endings cut ("saved" -> "sav")."""
    stems = []
    for word in re.findall(r"[a-z0-9]+", query.lower()):
        if word in STOPWORDS:
            continue
        for ending in ("ing", "ed", "s"):
            if word.endswith(ending) and len(word) - len(ending) >= 3:
                word = word[: -len(ending)]
                break
        stems.append(word)
    return stems


def _all_tools_filter(query: str, plan: McpPlan) -> str:
    """Code mode's search: the JavaScript a model runs to filter ``ALL_TOOLS`` by its words. A
    word counts where a word of the tool's name (underscores read as spaces) or of its summary
    (the description's first paragraph: the rest repeats the server's instructions and the
    declaration, the same for every tool of a server) starts with it; in the name it counts
    three times. Best first, ties in ``ALL_TOOLS`` order, at most ``plan.max_results`` names."""
    return (
        f"const stems = {json.dumps(_stems(query))};\n"
        'const has = (text, stem) => new RegExp("\\\\b" + stem).test(text);\n'
        "const found = ALL_TOOLS.map((t) => {\n"
        '  const name = t.name.toLowerCase().replace(/_/g, " ");\n'
        '  const summary = (t.description || "").split("\\n\\n")[0].toLowerCase();\n'
        "  const score = stems.reduce(\n"
        "    (s, w) => s + (has(name, w) ? 3 : 0) + (has(summary, w) ? 1 : 0), 0);\n"
        "  return { name: t.name, score };\n"
        "}).filter((t) => t.score > 0).sort((a, b) => b.score - a.score)"
        f".slice(0, {plan.max_results});\n"
        "text(JSON.stringify(found.map((t) => t.name)));\n"
    )


def _unanswered_search(body: Mapping[str, Any]) -> str | None:
    """A ``tool_search_call`` without its ``tool_search_output`` (the Responses API's rule)."""
    calls, answered = [], set()
    for item in body.get("input") or []:
        if isinstance(item, Mapping) and item.get("type") == "tool_search_call":
            calls.append(str(item.get("call_id")))
        elif isinstance(item, Mapping) and item.get("type") == "tool_search_output":
            answered.add(str(item.get("call_id")))
    missing = [c for c in calls if c not in answered]
    return f"No tool search output found for call {missing[0]}." if missing else None


def _codex_output(output: Any) -> str:
    """What a Codex tool call returned (a function call) or printed (code mode's ``exec``),
    without the header Codex puts first ("Wall time: 0.01 seconds", "Output:"): a string, or
    content items whose first is the header."""
    text = _text_of(output)
    _, mark, rest = text.partition("Output:")
    if not mark or not text.startswith(("Script", "Wall time")):
        return text
    return rest.removeprefix("\n")


# ---------------------------------------------------------------------- results


def _result(run_agent: str, output: Any) -> ToolResult:
    """What the host handed the model for a tomc call, as the model can read it."""
    if run_agent == "claude":
        block = output or {}
        text = _text_of(block.get("content"))
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        return ToolResult(
            str(block.get("tool_use_id")),
            text,
            block.get("is_error"),
            data if isinstance(data, dict) else None,
        )
    item = output or {}
    # Codex puts a header first ("Wall time: ...", "Output:"), then what the call returned (a
    # function call) or what the script printed (code mode: the whole MCP result).
    text = _codex_output(item.get("output"))
    try:
        whole = json.loads(text)
    except ValueError:
        return ToolResult(str(item.get("call_id")), text)
    if isinstance(whole, Mapping) and "content" in whole:  # the MCP result, whole
        message = "".join(str(p.get("text", "")) for p in _blocks(whole.get("content")))
        structured = whole.get("structuredContent")
        return ToolResult(
            str(item.get("call_id")),
            message,
            bool(whole.get("isError")),
            structured if isinstance(structured, dict) else None,
        )
    return ToolResult(
        str(item.get("call_id")), text, None, dict(whole) if isinstance(whole, Mapping) else None
    )


def _outcomes(agent: str, model: SearchingModel) -> list[StepOutcome]:
    """Per step of the plan, from the conversation as its last request holds it: the search
    (if any), what it found and the call's result."""
    last = next((r for r in reversed(model.requests) if r.kind == "main" and r.status < 400), None)
    if last is None:
        return []
    body = last.body
    exchanges = model._claude_exchanges(body) if agent == "claude" else model._codex_exchanges(body)
    outcomes: list[StepOutcome] = []
    search: dict[str, Any] | None = None
    for exchange in exchanges:
        action = model.actions[exchange.call_id]
        if exchange.action == "search":
            search = action
            continue
        step = model.plan.steps[len(outcomes)]
        result = _result(agent, exchange.output) if exchange.output is not None else None
        if search is None:
            outcomes.append(StepOutcome(step.tool, None, None, result))
        else:
            found = search.get("found")
            outcomes.append(
                StepOutcome(step.tool, search["query"], found, result, search["search_tool"])
            )
        search = None
    if search is not None:  # a last search that found nothing to call
        step = model.plan.steps[len(outcomes)]
        found = search.get("found")
        outcomes.append(StepOutcome(step.tool, search["query"], found, None, search["search_tool"]))
    return outcomes


# ---------------------------------------------------------------------- running


def run_mcp_session(host: Host, plan: McpPlan, *, timeout_s: float = 180.0) -> McpRun:
    binary = agent_binary(host.agent)
    if binary is None:
        raise FileNotFoundError(f"{host.agent} is not installed (npm ci at the repository root)")
    tomc = tomc_binary()
    base = Path(tempfile.mkdtemp(prefix=f"tomc-mcp-{host.name}-", dir=_temp_root()))
    home, work = base / "home", base / "work"
    home.mkdir()
    work.mkdir()
    env = _base_env(home)
    # `tomc` and the agent on PATH, as for a user who installed both.
    env["PATH"] = os.pathsep.join([str(Path(tomc).parent), str(Path(binary).parent), env["PATH"]])
    try:
        with SearchingModel(plan) as model:
            if host.agent == "claude":
                env["ANTHROPIC_BASE_URL"] = model.root_url
                env["ANTHROPIC_API_KEY"] = "sk-ant-api03-fake-key-for-offline-tests"
                added = subprocess.run(
                    [binary, *CLAUDE_README_COMMAND],
                    cwd=work,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=True,
                )
                registration = added.stdout + added.stderr
                command = [
                    binary,
                    "-p",
                    plan.task(),
                    "--allowedTools",
                    f"mcp__{plan.server}",
                    "--output-format",
                    "text",
                ]
            else:
                env["OPENAI_API_KEY"] = "sk-proj-fake-key-for-offline-tests"
                block = CODEX_README_BLOCK.format(tomc=tomc, home=env["TOMC_HOME"])
                chosen = f'model = "{host.model}"\n' if host.model else ""
                registration = chosen + _codex_config(model.base_url) + "\n" + block
                (home / ".codex").mkdir()
                (home / ".codex" / "config.toml").write_text(registration)
                command = [binary, "exec", "--skip-git-repo-check", "-C", str(work), plan.task()]
            exit_code, stdout, stderr, seconds = run_command(command, work, env, timeout_s)
            requests = list(model.requests)
            steps = _outcomes(host.agent, model)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return McpRun(host, exit_code, stdout, stderr, seconds, requests, registration, steps)
