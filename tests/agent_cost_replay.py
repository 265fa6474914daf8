"""Price a change of TOMC's policy without the agent CLIs: replay a recorded direct run.

The scripted provider answers the same whatever its prompt holds, so a direct run's requests are
what the agent would have sent through TOMC too. :func:`replay_through_tomc` sends each of them
through the gateway's own steps (the request view, the conversation key, one session per
conversation with the gateway's options, the agent's default target, the recorded times) to a
fresh scripted upstream over loopback HTTP, on a clock that replays the recorded times (so a
pause expires the caches as it did), and reads what that upstream billed:
``python -m benchmarks.real_agents --replay`` and ``tests/gateway/test_real_agents_defaults.py``
compare it with a real ``tomc run``. It holds while the direct run never compacted itself:
after that, the agent sent what TOMC would have spared it.

The result also holds every request the upstream received, rewritten (``ReplayResult.run``, a
:class:`~real_agents.RunResult`): its final request is what TOMC would have sent last, so
``run.final_score()`` scores offline what a live ``tomc run`` keeps
(``python -m benchmarks.real_agents --replay-fidelity``). The figures differ a little from a
live run's, since a live agent reacts to the rewritten conversation (its token counts, its own
compaction). :func:`replay_masked` does the same for observation masking
(:func:`real_agents.mask_observations` of every request).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import httpx

from agent_upstream import AgentRequest, AgentUpstream, Script
from real_agents import RunResult, mask_observations
from tomc._gateway.agents.limits import request_limit
from tomc._gateway.proxy.options import SESSION_OPTIONS
from tomc._gateway.proxy.routing import conversation_key, request_view
from tomc.chat import AutomaticChatSession, SessionOptions

__all__ = ["ReplayResult", "replay_masked", "replay_through_tomc"]

_APIS = {"/v1/messages": "messages", "/v1/responses": "responses"}
_SKIPPED_HEADERS = frozenset({"host", "content-length", "connection", "accept-encoding"})
#: What a replay does to one recorded request: its body to send (``headers`` may be changed in
#: place) and what to tell of the prompt tokens the upstream counted (or ``None``).
Rewrite = Callable[[AgentRequest, dict[str, str]], tuple[Any, Callable[[int], None] | None]]


@dataclass(frozen=True)
class ReplayResult:
    """What the upstream billed for the replayed run, and the largest prompt it saw; ``run``
    holds every request it received (the rewritten bodies) as a run of the same script."""

    billed_input: float
    largest_prompt: int
    requests: int
    run: RunResult | None = None


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _replay(direct: RunResult, script: Script, rewrite: Rewrite, mode: str) -> ReplayResult:
    """Send ``direct``'s model requests, each as ``rewrite`` makes it, to a fresh scripted
    upstream on the recorded clock."""
    clock = _Clock()
    started = time.monotonic()
    with AgentUpstream(script, clock=clock) as upstream, httpx.Client(timeout=120) as http:
        for record in direct.requests:
            if record.method != "POST" or record.kind not in ("main", "compaction", "side"):
                continue
            clock.now = record.received_at
            headers = {k: v for k, v in record.headers.items() if k.lower() not in _SKIPPED_HEADERS}
            body, observe = rewrite(record, headers)
            url = f"{upstream.root_url}{record.path}" + (f"?{record.query}" if record.query else "")
            http.post(url, json=body, headers=headers).read()
            answered = upstream.requests[-1]
            if observe is not None and answered.status < 400 and answered.prompt_tokens:
                observe(answered.prompt_tokens)
        received = list(upstream.requests)
    calls = [r for r in received if r.is_model_call and r.status < 400]
    run = RunResult(
        agent=direct.agent,
        mode=mode,
        command=[],
        exit_code=direct.exit_code,
        stdout="",
        stderr="",
        seconds=time.monotonic() - started,
        requests=received,
        script=direct.script,
    )
    return ReplayResult(
        billed_input=sum(r.billed_input for r in calls),
        largest_prompt=max((r.prompt_tokens for r in calls), default=0),
        requests=len(calls),
        run=run,
    )


#: The gateway's options without its rebuild deadline: a replay measures what TOMC sends, the
#: same on any machine, where a deadline would make it depend on the machine's speed.
REPLAY_OPTIONS = replace(SESSION_OPTIONS, compile_deadline_s=None)


def replay_through_tomc(
    direct: RunResult, options: SessionOptions = REPLAY_OPTIONS
) -> ReplayResult:
    """``direct``'s model requests, decided by TOMC as the gateway would (with ``options``, the
    gateway's by default), billed by a fresh scripted upstream (see the module docstring)."""
    sessions: dict[Any, AutomaticChatSession] = {}
    script = direct.script

    def rewrite(record: AgentRequest, headers: dict[str, str]):
        body = record.body
        api = _APIS.get(record.path)
        if record.path == "/v1/responses/compact":  # the agent compacting: a cooldown
            view = request_view("responses", record.path, body)
            compacted = sessions.get(conversation_key("responses", headers, view))
            if compacted is not None:
                compacted.note_compaction("responses compact endpoint")
        if api is None:
            return body, None
        view = request_view(api, record.path, body)
        key = conversation_key(api, headers, view)
        session = sessions.get(key)
        if session is None:
            session = sessions[key] = AutomaticChatSession(options=options)
        limit = request_limit(api, headers, view)
        prepared = session.prepare_request(
            view,
            api=api,
            context_target=limit.target if limit is not None else None,
            now=record.received_at,
            cache_ttl_s=script.cache_ttl_s,
        )
        for name, value in prepared.headers.items():
            joined = headers.get(name)
            headers[name] = f"{joined},{value}" if joined else value
        return prepared.body, session.observe_usage

    return _replay(direct, script, rewrite, "tomc (offline replay)")


def replay_masked(direct: RunResult, keep: int = 10) -> ReplayResult:
    """``direct``'s model requests with observation masking (every tool output but the newest
    ``keep`` replaced by a placeholder), billed by a fresh scripted upstream. Its prefix check of
    preserved thinking is off: masking alone would send thinking blocks whose prefix changed (a
    gateway doing it would have to drop them), and they are billed as kept."""

    def rewrite(record: AgentRequest, headers: dict[str, str]):
        return mask_observations(record.body, keep), None

    script = replace(direct.script, prefix_check="never")
    return _replay(direct, script, rewrite, f"observation masking ({keep})")
