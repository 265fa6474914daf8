"""Drive the REAL agent CLIs (Claude Code, Codex) offline against :class:`AgentUpstream`.

``run_session("claude" | "codex", "direct" | "tomc", ...)`` runs one agent process on the
scripted task in a fresh temporary HOME and workspace (its own ``CLAUDE_CONFIG_DIR``,
``CODEX_HOME`` and ``TOMC_HOME``; telemetry, update checks and other nonessential traffic off),
either pointed straight at the fake upstream ("direct") or through ``tomc run claude|codex``
with no TOMC options but ``--port`` ("tomc"): the agent's own endpoint (``ANTHROPIC_BASE_URL``;
a custom Codex provider's ``base_url``) becomes the gateway's upstream, as it would for a user.
For "tomc" the driver starts ``tomc gateway serve`` itself first (so that ``tomc run`` uses it
and does not stop it), reads the gateway's ``GET /status.json`` after the agent ends, then stops
it.

Where the CLIs come from: ``$TOMC_AGENTS_BIN`` (a folder holding ``claude`` and ``codex``), else
``<repo>/node_modules/.bin`` (``npm ci`` at the repository root installs the pinned versions from
``package.json``), else ``PATH``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_upstream import (
    FINAL_MARK,
    AgentRequest,
    AgentUpstream,
    Script,
    write_workspace,
)
from realistic_probe import ProbeScore, probe_score

__all__ = [
    "AGENTS",
    "DEFAULT_SETTINGS",
    "RunResult",
    "agent_binary",
    "compare_headers",
    "mask_observations",
    "protected_parts",
    "run_session",
]

REPO = Path(__file__).resolve().parent.parent
AGENTS = ("claude", "codex")
#: The agents' own auto-compaction, shortened so that a session of about 40 tool steps makes
#: the agent compact itself when it talks to the provider directly. Identical in both modes.
DEFAULT_SETTINGS: Mapping[str, Mapping[str, Any]] = {
    # Claude Code's base prompt is about 20K tokens. It takes no window below 100,000 and
    # compacts at the window - 20,000 (output) - 13,000: at about 67K.
    "claude": {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "100000"},
    # Codex's base prompt is about 13K tokens; it compacts at this limit.
    "codex": {"model_auto_compact_token_limit": 60000},
}
#: Headers that legitimately differ between two runs of the same request.
PER_RUN_HEADERS = frozenset(
    {
        "content-length",
        "host",
        "x-claude-code-session-id",
        "x-stainless-retry-count",
        "x-stainless-timeout",
        "x-codex-window-id",
        "x-codex-turn-metadata",
        "x-client-request-id",
        "session-id",
        "session_id",
        "thread-id",
        "traceparent",
        "tracestate",
        "x-claude-code-agent-id",
    }
)
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "proxy-connection",
    }
)


def agent_binary(agent: str) -> str | None:
    """The CLI's executable, or ``None`` when it is not installed."""
    folder = os.environ.get("TOMC_AGENTS_BIN", "").strip()
    candidates = [Path(folder) / agent] if folder else []
    candidates.append(REPO / "node_modules" / ".bin" / agent)
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return str(path)
    return shutil.which(agent)


def tomc_binary() -> str:
    beside = Path(sys.executable).parent / "tomc"
    if beside.exists():
        return str(beside)
    venv = REPO / ".venv" / "bin" / "tomc"
    if venv.exists():
        return str(venv)
    found = shutil.which("tomc")
    if found is None:
        raise RuntimeError("the tomc command is not installed (make lint creates .venv)")
    return found


@dataclass
class RunResult:
    """One agent session and what the upstream saw."""

    agent: str
    mode: str
    command: list[str]
    exit_code: int | None
    stdout: str
    stderr: str
    seconds: float
    requests: list[AgentRequest]
    script: Script
    status: dict[str, Any] | None = None  # the gateway's /status.json (mode "tomc")
    gateway_log: str = ""
    base: str = ""  # the temporary folder (paths in bodies are normalised against it)
    ids: dict[str, str] = field(default_factory=dict)  # per-run ids seen, to normalise

    # ------------------------------------------------------------------ figures

    @property
    def model_calls(self) -> list[AgentRequest]:
        return [r for r in self.requests if r.kind in ("main", "compaction", "side")]

    @property
    def ok_calls(self) -> list[AgentRequest]:
        return [r for r in self.model_calls if r.status < 400]

    @property
    def main_calls(self) -> list[AgentRequest]:
        return [r for r in self.ok_calls if r.kind == "main"]

    @property
    def compactions(self) -> int:
        return sum(1 for r in self.ok_calls if r.kind == "compaction")

    @property
    def client_errors(self) -> list[AgentRequest]:
        return [r for r in self.requests if 400 <= r.status < 500]

    @property
    def finished(self) -> bool:
        return self.exit_code == 0 and FINAL_MARK in self.stdout

    @property
    def largest_prompt(self) -> int:
        return max((r.prompt_tokens for r in self.ok_calls), default=0)

    @property
    def mean_prompt(self) -> float:
        calls = self.ok_calls
        return sum(r.prompt_tokens for r in calls) / len(calls) if calls else 0.0

    @property
    def billed_input(self) -> float:
        return sum(r.billed_input for r in self.ok_calls)

    def billed_by_step(self) -> dict[int, float]:
        """Billed input so far at each tool step: through the request answered with step ``k``
        (the final answer counts as step ``steps + 1``); wherever a session might end."""
        out: dict[int, float] = {}
        total = 0.0
        for request in self.ok_calls:
            total += request.billed_input
            if request.kind != "main":
                continue
            step = self.script.steps + 1 if request.final else request.step
            if step is not None:
                out[step] = total
        return out

    def worst_ratio(self, direct: RunResult) -> float:
        """The highest ratio of this run's billed input so far to ``direct``'s, over every step
        both reached."""
        mine, theirs = self.billed_by_step(), direct.billed_by_step()
        return max((mine[k] / theirs[k] for k in mine if theirs.get(k)), default=0.0)

    def after_pause(self) -> AgentRequest | None:
        """The first request after the script's pause (the one that came after the slept step's
        output), or ``None`` without a pause."""
        pause = self.script.pause_after_step
        if pause is None:
            return None
        main = self.main_calls
        issued = next((i for i, r in enumerate(main) if r.step == pause), None)
        return main[issued + 1] if issued is not None and issued + 1 < len(main) else None

    def _final(self) -> AgentRequest | None:
        finals = [r for r in self.main_calls if r.final] or self.main_calls
        return finals[-1] if finals else None

    @property
    def current_kept(self) -> tuple[int, int]:
        """Facts whose current value (after the script's changes) the final request carries."""
        final = self._final()
        present = final.current_present if final is not None else {}
        return sum(1 for v in present.values() if v), len(self.script.facts)

    @property
    def edits_kept(self) -> tuple[int, int]:
        """Edited files whose path the final request still names."""
        final = self._final()
        present = final.edits_present if final is not None else {}
        return sum(1 for v in present.values() if v), len(self.script.edits)

    def masked_kept(self, keep: int = 10) -> tuple[int, int, int]:
        """Observation masking of the final request (every tool output but the newest
        ``keep`` replaced by a placeholder): current values and edited files it would still
        carry, and its size in characters."""
        final = self._final()
        if final is None:
            return 0, 0, 0
        text = json.dumps(mask_observations(final.body, keep), ensure_ascii=False)
        current = sum(1 for v in self.script.current().values() if v in text)
        edits = sum(1 for path in self.script.edits.values() if path in text)
        return current, edits, len(text)

    def final_body(self) -> Any:
        """The body of the final request (the one answered with the final text)."""
        final = self._final()
        return final.body if final is not None else None

    def final_score(self) -> ProbeScore:
        """What the final request carries: current values, values only by their stale setting,
        calls named, edited files (:func:`realistic_probe.probe_score`)."""
        return probe_score(self.script, self.final_body() or {})

    def masked_score(self, keep: int = 10) -> ProbeScore:
        """The same for observation masking of the final request (see :meth:`masked_kept`)."""
        return probe_score(self.script, mask_observations(self.final_body() or {}, keep))

    @property
    def evidence_kept(self) -> tuple[int, int]:
        """Facts still in the prompt of the last main-loop request (the one answered with the
        final text), out of all facts."""
        finals = [r for r in self.main_calls if r.final] or self.main_calls
        if not finals:
            return 0, len(self.script.facts)
        present = finals[-1].facts_present
        return sum(1 for v in present.values() if v), len(self.script.facts)

    def conversations(self) -> list[dict[str, Any]]:
        return list((self.status or {}).get("conversations") or [])

    def summary(self) -> dict[str, Any]:
        kept, facts = self.evidence_kept
        out = {
            "agent": self.agent,
            "mode": self.mode,
            "finished": self.finished,
            "exit_code": self.exit_code,
            "requests": len(self.model_calls),
            "own_compactions": self.compactions,
            "largest_prompt": self.largest_prompt,
            "mean_prompt": round(self.mean_prompt),
            "billed_input": round(self.billed_input),
            "upstream_4xx": len(self.client_errors),
            "evidence_kept": f"{kept}/{facts}",
            "seconds": round(self.seconds, 1),
            "model": next((r.body.get("model") for r in self.ok_calls if r.body), None),
        }
        if self.status is not None:
            out["gateway"] = {
                "requests": self.status.get("requests"),
                "conversations": [
                    {
                        k: c.get(k)
                        for k in (
                            "conversation",
                            "model",
                            "requests",
                            "context_target",
                            "decisions",
                            "rebuilds",
                            "tomc_tokens_before",
                            "tomc_tokens_after",
                        )
                    }
                    for c in self.conversations()
                ],
            }
        return out

    # ------------------------------------------------------------------ recording

    def save(self, path: str | Path, meta: Mapping[str, Any] | None = None) -> None:
        """Write this run (every request as the upstream saw it, not the script) to ``path``
        as gzipped JSON, with ``meta`` beside it; :meth:`load` reads it back."""
        import dataclasses
        import gzip

        data = {
            "meta": dict(meta or {}),
            "agent": self.agent,
            "mode": self.mode,
            "command": self.command,
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "seconds": self.seconds,
            "status": self.status,
            "base": self.base,
            "ids": self.ids,
            "requests": [dataclasses.asdict(r) for r in self.requests],
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        with gzip.open(partial, "wt", encoding="utf-8", compresslevel=5) as out:
            json.dump(data, out, ensure_ascii=False)
        partial.replace(path)

    @classmethod
    def load(cls, path: str | Path, script: Script) -> tuple[RunResult, dict[str, Any]]:
        """A run :meth:`save` wrote, for ``script`` (the one it ran), and its ``meta``."""
        import gzip

        with gzip.open(path, "rt", encoding="utf-8") as source:
            data = json.load(source)
        requests = [AgentRequest(**r) for r in data.pop("requests")]
        meta = data.pop("meta")
        return cls(requests=requests, script=script, **data), meta

    # ------------------------------------------------------------------ normalising

    def normalise(self, value: Any) -> Any:
        """``value`` with this run's paths and ids replaced by placeholders."""
        text = json.dumps(value, ensure_ascii=False, sort_keys=True)
        if self.base:
            for base in {self.base, os.path.realpath(self.base)}:
                text = text.replace(base, "<BASE>")
                # Claude Code names its project folder after the path: /a/b -> -a-b
                text = text.replace(re.sub(r"[^A-Za-z0-9]", "-", base), "<BASE-SLUG>")
        for name, ident in sorted(self.ids.items(), key=lambda kv: -len(kv[1])):
            text = text.replace(ident, f"<{name}>")
        text = _UUID.sub("<UUID>", text)
        return json.loads(text)


MASKED = "[old tool output omitted]"
_OUTPUT_ITEMS = ("function_call_output", "custom_tool_call_output")


def mask_observations(body: Any, keep: int = 10) -> Any:
    """Observation masking (Lindenbauer et al., "The Complexity Trap", 2025): a copy of a
    Messages or Responses request whose tool outputs, all but the newest ``keep``, are replaced
    by a placeholder; the calls and everything else stay."""
    body = json.loads(json.dumps(body))
    outputs: list[tuple[dict[str, Any], str]] = []
    for message in body.get("messages") or ():
        for block in message.get("content") if isinstance(message.get("content"), list) else ():
            if isinstance(block, dict) and block.get("type") == "tool_result":
                outputs.append((block, "content"))
    for item in body.get("input") or ():
        if isinstance(item, dict) and item.get("type") in _OUTPUT_ITEMS:
            outputs.append((item, "output"))
    for holder, key in outputs[: max(0, len(outputs) - keep)]:
        holder[key] = MASKED
    return body


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


# ---------------------------------------------------------------------- running


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _temp_root() -> str | None:
    # Codex refuses to put its helper binaries under the system temporary folder (a warning).
    for folder in ("/var/tmp",):
        if os.path.isdir(folder) and os.access(folder, os.W_OK):
            return folder
    return None


def _base_env(home: Path) -> dict[str, str]:
    path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    env = {
        "PATH": path,
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "CODEX_HOME": str(home / ".codex"),
        "TOMC_HOME": str(home / ".tomc"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        # Claude Code: no telemetry, error reporting, update checks or other side traffic.
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "DISABLE_BUG_COMMAND": "1",
        "CLAUDE_CODE_DISABLE_FEEDBACK_SURVEY": "1",
        "CLAUDE_CODE_DISABLE_TERMINAL_TITLE": "1",
        "IS_SANDBOX": "1",
        # Codex: no update check, no analytics.
        "CODEX_DISABLE_UPDATE_CHECK": "1",
    }
    # PYTHONPATH: ``tomc`` from another source tree (a baseline), for the gateway too.
    for name in ("TMPDIR", "SSL_CERT_FILE", "NODE_EXTRA_CA_CERTS", "PYTHONPATH"):
        if os.environ.get(name):
            env[name] = os.environ[name]
    return env


def _codex_config(upstream_url: str) -> str:
    return (
        'model_provider = "upstream"\n'
        "check_for_update_on_startup = false\n"
        "\n"
        "[analytics]\n"
        "enabled = false\n"
        "\n"
        "[model_providers.upstream]\n"
        'name = "Scripted upstream"\n'
        f'base_url = "{upstream_url}"\n'
        'wire_api = "responses"\n'
        'env_key = "OPENAI_API_KEY"\n'
    )


def _get_json(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read())


def _wait_answering(url: str, process: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the gateway exited with code {process.returncode}")
        try:
            _get_json(url, timeout=1.0)
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the gateway did not answer in time")


def run_command(
    command: Sequence[str], cwd: Path, env: Mapping[str, str], timeout_s: float
) -> tuple[int | None, str, str, float]:
    """Run an agent's command without standard input: ``(exit code or None on a timeout,
    stdout, stderr, seconds)``."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            list(command),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
        code: int | None = done.returncode
        stdout, stderr, tail = done.stdout, done.stderr, ""
    except subprocess.TimeoutExpired as exc:
        code, stdout, stderr, tail = None, exc.stdout or b"", exc.stderr or b"", "\n[timed out]"
    seconds = time.monotonic() - started
    return (
        code,
        stdout.decode("utf-8", "replace"),
        stderr.decode("utf-8", "replace") + tail,
        seconds,
    )


#: Extra ``tomc gateway serve`` flags (``["--verbose"]`` logs every decision in the run's log).
GATEWAY_FLAGS: list[str] = []
#: Extra ``tomc run`` options (``["--context-target", "30000"]``), for measurements.
RUN_FLAGS: list[str] = []


def run_session(
    agent: str,
    mode: str,
    *,
    script: Script | None = None,
    settings: Mapping[str, Any] | None = None,
    timeout_s: float = 300.0,
    keep: bool = False,
) -> RunResult:
    """Run ``agent`` ("claude" | "codex") once on the scripted task, ``mode`` "direct" or
    "tomc"; see the module docstring. ``settings`` replaces :data:`DEFAULT_SETTINGS` for the
    agent (its own auto-compaction limits)."""
    if agent not in AGENTS or mode not in ("direct", "tomc"):
        raise ValueError(f"agent must be one of {AGENTS} and mode 'direct' or 'tomc'")
    binary = agent_binary(agent)
    if binary is None:
        raise FileNotFoundError(f"{agent} is not installed (npm ci at the repository root)")
    script = script or Script()
    settings = DEFAULT_SETTINGS[agent] if settings is None else settings
    base = Path(tempfile.mkdtemp(prefix=f"tomc-real-{agent}-{mode}-", dir=_temp_root()))
    home, work = base / "home", base / "work"
    home.mkdir()
    write_workspace(work, script)
    env = _base_env(home)
    env["PATH"] = f"{Path(binary).parent}{os.pathsep}{env['PATH']}"
    gateway: subprocess.Popen[bytes] | None = None
    status = None
    gateway_log = ""
    with AgentUpstream(script) as upstream:
        if agent == "claude":
            env["ANTHROPIC_BASE_URL"] = upstream.root_url
            env["ANTHROPIC_API_KEY"] = "sk-ant-api03-fake-key-for-offline-tests"
            env.update({k: str(v) for k, v in settings.items()})
            args = [script.task(), "--allowedTools", "Bash", "--output-format", "text"]
            agent_argv = ["-p", *args]
        else:
            (home / ".codex").mkdir()
            (home / ".codex" / "config.toml").write_text(_codex_config(upstream.base_url))
            env["OPENAI_API_KEY"] = "sk-proj-fake-key-for-offline-tests"
            overrides = []
            for key, value in settings.items():
                overrides += ["-c", f"{key}={json.dumps(value)}"]
            agent_argv = [
                "exec",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "-C",
                str(work),
                *overrides,
                script.task(),
            ]
        if mode == "direct":
            command = [binary, *agent_argv]
        else:
            port = _free_port()
            tomc = tomc_binary()
            log = open(base / "gateway.log", "wb")  # noqa: SIM115 - closed below
            gateway = subprocess.Popen(
                [
                    tomc,
                    "gateway",
                    "serve",
                    "--port",
                    str(port),
                    "--home",
                    env["TOMC_HOME"],
                    # The gateway is told the cache lifetime the fake provider keeps.
                    *(["--cache-ttl", f"{script.cache_ttl_s:g}"] if script.cache_ttl_s else []),
                    *GATEWAY_FLAGS,
                ],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            _wait_answering(f"http://127.0.0.1:{port}/healthz", gateway)
            env[f"TOMC_{agent.upper()}_BIN"] = binary
            command = [tomc, "run", "--port", str(port), *RUN_FLAGS, agent, *agent_argv]
        exit_code, stdout, stderr, seconds = run_command(command, work, env, timeout_s)
        if gateway is not None:
            try:
                status = _get_json(f"http://127.0.0.1:{port}/status.json")
            except OSError as exc:
                status = {"error": str(exc)}
            os.killpg(gateway.pid, signal.SIGTERM)
            try:
                gateway.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(gateway.pid, signal.SIGKILL)
                gateway.wait()
            log.close()
            gateway_log = (base / "gateway.log").read_text("utf-8", "replace")
        requests = list(upstream.requests)
    result = RunResult(
        agent=agent,
        mode=mode,
        command=[_display(a, base) for a in command],
        exit_code=exit_code,
        stdout=stdout,
        stderr=stderr,
        seconds=seconds,
        requests=requests,
        script=script,
        status=status,
        gateway_log=gateway_log,
        base=str(base),
        ids=_run_ids(requests),
    )
    if not keep:
        shutil.rmtree(base, ignore_errors=True)
    return result


def _display(arg: str, base: Path) -> str:
    arg = arg.replace(str(base), "$RUN")
    return arg if len(arg) < 200 else arg[:80] + "..."


def _run_ids(requests: Sequence[AgentRequest]) -> dict[str, str]:
    ids: dict[str, str] = {}
    for r in requests:
        for header in ("x-claude-code-session-id", "session-id", "x-client-request-id"):
            if r.headers.get(header):
                ids.setdefault(header.upper(), r.headers[header])
        if isinstance(r.body, Mapping):
            if r.body.get("prompt_cache_key"):
                ids.setdefault("PROMPT_CACHE_KEY", str(r.body["prompt_cache_key"]))
            user = (r.body.get("metadata") or {}).get("user_id")
            if isinstance(user, str):
                try:
                    data = json.loads(user)
                except ValueError:
                    data = {}
                if isinstance(data, Mapping) and data.get("device_id"):
                    ids.setdefault("DEVICE_ID", str(data["device_id"]))
    return ids


# ---------------------------------------------------------------------- comparisons


def compare_headers(direct: RunResult, tomc: RunResult) -> dict[str, Any]:
    """Headers of the first request of each kind, direct against through TOMC: what TOMC
    added, dropped or changed (ignoring per-run ids, content-length, host, hop-by-hop)."""
    out: dict[str, Any] = {"added": {}, "dropped": {}, "changed": {}, "pairs": 0}
    pairs = list(zip(direct.model_calls, tomc.model_calls, strict=False))
    for a, b in pairs:
        if a.path != b.path or a.kind != b.kind:
            continue
        out["pairs"] += 1
        ignore = PER_RUN_HEADERS | HOP_BY_HOP
        ha = {k: v for k, v in a.headers.items() if k not in ignore}
        hb = {k: v for k, v in b.headers.items() if k not in ignore}
        for k in hb.keys() - ha.keys():
            out["added"].setdefault(k, hb[k])
        for k in ha.keys() - hb.keys():
            out["dropped"].setdefault(k, ha[k])
        for k in ha.keys() & hb.keys():
            if ha[k] != hb[k]:
                out["changed"].setdefault(k, (ha[k], hb[k]))
    return out


def protected_parts(result: RunResult, request: AgentRequest) -> dict[str, Any]:
    """What must reach the provider verbatim: system, tools and the first user message
    (Anthropic), instructions, tools and the items up to the first user task (Responses)."""
    body = request.body if isinstance(request.body, Mapping) else {}
    if request.api == "anthropic":
        messages = body.get("messages") or []
        first_user = next((m for m in messages if m.get("role") == "user"), None)
        parts = {"system": body.get("system"), "tools": body.get("tools"), "first_user": first_user}
    else:
        items = [i for i in body.get("input") or [] if isinstance(i, Mapping)]
        head = []
        for item in items:
            head.append(item)
            if item.get("role") == "user" and "<environment_context>" not in json.dumps(item):
                break
        parts = {"instructions": body.get("instructions"), "tools": body.get("tools"), "head": head}
    return result.normalise(parts)
