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
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from agent_upstream import AgentUpstream
from real_agents import RunResult
from tomc._gateway.agents.limits import request_limit
from tomc._gateway.proxy.options import SESSION_OPTIONS
from tomc._gateway.proxy.routing import conversation_key, request_view
from tomc.chat import AutomaticChatSession, SessionOptions

__all__ = ["ReplayResult", "replay_through_tomc"]

_APIS = {"/v1/messages": "messages", "/v1/responses": "responses"}
_SKIPPED_HEADERS = frozenset({"host", "content-length", "connection", "accept-encoding"})


@dataclass(frozen=True)
class ReplayResult:
    """What the upstream billed for the replayed run, and the largest prompt it saw."""

    billed_input: float
    largest_prompt: int
    requests: int


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def replay_through_tomc(
    direct: RunResult, options: SessionOptions = SESSION_OPTIONS
) -> ReplayResult:
    """``direct``'s model requests, decided by TOMC as the gateway would (with ``options``, the
    gateway's by default), billed by a fresh scripted upstream (see the module docstring)."""
    clock = _Clock()
    sessions = {}
    script = direct.script
    with AgentUpstream(script, clock=clock) as upstream, httpx.Client(timeout=120) as http:
        for record in direct.requests:
            if record.method != "POST" or record.kind not in ("main", "compaction", "side"):
                continue
            clock.now = record.received_at
            headers = {k: v for k, v in record.headers.items() if k.lower() not in _SKIPPED_HEADERS}
            body, session = record.body, None
            api = _APIS.get(record.path)
            if record.path == "/v1/responses/compact":  # the agent compacting: a cooldown
                view = request_view("responses", record.path, body)
                compacted = sessions.get(conversation_key("responses", headers, view))
                if compacted is not None:
                    compacted.note_compaction("responses compact endpoint")
            if api is not None:
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
                body = prepared.body
                for name, value in prepared.headers.items():
                    joined = headers.get(name)
                    headers[name] = f"{joined},{value}" if joined else value
            url = f"{upstream.root_url}{record.path}" + (f"?{record.query}" if record.query else "")
            http.post(url, json=body, headers=headers).read()
            answered = upstream.requests[-1]
            if session is not None and answered.status < 400 and answered.prompt_tokens:
                session.observe_usage(answered.prompt_tokens)
        calls = [r for r in upstream.requests if r.is_model_call and r.status < 400]
    return ReplayResult(
        billed_input=sum(r.billed_input for r in calls),
        largest_prompt=max((r.prompt_tokens for r in calls), default=0),
        requests=len(calls),
    )
