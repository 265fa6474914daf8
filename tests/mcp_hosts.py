"""Run ``tomc mcp`` INSIDE the real Claude Code and Codex CLIs, offline.

``run_mcp_session(agent, script)`` registers the server exactly as the README says (Claude Code:
``claude mcp add tomc -- tomc mcp`` with the venv's ``tomc`` on ``PATH``; Codex: the README's
``[mcp_servers.tomc]`` block appended to the config that points Codex at the scripted upstream),
then runs the agent once on an :class:`agent_upstream.McpScript`: the scripted "model" calls
the MCP tools in order, and the upstream records every request, so the test can read back what
the host handed the model for each call (:func:`tool_results`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent_upstream import AgentRequest, AgentUpstream, McpScript
from real_agents import (
    _base_env,
    _codex_config,
    _temp_root,
    agent_binary,
    run_command,
    tomc_binary,
)

__all__ = [
    "CLAUDE_README_COMMAND",
    "CODEX_README_BLOCK",
    "McpRun",
    "ToolResult",
    "run_mcp_session",
    "tool_results",
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


@dataclass
class ToolResult:
    """What the host handed the model for one tool call."""

    call_id: str
    text: str
    is_error: bool | None  # Claude Code says; Codex's exec output does not


@dataclass
class McpRun:
    agent: str
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    requests: list[AgentRequest]
    registration: str  # what `claude mcp add` printed, or the Codex config written

    def explain(self) -> str:
        return (
            f"{self.agent}: exit {self.exit_code} in {self.seconds:.1f}s, "
            f"{len(self.requests)} requests\nstdout tail: {self.stdout[-600:]}\n"
            f"stderr tail: {self.stderr[-1500:]}\nregistration: {self.registration[-600:]}"
        )


def run_mcp_session(agent: str, script: McpScript, *, timeout_s: float = 120.0) -> McpRun:
    binary = agent_binary(agent)
    if binary is None:
        raise FileNotFoundError(f"{agent} is not installed (npm ci at the repository root)")
    tomc = tomc_binary()
    base = Path(tempfile.mkdtemp(prefix=f"tomc-mcp-{agent}-", dir=_temp_root()))
    home, work = base / "home", base / "work"
    home.mkdir()
    work.mkdir()
    env = _base_env(home)
    # `tomc` and the agent on PATH, as for a user who installed both.
    env["PATH"] = os.pathsep.join([str(Path(tomc).parent), str(Path(binary).parent), env["PATH"]])
    try:
        with AgentUpstream(script) as upstream:
            if agent == "claude":
                env["ANTHROPIC_BASE_URL"] = upstream.root_url
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
                    script.task(),
                    "--allowedTools",
                    f"mcp__{script.server}",
                    "--output-format",
                    "text",
                ]
            else:
                env["OPENAI_API_KEY"] = "sk-proj-fake-key-for-offline-tests"
                block = CODEX_README_BLOCK.format(tomc=tomc, home=env["TOMC_HOME"])
                registration = _codex_config(upstream.base_url) + "\n" + block
                (home / ".codex").mkdir()
                (home / ".codex" / "config.toml").write_text(registration)
                command = [binary, "exec", "--skip-git-repo-check", "-C", str(work), script.task()]
            exit_code, stdout, stderr, seconds = run_command(command, work, env, timeout_s)
            requests = list(upstream.requests)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return McpRun(agent, exit_code, stdout, stderr, seconds, requests, registration)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def tool_results(run: McpRun) -> list[ToolResult]:
    """Every tool result the host sent the model, in call order (each once)."""
    seen: dict[str, ToolResult] = {}
    for request in run.requests:
        body = request.body if isinstance(request.body, Mapping) else {}
        if run.agent == "claude":
            for message in body.get("messages") or []:
                if not isinstance(message, Mapping) or message.get("role") != "user":
                    continue
                content = message.get("content")
                for block in content if isinstance(content, list) else []:
                    if isinstance(block, Mapping) and block.get("type") == "tool_result":
                        key = str(block.get("tool_use_id"))
                        seen.setdefault(
                            key,
                            ToolResult(key, _text_of(block.get("content")), block.get("is_error")),
                        )
        else:
            for item in body.get("input") or []:
                if isinstance(item, Mapping) and item.get("type") == "custom_tool_call_output":
                    key = str(item.get("call_id"))
                    seen.setdefault(key, ToolResult(key, _text_of(item.get("output")), None))
    return sorted(seen.values(), key=lambda r: r.call_id)


def parse_json(text: str) -> Any:
    return json.loads(text)
