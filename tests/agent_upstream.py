"""A scripted fake provider for the REAL agent CLIs (Claude Code, Codex), over loopback HTTP.

``with AgentUpstream(Script(steps=20)) as up:`` serves a Starlette app under uvicorn in a
background thread on a free 127.0.0.1 port (like :class:`fake_providers.FakeProvider`), speaking

- Anthropic Messages: ``POST /v1/messages`` (Claude Code adds ``?beta=true``), streamed exactly
  as Anthropic streams (``message_start`` ... ``message_stop``), and
  ``POST /v1/messages/count_tokens``;
- OpenAI Responses: ``POST /v1/responses`` (SSE ``response.*`` events), ``POST
  /v1/responses/compact`` and ``GET /v1/models``.

**The script.** Each conversation (Claude Code's ``x-claude-code-session-id`` header, Codex's
``prompt_cache_key``) gets its own server-side state, so what the "model" does never depends on
what is in the prompt, and a run straight to this fake and a run through TOMC get the same
script: for ``steps`` turns it answers with one shell tool call (Claude Code's ``Bash``, Codex's
``exec`` code-mode tool running ``tools.exec_command``) that prints a large generated file
(:func:`write_workspace` makes them), then a final text answer that starts with
:data:`FINAL_MARK` and names each fact it can still see in its prompt. The first files hold the
``facts`` (``secret_token = ...``); every request records which fact values are still present
anywhere in its body (``facts_present``).

**The agents' own compaction** is answered with a plausible summary (a careful summariser: it
keeps every fact line it can see) and counted: Claude Code's summarisation request (its last
user message asks for a ``<summary>``), Codex's (``x-codex-turn-metadata`` with ``request_kind``
``compaction``, or a last user item holding its checkpoint-compaction prompt) and
``/v1/responses/compact``.

**Usage and prompt caching** are computed from the body with one deterministic count (o200k from
``bpe-openai`` when installed, else characters / 4: the same for every run) and emulate each
provider's documented caching rules:

- Anthropic (https://platform.claude.com/docs/en/build-with-claude/prompt-caching): the prompt is
  ``tools``, ``system``, ``messages`` in that order; a ``cache_control`` block is a breakpoint; a
  hit is the longest previously written prefix ending at a block boundary within 20 blocks before
  a breakpoint; the prefix up to the last breakpoint is written when it is at least the model's
  minimum cacheable length (4,096 tokens for Opus 4.5/4.6 and Haiku 4.5, 2,048 for Opus 4.7 and
  Sonnet 4.6, 1,024 for Opus 4.8 and the rest); ``input_tokens`` is only the uncached remainder,
  beside ``cache_creation_input_tokens`` (billed 1.25x, 2x for ``ttl: "1h"``) and
  ``cache_read_input_tokens`` (0.1x; 0.05x on Claude Opus 5.5); entries live 5 minutes from
  their last use (or 1 hour).
- OpenAI (https://developers.openai.com/api/docs/guides/prompt-caching and
  https://github.com/openai/openai-cookbook/blob/main/examples/Prompt_Caching_201.ipynb):
  automatic exact-prefix caching for prompts of 1,024 tokens or more, hits in 128-token
  increments (here: the longest earlier prefix ending at an item boundary, rounded down),
  reported as ``usage.input_tokens_details.cached_tokens`` and billed 0.1x. From the GPT-5.6
  family on (gpt-5.6-*, gpt-6*; https://developers.openai.com/api/docs/guides/prompt-caching)
  cache writes cost 1.25x the uncached rate: the uncached part of such a prompt is reported as
  ``cache_write_tokens`` and billed so. GPT-6.2 Sol reads at 0.05x and keeps a prefix 30 minutes
  (https://developers.openai.com/api/docs/models/gpt-6.2-sol).

**Preserved thinking** (the rules and their sources: :mod:`tomc.testing.provider_rules`): every
``thinking`` block this fake returns carries a signature bound to its prefix -- ``system``,
``tools`` and the messages before it, as the documented prefix check compares them: no
``cache_control`` markers, no thinking blocks, string content as its one text block, no
``defer_loading`` tool nothing has referenced yet -- and to the thinking block it came after. On
the models the docs say run the check (:attr:`Script.prefix_check`), a later request that sends
such a block back after its prefix changed, or with a thinking block
before it removed from the middle or put back, gets a 400 ``invalid_request_error``
"messages.N.content.M: Invalid `signature` in `thinking` block. The block is bound to a
different conversation. ..." (the token counting endpoint too) -- unless it sets
``thinking.block_binding.prefix_mismatch_behavior: "drop_block"`` with the ``anthropic-beta:
thinking-binding-controls-2026-08-01`` header: then each failing block (with the rest of its
turn's thinking) is dropped and the answer lists them in ``input_transformations``
(``{"type": "thinking_dropped", "path": "messages.i.content.j", "reason":
"prefix_binding_mismatch"}``). Thinking produced after a change stays valid. Every 4xx is
counted.

Every request is recorded in ``up.requests`` as an :class:`AgentRequest`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
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
from tomc.testing.loopback import LoopbackFake
from tomc.testing.provider_rules import (
    drop_thinking,
    failing_thinking,
    prefix_mismatch_error,
    sign_thinking,
    tampered_thinking,
)
from tomc.testing.wire import Reply, response_object, sse

__all__ = [
    "BINDING_BETA",
    "FINAL_MARK",
    "AgentRequest",
    "AgentUpstream",
    "Script",
    "count_tokens",
    "probe_script",
    "write_workspace",
]

BINDING_BETA = "thinking-binding-controls-2026-08-01"
FINAL_MARK = "TASK COMPLETE"
CREATED = 1_760_000_000
ANTHROPIC_LOOKBACK = 20
#: Models that run the preserved-thinking prefix check, per the docs' feature metadata
#: (https://platform.claude.com/docs/en/build-with-claude/preserved-thinking/prefix-checks:
#: "supportedModels"; preserved-thinking: "models before Claude Fable 5.1 don't run the prefix
#: check").
PRESERVED_THINKING_MODELS = (
    "claude-fable-5",
    "claude-mythos-5",
    "claude-opus-5-5",
    "claude-sonnet-5-5",
    "claude-haiku-5-5",
)
ANTHROPIC_TTL_S = {"5m": 300.0, "1h": 3600.0}
OPENAI_TTL_S = 600.0
#: Models whose documented cache reads cost other than 0.1x uncached input (first prefix that
#: matches): Claude Opus 5.5 $0.20 vs $4 per MTok
#: (platform.claude.com/docs/en/models/opus-5-5/overview); GPT-6.2 Sol $0.10 vs $2
#: (developers.openai.com/api/docs/models/gpt-6.2-sol).
CACHE_READ_PRICE = (("claude-opus-5-5", 0.05), ("gpt-6.2-sol", 0.05))
#: OpenAI models whose default retention is longer than in-memory caching: GPT-6.2 Sol keeps
#: a prefix 30 minutes (the same page).
OPENAI_RETENTION_S = (("gpt-6.2-sol", 1800.0),)


def _by_model(table: tuple[tuple[str, float], ...], model: str, default: float) -> float:
    return next((value for prefix, value in table if model.startswith(prefix)), default)


#: The minimum cacheable prompt per model family (first match wins).
ANTHROPIC_MIN_CACHEABLE = (
    ("claude-opus-4-5", 4096),
    ("claude-opus-4-6", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-opus-4-7", 2048),
    ("claude-sonnet-4-6", 2048),
    ("claude-haiku-3", 2048),
    ("claude-opus-5", 512),
    ("claude-", 1024),
)


# ---------------------------------------------------------------------- counting


def _load_encoder() -> Any:
    try:
        import bpe_openai
    except ImportError:  # pragma: no cover - the dev extras install it
        return None
    return bpe_openai.get_encoding("o200k_base")


_ENCODER = _load_encoder()
_COUNTS: dict[str, int] = {}
_COUNT_LOCK = threading.Lock()
COUNTER_NAME = "o200k (bpe-openai)" if _ENCODER is not None else "characters / 4"


def count_tokens(text: str) -> int:
    """One deterministic count: o200k via ``bpe-openai`` when installed, else chars / 4."""
    key = hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()
    with _COUNT_LOCK:
        hit = _COUNTS.get(key)
    if hit is not None:
        return hit
    if _ENCODER is None:
        value = (len(text) + 3) // 4
    else:
        value = 0
        for start in range(0, len(text), 200_000):  # bpe-openai refuses huge single calls
            value += len(_ENCODER.encode_ordinary(text[start : start + 200_000]))
    with _COUNT_LOCK:
        _COUNTS[key] = value
    return value


def _exec_call(n: int, source: str) -> dict[str, Any]:
    """Codex's code-mode tool call: ``source`` run by its ``exec`` tool."""
    return {
        "id": f"ctc_up{n:06d}",
        "type": "custom_tool_call",
        "status": "completed",
        "call_id": f"call_up{n:06d}",
        "name": "exec",
        "input": source,
    }


def _strip_cache_control(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def _canon(value: Any) -> str:
    return json.dumps(_strip_cache_control(value), sort_keys=True, ensure_ascii=False)


def _digest(previous: str, piece: str) -> str:
    return hashlib.sha256((previous + "\x1f" + piece).encode("utf-8", "surrogatepass")).hexdigest()


# ---------------------------------------------------------------------- the script


#: OpenAI models whose cache writes are billed (1.25x): the GPT-5.6 family and later.
OPENAI_PRICED_WRITES = re.compile(r"^gpt-(?:5\.(?:[6-9]|\d\d)|[6-9])")


@dataclass(frozen=True)
class Script:
    """What the scripted "model" does in every conversation."""

    steps: int = 20
    #: Characters each tool call prints (the generated file's size).
    output_chars: int = 8_000
    #: Facts planted in the first files, one per file, as ``name = value`` lines.
    facts: Mapping[str, str] = field(
        default_factory=lambda: {
            "secret_token": "tok-7f3a9c51e2",
            "deploy_region": "eu-north-7b",
            "build_number": "build-48213-q",
        }
    )
    #: Claude: answer with a thinking block before each tool call and the final text.
    thinking: bool = True
    #: The preserved-thinking prefix check: "documented" (the real API: only the models the docs
    #: list run it, Fable/Mythos 5.x and Opus/Sonnet/Haiku 5.5 -- Claude Code 2.1.332's default
    #: claude-opus-5-5, not 2.1.197's claude-opus-4-8), "always" (every model: stricter than the
    #: API), or "never".
    prefix_check: str = "documented"
    #: A pause in the session: the shell command of step ``pause_after_step`` sleeps
    #: ``pause_s`` seconds before it prints, so the agent's next request comes that much later.
    pause_after_step: int | None = None
    pause_s: float = 0.0
    #: How long a cached prefix lives without use, in seconds, for both providers (``None``:
    #: each provider's documented lifetimes).
    cache_ttl_s: float | None = None
    #: Later values of some facts, ``name: (step, value)``: that step's file sets it again, so
    #: the value a reader must report is the later one (see :meth:`current`).
    changes: Mapping[str, tuple[int, str]] = field(default_factory=dict)
    #: Files the agent edits, ``step: path``: that step's command also rewrites the file.
    edits: Mapping[int, str] = field(default_factory=dict)

    def file_name(self, step: int) -> str:
        return f"data/step_{step:02d}.log"

    def current(self) -> dict[str, str]:
        """Each fact's value as the session ends (the latest one set)."""
        return {
            name: self.changes[name][1] if name in self.changes else value
            for name, value in self.facts.items()
        }

    def command(self, step: int) -> str:
        """The shell command of ``step``: print its file (after the pause, if it is there),
        and edit a file when the script says so."""
        command = f"cat {self.file_name(step)}"
        if step == self.pause_after_step and self.pause_s > 0:
            command = f"sleep {self.pause_s:g} && {command}"
        if step in self.edits:
            command += f" && sed -i 's/^revision = .*/revision = {step}/' {self.edits[step]}"
        return command

    def ttl_s(self, named: float) -> float:
        """A cache entry's lifetime: the script's, else the provider's ``named`` one."""
        return self.cache_ttl_s if self.cache_ttl_s is not None else named

    def file_text(self, step: int) -> str:
        lines = []
        facts = list(self.facts.items())
        if step <= len(facts):
            name, value = facts[step - 1]
            lines.append(f"{name} = {value}")
        for name, (at, value) in self.changes.items():
            if at == step:
                lines.append(f"{name} = {value}")
        number = 0
        while sum(len(line) + 1 for line in lines) < self.output_chars:
            number += 1
            worker = ("alpha", "bravo", "charlie", "delta", "echo")[(step + number) % 5]
            lines.append(
                f"[step {step:02d} line {number:04d}] worker={worker} status=ok "
                f"latency_ms={(step * 37 + number * 11) % 900} queue_depth={(number * 7) % 41} "
                f"checksum={hashlib.md5(f'{step}-{number}'.encode()).hexdigest()[:12]}"
            )
        return "\n".join(lines) + "\n"

    def step_texts(self, step: int) -> tuple[str, str, str]:
        """What the "model" says around the tool call of ``step``: its thinking, its text and
        the call's description."""
        return (
            f"Next I read log file {step}.",
            f"Reading {self.file_name(step)}.",
            f"Print log file {step}",
        )

    def seen_facts(self, text: str) -> list[str]:
        """The fact lines a careful summariser keeps from ``text``."""
        return [f"{n} = {v}" for n, v in self.facts.items() if v in text]

    def summary_lines(self, prompt: str) -> list[str]:
        """The agent's own compaction summary of ``prompt`` (a careful summariser)."""
        facts = self.seen_facts(prompt)
        return [
            "1. Primary request: read every data/step_NN.log file with one shell command each and "
            "report the facts they define.",
            "2. Progress: the log files read so far printed worker status lines; all were ok.",
            "3. Facts found so far:" + ("".join(f"\n   - {f}" for f in facts) or " none yet"),
            "4. Next step: continue with the next unread log file.",
        ]

    def final_text(self, prompt: str) -> str:
        """The final answer: :data:`FINAL_MARK` and each fact still visible in ``prompt``."""
        parts = []
        for name, value in self.facts.items():
            parts.append(f"{name} = {value if value in prompt else 'unknown'}")
        return f"{FINAL_MARK}. " + "; ".join(parts) + "."

    def task(self) -> str:
        return (
            f"There are {self.steps} log files data/step_01.log .. data/step_{self.steps:02d}.log "
            "in the current directory. Read each one with the shell (one command per file), "
            f"then report the values of {', '.join(self.facts)} that the logs define, and say "
            f"'{FINAL_MARK}'."
        )


def probe_script(steps: int, output_chars: int, **options: Any) -> Script:
    """A fidelity probe: 20 exact values (numbers, paths, identifiers) planted in the first 20
    files, a third of them set again halfway through the session, and 8 files the agent edits
    along the way; ``options`` are further :class:`Script` fields (a pause, say)."""
    if steps < 24:
        raise ValueError("a fidelity probe needs at least 24 steps")
    facts: dict[str, str] = {}
    for k in range(20):
        kind = ("limit", "path", "id")[k % 3]
        if kind == "limit":
            facts[f"probe_limit_{k:02d}"] = str(90_000_000 + 7_919 * (k + 1))
        elif kind == "path":
            facts[f"probe_path_{k:02d}"] = f"/srv/probe/{k:02d}/settings-{k * 37:03d}.yaml"
        else:
            facts[f"probe_id_{k:02d}"] = f"svc-{hashlib.sha1(str(k).encode()).hexdigest()[:10]}"
    changed = list(facts)[::3]  # 7 of 20
    first, last = steps // 2, (3 * steps) // 4
    changes = {
        name: (first + (i * (last - first)) // len(changed), f"{facts[name]}-v2")
        for i, name in enumerate(changed)
    }
    edits = {2 + (i * (steps - 3)) // 8: f"src/module_{i}.py" for i in range(8)}
    return Script(
        steps=steps, output_chars=output_chars, facts=facts, changes=changes, edits=edits, **options
    )


def write_workspace(folder: str | Path, script: Script) -> Path:
    """Create the files the script's tool calls print."""
    root = Path(folder)
    for step in range(1, script.steps + 1):
        path = root / script.file_name(step)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(script.file_text(step))
    for edited in script.edits.values():
        path = root / edited
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("revision = 0\n")
    return root


@dataclass
class _Conversation:
    steps_issued: int = 0
    compactions: int = 0
    finals: int = 0


# ---------------------------------------------------------------------- records


@dataclass
class AgentRequest:
    """One request and what was answered."""

    number: int
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: Any
    raw_size: int
    api: str  # "anthropic" | "openai" | "other"
    kind: str = "other"  # main | compaction | side | count_tokens | models | other
    conversation: str | None = None
    step: int | None = None  # the tool step answered (None: not a tool call)
    final: bool = False
    status: int = 200
    error: str | None = None
    prompt_tokens: int = 0
    input_tokens: int = 0  # Anthropic: the uncached remainder; OpenAI: uncached = prompt - cached
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0
    cache_read_tokens: int = 0
    output_tokens: int = 0
    facts_present: dict[str, bool] = field(default_factory=dict)
    #: Whether each fact's current value, and each edited file's path, is in the body.
    current_present: dict[str, bool] = field(default_factory=dict)
    edits_present: dict[str, bool] = field(default_factory=dict)
    dropped_thinking: list[str] = field(default_factory=list)
    received_at: float = 0.0
    model: str = ""

    @property
    def billed_input(self) -> float:
        """The input billed, at the prices the provider documents for the request's model."""
        read = _by_model(CACHE_READ_PRICE, self.model, 0.1)
        if self.api == "anthropic":
            return (
                self.input_tokens
                + 1.25 * (self.cache_write_tokens - self.cache_write_1h_tokens)
                + 2.0 * self.cache_write_1h_tokens
                + read * self.cache_read_tokens
            )
        uncached = self.prompt_tokens - self.cache_read_tokens - self.cache_write_tokens
        return uncached + 1.25 * self.cache_write_tokens + read * self.cache_read_tokens

    @property
    def is_model_call(self) -> bool:
        return self.kind in ("main", "compaction", "side") and self.status < 400


# ---------------------------------------------------------------------- the server


class AgentUpstream(LoopbackFake):
    """The scripted fake (see the module docstring)."""

    def __init__(
        self, script: Script | None = None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.script = script or Script()
        #: What the caches' lifetimes are measured by (an offline replay passes its own).
        self.clock = clock
        self.requests: list[AgentRequest] = []
        self.conversations: dict[str, _Conversation] = {}
        self._lock = threading.Lock()
        self._anthropic_cache: dict[str, tuple[float, int]] = {}  # prefix hash -> expiry, tokens
        self._openai_cache: dict[str, tuple[float, int]] = {}

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> AgentUpstream:
        app = Starlette(
            routes=[Route("/{path:path}", self._handle, methods=["GET", "POST", "HEAD"])]
        )
        self._serve(app, "agent upstream", backlog=128)
        return self

    # ------------------------------------------------------------------ summaries

    def model_requests(self) -> list[AgentRequest]:
        with self._lock:
            return [r for r in self.requests if r.is_model_call]

    def count(self, kind: str) -> int:
        with self._lock:
            return sum(1 for r in self.requests if r.kind == kind and r.status < 400)

    def client_errors(self) -> list[AgentRequest]:
        with self._lock:
            return [r for r in self.requests if 400 <= r.status < 500]

    # ------------------------------------------------------------------ handling

    async def _handle(self, request: Request) -> Response:
        raw, body, headers = await read_request(request)
        path = request.url.path
        api = (
            "anthropic" if "/messages" in path else "openai" if path.startswith("/v1/") else "other"
        )
        with self._lock:
            record = AgentRequest(
                number=len(self.requests) + 1,
                method=request.method,
                path=path,
                query=request.url.query,
                headers=headers,
                body=body,
                raw_size=len(raw),
                api=api,
                received_at=time.time(),
                model=str(body.get("model", "")) if isinstance(body, Mapping) else "",
            )
            self.requests.append(record)
        if path in ("", "/") or request.method == "HEAD":
            record.kind, record.status = "other", 200
            return Response(b"", status_code=200)
        if request.method == "GET" and path.rstrip("/") == "/v1/models":
            record.kind = "models"
            return JSONResponse(_openai_models(body))
        if request.method != "POST" or not isinstance(body, Mapping):
            return self._fail(record, 404, f"Unknown request URL: {request.method} {path}")
        with self._lock:  # one request at a time through the script and the caches
            if path == "/v1/messages":
                return self._messages(record, body, headers)
            if path == "/v1/messages/count_tokens":
                record.kind = "count_tokens"
                problem = _messages_problem(body, headers)
                if problem:
                    return self._fail(record, 400, problem)
                # "The token counting endpoint runs the same prefix check and returns the same
                # 400" (provider_rules.PRESERVED_THINKING #preserved-thinking-controls).
                body, refused = self._prefix_check(record, body, headers)
                if refused is not None:
                    return refused
                blocks = _anthropic_blocks(body)
                total = sum(count_tokens(text) for text, _, _ in blocks)
                record.prompt_tokens = total
                return JSONResponse({"input_tokens": total})
            if path == "/v1/responses":
                return self._responses(record, body, headers)
            if path == "/v1/responses/compact":
                return self._responses_compact(record, body, headers)
        return self._fail(record, 404, f"Unknown request URL: {request.method} {path}")

    def _fail(self, record: AgentRequest, status: int, message: str) -> Response:
        record.status, record.error = status, message
        if record.api == "anthropic":
            kind = {400: "invalid_request_error", 404: "not_found_error"}.get(status, "api_error")
            payload: dict[str, Any] = {
                "type": "error",
                "error": {"type": kind, "message": message},
                "request_id": f"req_011Up{record.number:012d}",
            }
        else:
            payload = {
                "error": {
                    "message": message,
                    "type": "invalid_request_error",
                    "param": None,
                    "code": None,
                }
            }
        return JSONResponse(payload, status_code=status)

    def _conversation(self, key: str | None) -> _Conversation:
        key = key or "?"
        if key not in self.conversations:
            self.conversations[key] = _Conversation()
        return self.conversations[key]

    def _facts(self, record: AgentRequest, text: str) -> None:
        record.facts_present = {name: value in text for name, value in self.script.facts.items()}
        record.current_present = {
            name: value in text for name, value in self.script.current().items()
        }
        record.edits_present = {path: path in text for path in self.script.edits.values()}

    # ------------------------------------------------------------------ Anthropic

    def _prefix_check(
        self, record: AgentRequest, body: Mapping[str, Any], headers: Mapping[str, str]
    ) -> tuple[Mapping[str, Any], Response | None]:
        """Preserved thinking's prefix check (:mod:`tomc.testing.provider_rules`): the body the
        model reads (failing blocks dropped under ``"drop_block"``), or the 400 to answer."""
        tampered = tampered_thinking(body) if self.script.prefix_check != "never" else None
        if tampered is not None:  # always a 400, whatever prefix_mismatch_behavior says
            i, j = tampered
            message = f"messages.{i}.content.{j}: Invalid `signature` in `thinking` block."
            return body, self._fail(record, 400, message)
        binding = (body.get("thinking") or {}).get("block_binding") or {}
        drop = binding.get(
            "prefix_mismatch_behavior"
        ) == "drop_block" and BINDING_BETA in headers.get("anthropic-beta", "")
        checked = self.script.prefix_check == "always" or (
            self.script.prefix_check == "documented"
            and str(body.get("model", "")).startswith(PRESERVED_THINKING_MODELS)
        )
        invalid = failing_thinking(body) if checked else []
        if invalid and not drop:
            return body, self._fail(record, 400, prefix_mismatch_error(invalid[0], headers))
        if invalid:
            record.dropped_thinking = [f"messages.{i}.content.{j}" for i, j in invalid]
            return drop_thinking(body, invalid), None
        return body, None

    def _messages(self, record: AgentRequest, body: Mapping[str, Any], headers: Mapping[str, str]):
        record.conversation = headers.get("x-claude-code-session-id") or _metadata_session(body)
        record.kind = _claude_kind(body)
        problem = _messages_problem(body, headers)
        if problem:
            return self._fail(record, 400, problem)
        body, refused = self._prefix_check(record, body, headers)
        if refused is not None:
            return refused
        text = json.dumps(body, ensure_ascii=False)
        self._facts(record, text)
        kind = _claude_kind(body)
        record.kind = kind
        convo = self._conversation(record.conversation)
        self._anthropic_usage(record, body)
        thinking = self.script.thinking and (body.get("thinking") or {}).get("type") in (
            "adaptive",
            "enabled",
        )
        blocks: list[dict[str, Any]] = []
        if kind == "compaction":
            convo.compactions += 1
            blocks.append({"type": "text", "text": self._summary_text(text, claude=True)})
            stop = "end_turn"
        elif kind == "side":
            blocks.append({"type": "text", "text": "Reading log files"})
            stop = "end_turn"
        elif convo.steps_issued < self.script.steps:
            convo.steps_issued += 1
            step = record.step = convo.steps_issued
            command = self.script.command(step)
            thought, said, description = self.script.step_texts(step)
            if thinking:
                blocks.append({"type": "thinking", "thinking": thought})
            blocks.append({"type": "text", "text": said})
            blocks.append(
                {
                    "type": "tool_use",
                    "id": f"toolu_01Up{record.number:012d}",
                    "name": "Bash",
                    "input": {"command": command, "description": description},
                }
            )
            stop = "tool_use"
        else:
            convo.finals += 1
            record.final = True
            if thinking:
                blocks.append({"type": "thinking", "thinking": "All files read; I can answer."})
            blocks.append({"type": "text", "text": self._final_text(text)})
            stop = "end_turn"
        # Sign thinking blocks with the prefix they were produced after (as the model read it).
        at = len(body.get("messages") or [])
        for j, block in enumerate(blocks):
            if block["type"] == "thinking":
                block["signature"] = sign_thinking(body, at, blocks[:j], f"{record.number}.{j}")
        record.output_tokens = sum(count_tokens(_canon(b)) for b in blocks)
        message = {
            "id": f"msg_01Up{record.number:014d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", ""),
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
        }
        transformations = [
            {"type": "thinking_dropped", "path": p, "reason": "prefix_binding_mismatch"}
            for p in record.dropped_thinking
        ]
        if BINDING_BETA in headers.get("anthropic-beta", ""):
            message["input_transformations"] = transformations
        usage = {
            "input_tokens": record.input_tokens,
            "cache_creation_input_tokens": record.cache_write_tokens,
            "cache_read_input_tokens": record.cache_read_tokens,
            "cache_creation": {
                "ephemeral_5m_input_tokens": record.cache_write_tokens
                - record.cache_write_1h_tokens,
                "ephemeral_1h_input_tokens": record.cache_write_1h_tokens,
            },
            "output_tokens": record.output_tokens,
            "service_tier": "standard",
        }
        headers_out = {"request-id": f"req_011Up{record.number:012d}"}
        if not body.get("stream"):
            return JSONResponse({**message, "usage": usage}, headers=headers_out)
        return StreamingResponse(
            iter(_anthropic_events(message, usage, transformations, headers)),
            media_type="text/event-stream; charset=utf-8",
            headers={"cache-control": "no-cache", **headers_out},
        )

    def _anthropic_usage(self, record: AgentRequest, body: Mapping[str, Any]) -> None:
        blocks = _anthropic_blocks(body)
        now = self.clock()
        cache = self._anthropic_cache
        for key in [k for k, (expiry, _) in cache.items() if expiry < now]:
            del cache[key]
        hashes, tokens = [], []
        running, total = "", 0
        for text, _, _ in blocks:
            running = _digest(running, text)
            total += count_tokens(text)
            hashes.append(running)
            tokens.append(total)
        record.prompt_tokens = total
        breakpoints = [i for i, (_, marked, _) in enumerate(blocks) if marked]
        model = str(body.get("model", ""))
        minimum = next(
            n
            for prefix, n in ANTHROPIC_MIN_CACHEABLE
            if model.startswith(prefix) or prefix == "claude-"
        )
        hit = -1
        for b in breakpoints:
            for i in range(b, max(-1, b - ANTHROPIC_LOOKBACK - 1), -1):
                if hashes[i] in cache:
                    hit = max(hit, i)
                    break
        read = tokens[hit] if hit >= 0 else 0
        write = write_1h = 0
        written_to = hit
        for b in breakpoints:
            ttl = ((blocks[b][2] or {}).get("ttl")) or "5m"
            if tokens[b] >= minimum:
                expiry = now + self.script.ttl_s(ANTHROPIC_TTL_S.get(ttl, 300.0))
                previous = cache.get(hashes[b])
                cache[hashes[b]] = (max(expiry, previous[0] if previous else 0), tokens[b])
                if b > written_to:
                    added = tokens[b] - (tokens[written_to] if written_to >= 0 else 0)
                    write += added
                    if ttl == "1h":
                        write_1h += added
                    written_to = b
        if hit >= 0:  # a hit refreshes the entry
            expiry, size = cache.get(hashes[hit], (now, tokens[hit]))
            cache[hashes[hit]] = (max(expiry, now + self.script.ttl_s(300.0)), size)
        record.cache_read_tokens = read
        record.cache_write_tokens = write
        record.cache_write_1h_tokens = write_1h
        record.input_tokens = total - read - write

    # ------------------------------------------------------------------ OpenAI Responses

    def _responses(self, record: AgentRequest, body: Mapping[str, Any], headers: Mapping[str, str]):
        record.conversation = str(body.get("prompt_cache_key") or headers.get("session-id") or "")
        record.kind = _codex_kind(body, headers)
        problem = _responses_problem(body, headers)
        if problem:
            return self._fail(record, 400, problem)
        text = json.dumps(body, ensure_ascii=False)
        self._facts(record, text)
        kind = _codex_kind(body, headers)
        record.kind = kind
        convo = self._conversation(record.conversation)
        self._openai_usage(record, body)
        n = record.number
        items: list[dict[str, Any]] = []
        if kind == "compaction":
            convo.compactions += 1
            items.append(_message_item(n, self._summary_text(text, claude=False)))
        elif kind == "side":
            items.append(_message_item(n, "OK"))
        elif convo.steps_issued < self.script.steps:
            convo.steps_issued += 1
            step = record.step = convo.steps_issued
            items.append(_reasoning_item(n, self.script.step_texts(step)[0]))
            source = (
                f'const r = await tools.exec_command({{cmd: "{self.script.command(step)}", '
                "max_output_tokens: 20000});\ntext(r.output);\n"
            )
            items.append(_exec_call(n, source))
        else:
            convo.finals += 1
            record.final = True
            items.append(_reasoning_item(n, "All files read; I can answer."))
            items.append(_message_item(n, self._final_text(text)))
        record.output_tokens = sum(count_tokens(_canon(item)) for item in items)
        usage = {
            "input_tokens": record.prompt_tokens,
            "input_tokens_details": {
                "cached_tokens": record.cache_read_tokens,
                "cache_write_tokens": record.cache_write_tokens,
            },
            "output_tokens": record.output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": record.prompt_tokens + record.output_tokens,
        }
        response = _response_object(body, n, items, usage)
        headers_out = {"x-request-id": f"req_up{n:012d}"}
        if not body.get("stream"):
            return JSONResponse(response, headers=headers_out)
        return StreamingResponse(
            iter(_responses_events(body, response)),
            media_type="text/event-stream; charset=utf-8",
            headers={"cache-control": "no-cache", **headers_out},
        )

    def _responses_compact(self, record: AgentRequest, body: Mapping[str, Any], headers):
        record.conversation = str(body.get("prompt_cache_key") or headers.get("session-id") or "")
        record.kind = "compaction"
        text = json.dumps(body, ensure_ascii=False)
        self._facts(record, text)
        self._openai_usage(record, body)
        self._conversation(record.conversation).compactions += 1
        summary = self._summary_text(text, claude=False)
        kept = [
            item
            for item in body.get("input") or []
            if isinstance(item, Mapping)
            and item.get("type", "message") == "message"
            and item.get("role") == "user"
        ]
        compaction = {
            "id": f"cmp_up{record.number:06d}",
            "type": "compaction",
            "encrypted_content": base64.b64encode(summary.encode()).decode(),
        }
        usage = {
            "input_tokens": record.prompt_tokens,
            "input_tokens_details": {"cached_tokens": record.cache_read_tokens},
            "output_tokens": count_tokens(summary),
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": record.prompt_tokens + count_tokens(summary),
        }
        return JSONResponse(
            {
                "id": f"resp_cmp_up{record.number:06d}",
                "object": "response.compaction",
                "created_at": CREATED + record.number,
                "output": [*kept, compaction],
                "usage": usage,
            }
        )

    def _openai_usage(self, record: AgentRequest, body: Mapping[str, Any]) -> None:
        pieces: list[str] = []
        if body.get("instructions"):
            pieces.append(_canon({"instructions": body["instructions"]}))
        if body.get("tools"):
            pieces.append(_canon({"tools": body["tools"]}))
        items = body.get("input")
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        for item in items or []:
            if isinstance(item, Mapping):
                item = {k: v for k, v in item.items() if k != "id"}
            pieces.append(_canon(item))
        now = self.clock()
        cache = self._openai_cache
        for key in [k for k, (expiry, _) in cache.items() if expiry < now]:
            del cache[key]
        running, total, best = "", 0, 0
        boundaries = []
        for piece in pieces:  # (item ids are not tokens the model sees: not part of the key)
            running = _digest(running, piece)
            total += count_tokens(piece)
            boundaries.append((running, total))
            if running in cache:
                best = total
        cached = (best // 128) * 128 if best >= 1024 else 0
        if total >= 1024:
            for key, size in boundaries:
                retention = _by_model(OPENAI_RETENTION_S, str(body.get("model", "")), OPENAI_TTL_S)
                cache[key] = (now + self.script.ttl_s(retention), size)
        record.prompt_tokens = total
        record.cache_read_tokens = cached
        record.input_tokens = total - cached
        if total >= 1024 and OPENAI_PRICED_WRITES.match(str(body.get("model", ""))):
            record.cache_write_tokens = total - cached  # the new prefix is written

    # ------------------------------------------------------------------ texts

    def _summary_text(self, prompt: str, *, claude: bool) -> str:
        body = "\n".join(self.script.summary_lines(prompt))
        if claude:
            return (
                "<analysis>\nThe user asked me to read the log files one by one.\n</analysis>\n\n"
                f"<summary>\n{body}\n</summary>"
            )
        return body

    def _final_text(self, prompt: str) -> str:
        return self.script.final_text(prompt)


# ---------------------------------------------------------------------- Anthropic helpers


def _metadata_session(body: Mapping[str, Any]) -> str | None:
    user_id = (body.get("metadata") or {}).get("user_id")
    if isinstance(user_id, str):
        try:
            return json.loads(user_id).get("session_id")
        except (ValueError, AttributeError):
            match = re.search(r"session_([0-9a-f-]{36})", user_id)
            return match.group(1) if match else None
    return None


def _content_blocks(message: Mapping[str, Any]) -> list[Any]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return list(content) if isinstance(content, list) else []


def _anthropic_blocks(body: Mapping[str, Any]) -> list[tuple[str, bool, Mapping[str, Any] | None]]:
    """The prompt as (canonical text, has a breakpoint, its cache_control) per block, in the
    order the cache sees it: tools, system, messages."""
    out: list[tuple[str, bool, Mapping[str, Any] | None]] = []
    for tool in body.get("tools") or []:
        control = tool.get("cache_control") if isinstance(tool, Mapping) else None
        out.append((_canon(tool), control is not None, control))
    system = body.get("system")
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    for block in system or []:
        control = block.get("cache_control") if isinstance(block, Mapping) else None
        out.append((_canon(block), control is not None, control))
    for message in body.get("messages") or []:
        role = message.get("role") if isinstance(message, Mapping) else None
        for j, block in enumerate(_content_blocks(message) if isinstance(message, Mapping) else []):
            control = block.get("cache_control") if isinstance(block, Mapping) else None
            head = f"{role}:" if j == 0 else ""
            out.append((head + _canon(block), control is not None, control))
    top = body.get("cache_control")  # automatic caching: the last block is the breakpoint
    if isinstance(top, Mapping) and out:
        text, _, _ = out[-1]
        out[-1] = (text, True, top)
    return out


def _last_user_text(body: Mapping[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if isinstance(message, Mapping) and message.get("role") == "user":
            return "\n".join(
                str(b.get("text", "")) for b in _content_blocks(message) if isinstance(b, Mapping)
            )
    return ""


def _claude_kind(body: Mapping[str, Any]) -> str:
    last = _last_user_text(body)
    if (
        "<summary>" in last
        and "summary" in last.lower()
        and ("conversation" in last.lower() or "compact" in last.lower())
    ):
        return "compaction"
    names = {t.get("name") for t in body.get("tools") or [] if isinstance(t, Mapping)}
    if "Bash" not in names:
        return "side"
    return "main"


def _anthropic_events(
    message: Mapping[str, Any],
    usage: Mapping[str, Any],
    transformations: list[dict[str, Any]],
    headers: Mapping[str, str],
) -> list[bytes]:
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"], 40)]
        elif kind == "thinking":
            opening = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": p} for p in _pieces(block["thinking"], 40)
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        else:
            opening = {**block, "input": {}}
            arguments = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": ""}] + [
                {"type": "input_json_delta", "partial_json": p} for p in _pieces(arguments, 30)
            ]
        events.append({"type": "content_block_start", "index": index, "content_block": opening})
        if index == 0:
            events.append({"type": "ping"})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    delta: dict[str, Any] = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
        "usage": {
            "input_tokens": usage["input_tokens"],
            "cache_creation_input_tokens": usage["cache_creation_input_tokens"],
            "cache_read_input_tokens": usage["cache_read_input_tokens"],
            "output_tokens": usage["output_tokens"],
        },
    }
    if BINDING_BETA in headers.get("anthropic-beta", ""):
        delta["input_transformations"] = transformations
    events.append(delta)
    events.append({"type": "message_stop"})
    return [sse(e["type"], e) for e in events]


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


# ---------------------------------------------------------------------- Responses helpers


def _item_texts(item: Mapping[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    return ""


def _codex_kind(body: Mapping[str, Any], headers: Mapping[str, str]) -> str:
    try:
        meta = json.loads(headers.get("x-codex-turn-metadata", "") or "{}")
    except ValueError:
        meta = {}
    if isinstance(meta, Mapping) and meta.get("request_kind") == "compaction":
        return "compaction"
    items = [i for i in body.get("input") or [] if isinstance(i, Mapping)]
    if items and items[-1].get("type") == "compaction_trigger":
        return "compaction"
    users = [i for i in items if i.get("role") == "user"]
    if users and "CONTEXT CHECKPOINT COMPACTION" in _item_texts(users[-1]):
        return "compaction"
    if isinstance(meta, Mapping) and meta.get("request_kind") not in (None, "turn"):
        return "side"
    return "main"


def _message_item(n: int, text: str) -> dict[str, Any]:
    return {
        "id": f"msg_up{n:06d}",
        "type": "message",
        "status": "completed",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}],
    }


def _reasoning_item(n: int, summary: str) -> dict[str, Any]:
    return {
        "id": f"rs_up{n:06d}",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": "gAAAAAB" + base64.urlsafe_b64encode(summary.encode() * 3).decode(),
    }


def _response_object(
    body: Mapping[str, Any], n: int, items: list[dict[str, Any]], usage: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The fake provider's Response object, with this upstream's ids and its own usage."""
    status = "completed" if usage is not None else "in_progress"
    response = response_object(body, n, Reply(), status=status, output=items)
    return {**response, "id": f"resp_up{n:06d}", "usage": usage}


def _responses_events(body: Mapping[str, Any], final: Mapping[str, Any]) -> list[bytes]:
    pending = {**final, "status": "in_progress", "output": [], "usage": None, "completed_at": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": pending},
        {"type": "response.in_progress", "response": pending},
    ]
    for index, item in enumerate(final["output"]):
        common = {"item_id": item["id"], "output_index": index}
        kind = item["type"]
        if kind == "message":
            text = item["content"][0]["text"]
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "content": []},
                }
            )
            part = {**common, "content_index": 0}
            empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            events.append({"type": "response.content_part.added", **part, "part": empty})
            for piece in _pieces(text, 40):
                events.append(
                    {"type": "response.output_text.delta", **part, "delta": piece, "logprobs": []}
                )
            events.append(
                {"type": "response.output_text.done", **part, "text": text, "logprobs": []}
            )
            events.append(
                {"type": "response.content_part.done", **part, "part": item["content"][0]}
            )
        elif kind == "custom_tool_call":
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": index,
                    "item": {**item, "status": "in_progress", "input": ""},
                }
            )
            for piece in _pieces(item["input"], 40):
                events.append(
                    {"type": "response.custom_tool_call_input.delta", **common, "delta": piece}
                )
            events.append(
                {"type": "response.custom_tool_call_input.done", **common, "input": item["input"]}
            )
        else:  # reasoning
            opening = {"id": item["id"], "type": "reasoning", "summary": []}
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": opening}
            )
            summary = item["summary"][0]["text"]
            at = {**common, "summary_index": 0}
            events.append(
                {
                    "type": "response.reasoning_summary_part.added",
                    **at,
                    "part": {"type": "summary_text", "text": ""},
                }
            )
            events.append({"type": "response.reasoning_summary_text.delta", **at, "delta": summary})
            events.append({"type": "response.reasoning_summary_text.done", **at, "text": summary})
            events.append(
                {"type": "response.reasoning_summary_part.done", **at, "part": item["summary"][0]}
            )
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": final})
    return [
        sse(e["type"], {"type": e["type"], "sequence_number": s, **e}) for s, e in enumerate(events)
    ]


def _openai_models(body: Any) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"id": "gpt-6.2-sol", "object": "model", "created": CREATED, "owned_by": "openai"}
        ],
    }
