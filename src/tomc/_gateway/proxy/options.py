"""What the gateway asks of every conversation's session, and what one request asks of TOMC.

:data:`SESSION_OPTIONS` are the options every conversation's session starts from;
:class:`RequestOptions` reads a request's ``x-tomc-*`` headers (what ``tomc run`` sends) and
gives the context target that follows for it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from ...chat import AutomaticChatSession, SessionOptions
from ...chat._options import THINKING_PREFIX
from ..agents.limits import request_limit
from ..settings import TARGET_OFF, GatewaySettings, parse_context_target

__all__ = [
    "COMPILE_DEADLINE_S",
    "DEADLINE_ENV",
    "OWN_PREFIX",
    "SESSION_OPTIONS",
    "TARGET_HEADER",
    "THINKING_HEADER",
    "RequestOptions",
    "compile_deadline",
    "new_session",
    "warm_up",
]

logger = logging.getLogger("tomc.gateway")

#: Headers TOMC's own clients (``tomc run``) send to the gateway, which reads and removes them
#: before forwarding: ``x-tomc-context-target: N|off[; source=agent]`` and
#: ``x-tomc-thinking-prefix: passthrough|drop_block``.
OWN_PREFIX = "x-tomc-"
TARGET_HEADER = "x-tomc-context-target"
THINKING_HEADER = "x-tomc-thinking-prefix"

#: How long a rebuild may hold up the agent's request (a whole build of a resumed long session
#: reads every message): past it, the request goes out with the safe compaction and the rebuild
#: finishes off the request path for the next request (``compile_deadline_s`` of
#: :class:`~tomc.chat.SessionOptions`). :data:`DEADLINE_ENV` (seconds, or ``off``) overrides it.
#: 2 s, not 1: a Claude Code session's first build, at its 392K target, takes 0.51 s on a quiet
#: 2-core machine (``benchmarks.request_overhead``: 416K tokens) and twice that on a busy one;
#: each miss costs a second cache write (the safe memory, then the finished one).
COMPILE_DEADLINE_S = 2.0
DEADLINE_ENV = "TOMC_COMPILE_DEADLINE_S"


def compile_deadline(environ: Mapping[str, str] = os.environ) -> float | None:
    """The gateway's rebuild deadline: :data:`DEADLINE_ENV` when set (``off``: none), else
    :data:`COMPILE_DEADLINE_S`."""
    raw = environ.get(DEADLINE_ENV, "").strip()
    if not raw:
        return COMPILE_DEADLINE_S
    if raw.lower() in ("off", "none", "0"):
        return None
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        logger.warning(
            "%s=%r is not a number of seconds > 0 or 'off'; using %g s",
            DEADLINE_ENV,
            raw[:40],
            COMPILE_DEADLINE_S,
        )
        return COMPILE_DEADLINE_S
    return seconds


#: Every conversation's session options. The target and the thinking prefix are applied per
#: request (:mod:`tomc._gateway.proxy.rewrite`), so that settings saved while the gateway runs
#: reach running conversations too. An agent's recent steps may be shortened to the latest turn when
#: its tool outputs are big: otherwise each request right after a build would rebuild (a cache
#: miss each).
SESSION_OPTIONS = SessionOptions(min_recent_messages=0, compile_deadline_s=compile_deadline())


def new_session() -> AutomaticChatSession:
    """A new conversation's session, with :data:`SESSION_OPTIONS`."""
    return AutomaticChatSession(options=SESSION_OPTIONS)


#: Set while the warm-up's throwaway sessions run (in the warm-up's own thread only).
_WARMING: ContextVar[bool] = ContextVar("tomc_warming_up", default=False)


class _WarmUpMark(logging.Filter):
    """Prefixes ``warm-up:`` to the session's log lines of the warm-up: at ``--verbose`` they
    would otherwise read like the first real requests, with their own "so far" figures."""

    def filter(self, record: logging.LogRecord) -> bool:
        if _WARMING.get():
            record.msg = f"warm-up: {record.msg}"
        return True


_WARM_UP_MARK = _WarmUpMark()


def warm_up() -> list[str]:
    """Load what a process's first request would otherwise wait for (the BPE vocabulary, about
    0.3 s, and the compiler's modules): a throwaway session compiles one small request in each
    format; returns their decision codes. Never raises: warming is only an optimisation. Its
    sessions' log lines start with ``warm-up:``."""
    logging.getLogger("tomc.chat").addFilter(_WARM_UP_MARK)  # once: the same filter is kept
    warming = _WARMING.set(True)
    try:
        return _warm_up()
    finally:
        _WARMING.reset(warming)


def _warm_up() -> list[str]:
    step = "line {k}: retries = {k} in src/service/module.py\n" * 40
    history = [{"role": "user", "content": "Fix the retry bug in src/service/module.py."}]
    for k in range(6):
        history += [
            {"role": "assistant", "content": f"Reading part {k}."},
            {"role": "user", "content": step.format(k=k)},
        ]
    bodies = {
        "chat": {"model": "gpt-4o", "messages": history},
        "messages": {"model": "claude-opus-4-8", "max_tokens": 64, "messages": history},
        "responses": {"model": "gpt-6.2-sol", "input": history},
    }
    codes = []
    try:
        for api, body in bodies.items():
            prepared = new_session().prepare_request(body, api=api, context_target=1_000)
            codes.append(prepared.decision.code)
    except Exception:  # pragma: no cover - an optimisation must not fail the gateway
        logger.debug("warm-up failed", exc_info=True)
    return codes


@dataclass(frozen=True)
class RequestOptions:
    """What a request asks of TOMC through its ``x-tomc-*`` headers.

    ``x-tomc-context-target: N`` or ``off`` is an explicit per-run option (it wins over the
    settings file); ``x-tomc-context-target: N; source=agent`` is the default ``tomc run``
    computed from the agent's own configuration (the settings file wins over it).
    ``x-tomc-thinking-prefix: passthrough|drop_block`` overrides the setting. A value that
    does not parse is ignored (logged), never fatal.
    """

    target: int | str | None = None
    agent_target: int | None = None
    thinking_prefix: str | None = None

    @classmethod
    def from_headers(cls, headers: dict[str, str]) -> RequestOptions:
        target = agent_target = thinking = None
        raw = headers.get(TARGET_HEADER, "").strip()
        if raw:
            value, _, params = raw.partition(";")
            try:
                parsed = parse_context_target(value)
            except Exception:
                logger.warning("ignoring %s: %r", TARGET_HEADER, raw)
                parsed = None
            if "source=agent" in params.replace(" ", "").lower():
                agent_target = parsed if isinstance(parsed, int) else None
            else:
                target = parsed
        raw = headers.get(THINKING_HEADER, "").strip().lower()
        if raw in THINKING_PREFIX:
            thinking = raw
        elif raw:
            logger.warning("ignoring %s: %r", THINKING_HEADER, raw)
        return cls(target, agent_target, thinking)

    def context_target(
        self, settings: GatewaySettings, api: str, headers: dict[str, str], data: dict[str, Any]
    ) -> tuple[int | None, str]:
        """The target for one request and where it comes from. Precedence: an explicit
        per-run option (header) > the settings file > the agent's default (sent by ``tomc run``
        from the agent's own configuration, else derived from the request)."""
        if self.target is not None:
            return (None if self.target == TARGET_OFF else self.target), "tomc run option"
        setting = settings.context_target
        if setting == TARGET_OFF:
            return None, "settings: off"
        if isinstance(setting, int):
            return setting, "settings"
        if isinstance(self.agent_target, int):
            return self.agent_target, "agent configuration (tomc run)"
        limit = request_limit(api, headers, data)
        if limit is None or limit.target is None:
            return None, "no default (unknown model)"
        return limit.target, f"{limit.agent} default ({limit.source})"
