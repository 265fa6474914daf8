"""Realistic request bodies per wire format, SDK clients on the fake provider, and helpers.

- :func:`claude_code_request`: a Claude Code-like ``/v1/messages`` body (attribution and system
  blocks with ``cache_control``, Read/Bash/Edit tools, ``<system-reminder>`` context, tool_use and
  tool_result turns, thinking blocks with signatures, ``metadata.user_id``).
- :func:`codex_request`: a Codex-like ``/v1/responses`` body (base instructions, a developer
  permissions message, environment context, reasoning items with ``encrypted_content``,
  ``function_call`` / ``function_call_output`` pairs, optionally a ``compaction`` item in the
  middle where Codex compacted before).
- :func:`chat_agent_request`: a coding agent's Chat Completions body with parallel tool calls.

Every builder is deterministic: the same arguments give the same body.
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from types import SimpleNamespace
from typing import Any

import anthropic
import httpx2
import openai

from fake_providers import FakeProvider
from tomc.chat import AutomaticChatSession

MODULES = ("retry.py", "client.py", "backoff.py", "config.py", "worker.py", "queue.py")
# A 1x1 transparent PNG: what Claude Code's Read returns for an image file.
PNG_1X1 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


def _token(*parts: object, length: int = 24) -> str:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest()
    return base64.b32encode(digest).decode().lower()[:length]


def _signature(*parts: object) -> str:
    digest = hashlib.sha256("/".join(map(str, parts)).encode()).digest() * 6
    return "EqQBCkYIBxgCKkA" + base64.b64encode(digest).decode()


def source_listing(turn: int, step: int, lines: int = 18) -> str:
    """A file as Claude Code's Read shows it: right-aligned line numbers, a tab, the line."""
    module = MODULES[(turn + step) % len(MODULES)]
    start = 1 + step * lines
    body = []
    for k in range(lines):
        number = start + k
        if k == 3:
            text = f"MAX_RETRIES_{turn} = {turn % 5 + 2}"
        elif k % 4 == 0:
            text = f"def handle_{turn}_{k}(request, attempt={k % 3}):"
        else:
            text = f"    return backoff(attempt * {k}, cap={turn * 10 + k})  # {module}"
        body.append(f"{number:>6}\t{text}")
    return "\n".join(body)


def shell_output(turn: int, step: int, lines: int = 14) -> str:
    """What a test run or grep prints."""
    out = [f"$ pytest tests/test_{MODULES[step % len(MODULES)][:-3]}.py -q"]
    for k in range(lines):
        status = "FAILED" if (turn + k) % 7 == 0 else "PASSED"
        out.append(f"tests/test_case_{turn}_{k}.py::test_retry_{k} {status} [{k * 7 % 100:>3}%]")
    out.append(f"{lines - 2} passed, 2 failed in {turn + step + 1}.{k:02d}s")
    return "\n".join(out)


# ---------------------------------------------------------------------- Anthropic Messages

CLAUDE_TOOLS = [
    {
        "name": "Read",
        "description": "Reads a file from the local filesystem.",
        "input_schema": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string", "description": "The absolute path to the file"},
                "offset": {"type": "number"},
                "limit": {"type": "number"},
            },
            "required": ["file_path"],
            "additionalProperties": False,
        },
    },
    {
        "name": "Bash",
        "description": "Executes a given bash command with an optional timeout.",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "description": {"type": "string"},
                "timeout": {"type": "number"},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    },
    {
        "name": "Edit",
        "description": "Performs exact string replacements in files.",
        "input_schema": {
            "type": "object",
            "properties": {
                "file_path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["file_path", "old_string", "new_string"],
        },
        "cache_control": {"type": "ephemeral"},
    },
]
CLAUDE_SYSTEM_BLOCKS = [
    {
        "type": "text",
        "text": "x-anthropic-billing-header: cc_version=2.1.92.a1f; cc_entrypoint=cli; cch=5f3c1;",
    },
    {
        "type": "text",
        "text": "You are Claude Code, Anthropic's official CLI for Claude.",
        "cache_control": {"type": "ephemeral"},
    },
    {
        "type": "text",
        "text": (
            "You are an interactive CLI tool that helps users with software engineering tasks.\n"
            "# Tone and style\nBe concise. Use the Read tool before editing a file.\n"
            "# Environment\nWorking directory: /home/dev/retrykit\nPlatform: linux\n"
            "Is directory a git repo: Yes\n"
        ),
        "cache_control": {"type": "ephemeral"},
    },
]
CLAUDE_SYSTEM_TEXT = "\n\n".join(block["text"] for block in CLAUDE_SYSTEM_BLOCKS)
SESSION_ID = "c31ac7cf-56a7-4c0a-b363-2b726377687d"
CLAUDE_BETAS = "claude-code-20250219,interleaved-thinking-2025-05-14,effort-2025-11-24"


def _claude_step(turn: int, step: int, thinking: bool) -> list[dict[str, Any]]:
    call_id = f"toolu_01{_token('toolu', turn, step, length=22)}"
    module = MODULES[(turn + step) % len(MODULES)]
    if step % 2 == 0:
        name, tool_input = "Read", {"file_path": f"/home/dev/retrykit/src/{module}"}
        output: Any = source_listing(turn, step)
    else:
        command = f"python -m pytest tests/test_{module[:-3]}.py -q"
        name, tool_input = "Bash", {"command": command, "description": "Run the tests"}
        output = shell_output(turn, step)
    blocks: list[dict[str, Any]] = []
    if thinking:
        blocks.append(
            {
                "type": "thinking",
                "thinking": f"Turn {turn}, step {step}: I need to look at {module} next.",
                "signature": _signature("thinking", turn, step),
            }
        )
    blocks.append({"type": "text", "text": f"Let me check {module} (step {step})."})
    blocks.append({"type": "tool_use", "id": call_id, "name": name, "input": tool_input})
    result = {"type": "tool_result", "tool_use_id": call_id, "content": output}
    return [{"role": "assistant", "content": blocks}, {"role": "user", "content": [result]}]


def claude_code_messages(
    turns: int, *, steps: int = 3, thinking: bool = True, tail: str = "prompt"
) -> list[dict[str, Any]]:
    """``turns`` finished tasks, then ``tail``: ``"prompt"`` (a new user prompt), ``"tool_result"``
    (a task in progress whose last Read returned text) or ``"image"`` (whose last Read returned
    an image)."""
    reminder = (
        "<system-reminder>\nAs you answer the user's questions, you can use the following "
        "context:\n# claudeMd\nCodebase and user instructions are shown below.\n"
        "Contents of /home/dev/retrykit/CLAUDE.md:\nRun pytest before committing.\n"
        "</system-reminder>"
    )
    messages: list[dict[str, Any]] = []
    for turn in range(turns):
        prompt = f"Task {turn}: the retry counter in {MODULES[turn % len(MODULES)]} resets early."
        content: list[dict[str, Any]] = [{"type": "text", "text": prompt}]
        if turn == 0:
            content.insert(0, {"type": "text", "text": reminder})
        if messages and messages[-1]["role"] == "user":
            messages[-1]["content"].extend(content)
        else:
            messages.append({"role": "user", "content": content})
        for step in range(steps):
            steps_messages = _claude_step(turn, step, thinking)
            if messages[-1]["role"] == "user" and step == 0:
                messages.append(steps_messages[0])
                messages.append(steps_messages[1])
            else:
                messages.extend(steps_messages)
        answer: list[dict[str, Any]] = []
        if thinking:
            answer.append(
                {"type": "thinking", "thinking": "", "signature": _signature("answer", turn)}
            )
        answer.append(
            {"type": "text", "text": f"Task {turn} done: MAX_RETRIES_{turn} is {turn % 5 + 2}."}
        )
        messages.append({"role": "assistant", "content": answer})
    final = "Now make the retry cap configurable and report which tests still fail."
    messages.append({"role": "user", "content": [{"type": "text", "text": final}]})
    if tail != "prompt":
        step = _claude_step(turns, 0, thinking)
        if tail == "image":
            block = step[0]["content"][-1]
            block["input"] = {"file_path": "/home/dev/retrykit/docs/retry-diagram.png"}
            image = {"type": "base64", "media_type": "image/png", "data": PNG_1X1}
            step[1]["content"][0]["content"] = [{"type": "image", "source": image}]
        messages.extend(step)
    # Claude Code marks the newest block for caching.
    last = messages[-1]["content"][-1]
    last["cache_control"] = {"type": "ephemeral"}
    return messages


def claude_code_request(
    turns: int = 12,
    *,
    steps: int = 3,
    thinking: bool = True,
    tail: str = "prompt",
    system: str = "blocks",
    stream: bool = False,
) -> dict[str, Any]:
    """The keyword arguments of ``client.messages.create`` for a Claude Code-like request."""
    user_id = json.dumps(
        {"device_id": _token("device", length=64), "account_uuid": "", "session_id": SESSION_ID}
    )
    body: dict[str, Any] = {
        "model": "claude-opus-4-8",
        "max_tokens": 32000,
        "system": [dict(block) for block in CLAUDE_SYSTEM_BLOCKS]
        if system == "blocks"
        else CLAUDE_SYSTEM_TEXT,
        "tools": CLAUDE_TOOLS,
        "messages": claude_code_messages(turns, steps=steps, thinking=thinking, tail=tail),
        "metadata": {"user_id": user_id},
    }
    if thinking:
        body["thinking"] = {"type": "adaptive"}
    if stream:
        body["stream"] = True
    return body


def summarisation_request(turns: int = 6) -> dict[str, Any]:
    """Claude Code's own compaction request: the history plus its summary instructions."""
    body = claude_code_request(turns, thinking=False)
    instructions = (
        "CRITICAL: Respond with TEXT ONLY. Do NOT call any tools.\n\n"
        "Your task is to create a detailed summary of the conversation so far, paying close "
        "attention to the user's explicit requests and your previous actions.\n"
        "This summary should be thorough in capturing technical details, code patterns, and "
        "architectural decisions that would be essential for continuing development work "
        "without losing context.\n\n<analysis>...</analysis>\n<summary>\n"
        "1. Primary Request and Intent:\n2. Key Technical Concepts:\n"
        "3. Files and Code Sections:\n7. Pending Tasks:\n8. Current Work:\n</summary>"
    )
    body["messages"][-1]["content"].append({"type": "text", "text": instructions})
    body["max_tokens"] = 20000
    return body


# ---------------------------------------------------------------------- OpenAI Responses

CODEX_INSTRUCTIONS = (
    "You are Codex, based on GPT-5. You are running as a coding agent in the Codex CLI on a "
    "user's computer.\n\n## General\n- Prefer `rg` over `grep`.\n- Keep changes minimal.\n"
    "## Editing constraints\n- Default to ASCII when editing or creating files.\n"
)
CODEX_TOOLS = [
    {
        "type": "function",
        "name": "shell",
        "description": "Runs a shell command and returns its output.",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "array", "items": {"type": "string"}},
                "workdir": {"type": "string"},
                "timeout_ms": {"type": "number"},
            },
            "required": ["command"],
            "additionalProperties": False,
        },
    },
    {
        "type": "function",
        "name": "update_plan",
        "description": "Updates the task plan.",
        "strict": False,
        "parameters": {
            "type": "object",
            "properties": {"plan": {"type": "array", "items": {"type": "object"}}},
            "required": ["plan"],
            "additionalProperties": False,
        },
    },
]
CODEX_SESSION = "0199a0b2-7c4e-7d21-9f3a-5be2c1d0e4f7"


def _message(role: str, text: str) -> dict[str, Any]:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text}]}


def _reasoning(*parts: object) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": f"**Inspecting {parts[-1]}**"}],
        "encrypted_content": "gAAAAABo" + _token("reasoning", *parts, length=48) * 3,
    }


def _codex_turn(turn: int, steps: int) -> list[dict[str, Any]]:
    items = [_message("user", f"Task {turn}: fix the retry cap in {MODULES[turn % 6]}.")]
    for step in range(steps):
        call_id = f"call_{_token('call', turn, step, length=24)}"
        module = MODULES[(turn + step) % len(MODULES)]
        if step % 2 == 0:
            command = ["bash", "-lc", f"sed -n '1,40p' src/{module}"]
            output = source_listing(turn, step)
        else:
            command = ["bash", "-lc", f"pytest tests/test_{module[:-3]}.py -q"]
            output = shell_output(turn, step)
        arguments = json.dumps({"command": command, "workdir": "/home/dev/retrykit"})
        items.append(_reasoning(turn, step, module))
        items.append(
            {"type": "function_call", "name": "shell", "arguments": arguments, "call_id": call_id}
        )
        items.append({"type": "function_call_output", "call_id": call_id, "output": output})
    items.append(_reasoning(turn, "answer", "the result"))
    items.append(_message("assistant", f"Task {turn} done: MAX_RETRIES_{turn} = {turn % 5 + 2}."))
    return items


def codex_items(
    turns: int, *, steps: int = 3, compacted_turns: int = 0, tail: str = "prompt"
) -> list[dict[str, Any]]:
    """The ``input`` list: initial context, ``compacted_turns`` turns that Codex compacted
    before (their user messages retained, then one ``compaction`` item), ``turns`` full turns,
    then ``tail``: ``"prompt"`` (a new user message) or ``"tool_output"`` (a step in progress)."""
    items = [
        _message(
            "developer",
            "<permissions instructions>\nFilesystem sandboxing: workspace-write.\n"
            "Approval policy: on-request.\n</permissions instructions>",
        ),
        _message(
            "user",
            "<environment_context>\n  <cwd>/home/dev/retrykit</cwd>\n  <shell>bash</shell>\n"
            "</environment_context>",
        ),
    ]
    if compacted_turns:
        for turn in range(compacted_turns):
            items.append(_message("user", f"Task {turn}: fix the retry cap in {MODULES[turn]}."))
        items.append(
            {
                "type": "compaction",
                "encrypted_content": "gAAAAABpCompacted" + _token("compaction", length=64) * 4,
            }
        )
    for turn in range(compacted_turns, compacted_turns + turns):
        items.extend(_codex_turn(turn, steps))
    items.append(_message("user", "Now make the cap configurable and rerun the failing tests."))
    if tail == "tool_output":
        items.extend(_codex_turn(99, 1)[1:4])
    return items


def codex_request(
    turns: int = 12,
    *,
    steps: int = 3,
    compacted_turns: int = 0,
    tail: str = "prompt",
    stream: bool = False,
) -> dict[str, Any]:
    """The keyword arguments of ``client.responses.create`` for a Codex-like request."""
    body: dict[str, Any] = {
        "model": "gpt-5.3-codex",
        "instructions": CODEX_INSTRUCTIONS,
        "input": codex_items(turns, steps=steps, compacted_turns=compacted_turns, tail=tail),
        "tools": CODEX_TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": False,
        "reasoning": {"effort": "medium", "summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "prompt_cache_key": CODEX_SESSION,
        "text": {"verbosity": "low"},
    }
    if stream:
        body["stream"] = True
    return body


# ---------------------------------------------------------------------- Chat Completions

CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {key: {"type": "string"}},
                "required": [key],
            },
        },
    }
    for name, description, key in (
        ("read_file", "Read a file of the repository", "path"),
        ("run_shell", "Run a shell command in the repository", "command"),
    )
]


def chat_agent_request(turns: int = 12, *, steps: int = 2) -> dict[str, Any]:
    """A coding agent's Chat Completions request: each step makes two parallel tool calls."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent working in /home/dev/retrykit."}
    ]
    for turn in range(turns):
        messages.append(
            {"role": "user", "content": f"Task {turn}: fix the retry cap in {MODULES[turn % 6]}."}
        )
        for step in range(steps):
            module = MODULES[(turn + step) % len(MODULES)]
            ids = [f"call_{_token('chat', turn, step, k, length=24)}" for k in range(2)]
            calls = [
                {
                    "id": ids[0],
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": module})},
                },
                {
                    "id": ids[1],
                    "type": "function",
                    "function": {
                        "name": "run_shell",
                        "arguments": json.dumps({"command": f"pytest tests/test_{module[:-3]}.py"}),
                    },
                },
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            messages.append(
                {"role": "tool", "tool_call_id": ids[0], "content": source_listing(turn, step)}
            )
            messages.append(
                {"role": "tool", "tool_call_id": ids[1], "content": shell_output(turn, step)}
            )
        messages.append(
            {"role": "assistant", "content": f"Task {turn} done: cap is {turn % 5 + 2}."}
        )
    messages.append({"role": "user", "content": "Now make the cap configurable."})
    return {
        "model": "gpt-4o",
        "messages": messages,
        "tools": CHAT_TOOLS,
        "tool_choice": "auto",
        "max_completion_tokens": 4096,
        "temperature": 0.2,
    }


# ---------------------------------------------------------------------- sizes and sessions

HISTORY_KEYS = {"chat": "messages", "messages": "messages", "responses": "input"}


def request_tokens(api: str, body: Mapping[str, Any]) -> int:
    """What a session estimates for this request (a model without a published tokenizer)."""
    probe = AutomaticChatSession(deployment_context_limit=10**9, backoff_thresholds=())
    return probe.prepare_request({**body, "model": "probe"}, api=api).decision.tokens_before


def window_for(api: str, body: Mapping[str, Any], share: float = 0.6) -> int:
    """A deployment limit at which this request does not fit and must be compiled."""
    reserve = body.get("max_tokens") or body.get("max_output_tokens") or 0
    reserve = reserve or body.get("max_completion_tokens") or 8192
    return int(request_tokens(api, body) * share) + reserve


def tight_session(api: str, body: Mapping[str, Any], **kwargs: Any) -> AutomaticChatSession:
    """A session whose window makes this request compile (no back-off pauses)."""
    kwargs.setdefault("deployment_context_limit", window_for(api, body))
    kwargs.setdefault("backoff_thresholds", ())
    return AutomaticChatSession(**kwargs)


# ---------------------------------------------------------------------- comparing answers

# Ids, signatures and encrypted content carry the request's number, so two answers differ there.
PER_REQUEST = frozenset({"id", "call_id", "signature", "encrypted_content"})
# What the SDKs' stream helpers add to the objects they accumulate.
SDK_ADDED = frozenset({"parsed", "parsed_arguments", "parsed_output"})


def same_content(value: Any) -> Any:
    """``value`` without per-request ids and signatures, for comparing two answers."""
    if isinstance(value, dict):
        return {k: same_content(v) for k, v in value.items() if k not in PER_REQUEST | SDK_ADDED}
    if isinstance(value, list):
        return [same_content(v) for v in value]
    return value


# ---------------------------------------------------------------------- SDK clients


@contextmanager
def sdk_clients(fake: FakeProvider, **options: Any) -> Iterator[tuple[Any, Any]]:
    """``(anthropic.Anthropic, openai.OpenAI)`` on the fake, without retries or proxies.

    A set timeout (30 s unless given) also spares the Anthropic SDK its refusal of large
    ``max_tokens`` without streaming."""
    options.setdefault("timeout", 30.0)
    with httpx2.Client(trust_env=False) as http:  # loopback only, whatever the environment says
        yield (
            anthropic.Anthropic(
                api_key="sk-ant-test",
                base_url=fake.anthropic_url,
                max_retries=0,
                http_client=http,
                **options,
            ),
            openai.OpenAI(
                api_key="sk-test",
                base_url=fake.base_url,
                max_retries=0,
                http_client=http,
                **options,
            ),
        )


@asynccontextmanager
async def async_sdk_clients(fake: FakeProvider, **options: Any) -> AsyncIterator[tuple[Any, Any]]:
    """``(anthropic.AsyncAnthropic, openai.AsyncOpenAI)`` on the fake."""
    options.setdefault("timeout", 30.0)
    async with httpx2.AsyncClient(trust_env=False) as http:
        yield (
            anthropic.AsyncAnthropic(
                api_key="sk-ant-test",
                base_url=fake.anthropic_url,
                max_retries=0,
                http_client=http,
                **options,
            ),
            openai.AsyncOpenAI(
                api_key="sk-test",
                base_url=fake.base_url,
                max_retries=0,
                http_client=http,
                **options,
            ),
        )


def spy_client(client: Any, api: str) -> tuple[Any, list[Any]]:
    """A stand-in client whose only method is ``client``'s method for ``api``; the list keeps
    what each call returned, so a test can check the session hands back that very object."""
    returned: list[Any] = []
    method = {
        "chat": lambda: client.chat.completions.create,
        "messages": lambda: client.messages.create,
        "responses": lambda: client.responses.create,
    }[api]()
    if inspect.iscoroutinefunction(inspect.unwrap(method)):

        async def send(**kwargs: Any) -> Any:
            returned.append(await method(**kwargs))
            return returned[-1]

    else:

        def send(**kwargs: Any) -> Any:  # type: ignore[misc]
            returned.append(method(**kwargs))
            return returned[-1]

    resource = SimpleNamespace(create=send)
    spy = {
        "chat": lambda: SimpleNamespace(chat=SimpleNamespace(completions=resource)),
        "messages": lambda: SimpleNamespace(messages=resource),
        "responses": lambda: SimpleNamespace(responses=resource),
    }[api]()
    spy.default_headers = client.default_headers  # as the real client exposes them
    return spy, returned
