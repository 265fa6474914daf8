"""A session's options: one frozen value, checked once, shared by every session built from it.

:class:`SessionOptions` holds every keyword of :class:`~tomc.chat.AutomaticChatSession` with
the same defaults. The choices and checks that the gateway's settings and headers also take
(the thinking-prefix behaviours, what a context target may be) are defined here once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from .._core.errors import InvalidOptionError
from ._profiles import ModelProfile
from .dialects import DIALECTS

__all__ = [
    "COST_POLICIES",
    "MEMORY_ROLES",
    "POLICIES",
    "THINKING_PREFIX",
    "WORK_QUERIES",
    "SessionOptions",
    "check_choice",
    "check_seconds",
    "check_tokens",
]

POLICIES = ("stable", "cadence")
#: How the stable policy decides when and how deep to rebuild: priced in the provider's cache
#: terms (:mod:`tomc.chat._account`), or only by the window and ``growth_headroom``.
COST_POLICIES = ("priced", "window")
WORK_QUERIES = ("task", "task+step")
#: What to do with Anthropic signed thinking after a rewritten prefix: send such a request as it
#: is, or let the provider drop the stale blocks (see :mod:`.dialects._anthropic_messages`).
THINKING_PREFIX = ("passthrough", "drop_block")
MEMORY_ROLES = ("user", "system", "developer", "assistant")


def check_choice(name: str, value: Any, choices: Sequence[str]) -> None:
    """Refuse ``value`` unless it is one of ``choices``, naming the option."""
    if value not in choices:
        raise InvalidOptionError(
            f"{name} must be one of {', '.join(map(repr, choices))}, not {value!r}"
        )


def check_tokens(name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as a number of tokens of at least ``minimum``, else an error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptionError(f"{name} must be a number of tokens, not {value!r}")
    if value < minimum:
        if minimum == 1:
            raise InvalidOptionError(f"{name} must be positive")
        raise InvalidOptionError(f"{name} must be >= {minimum} tokens, not {value}")
    return value


def check_seconds(name: str, value: Any) -> float:
    """``value`` as a finite number of seconds >= 0, else an error naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise InvalidOptionError(f"{name} must be a number of seconds >= 0, not {value!r}")
    return float(value)


@dataclass(frozen=True)
class SessionOptions:
    """Every option of :class:`~tomc.chat.AutomaticChatSession`, validated when made.

    ``AutomaticChatSession(options=SessionOptions(...))`` is the same session as
    ``AutomaticChatSession(...)`` with the same keywords; one options value may be shared by any
    number of sessions (it never changes). ``min_recent_messages`` is stored resolved (``None``
    becomes ``keep_recent_messages``), ``backoff_thresholds`` sorted and ``model_profiles`` as
    read-only :class:`~tomc.chat.ModelProfile` values. A bad value raises
    :class:`tomc.InvalidOptionError` naming the option.
    """

    refresh_policy: str = "stable"
    refresh_every: int = 2
    stable_growth_tokens: int | None = None
    native_cooldown_requests: int = 2
    native_pause_limit: int = 8
    deployment_context_limit: int | None = None
    context_target: int | None = None
    output_reserve: int = 8192
    budget_tokens: int | None = None
    keep_recent_messages: int = 6
    min_recent_messages: int | None = None
    strategy: str = "tomc_raw"
    model_profiles: Mapping[str, ModelProfile | Mapping[str, Any]] | None = None
    memory_role: str = "user"
    growth_headroom: float = 0.25
    backoff_thresholds: Sequence[float] = (0.5, 0.9)
    work_query: str = "task+step"
    api: str | None = None
    thinking_prefix: str = "drop_block"
    compiler: Callable[..., Any] | None = None
    cost_policy: str = "priced"
    cache_ttl_s: float | None = None
    max_overshoot: float = 0.01
    payback_requests: int = 4
    compile_floor: int = 32_000
    memory_floor: int = 8192
    compile_deadline_s: float | None = None

    def __post_init__(self) -> None:
        check_choice("refresh_policy", self.refresh_policy, POLICIES)
        check_choice("work_query", self.work_query, WORK_QUERIES)
        check_choice("thinking_prefix", self.thinking_prefix, THINKING_PREFIX)
        if self.api is not None:
            check_choice("api", self.api, tuple(DIALECTS))
        check_choice("memory_role", self.memory_role, MEMORY_ROLES)
        check_choice("cost_policy", self.cost_policy, COST_POLICIES)
        if self.cache_ttl_s is not None:
            self._set("cache_ttl_s", check_seconds("cache_ttl_s", self.cache_ttl_s))
        if self.compile_deadline_s is not None:
            deadline = check_seconds("compile_deadline_s", self.compile_deadline_s)
            if not deadline:
                raise InvalidOptionError("compile_deadline_s must be > 0 (None: no deadline)")
            self._set("compile_deadline_s", deadline)
        if not 0 <= self.max_overshoot < 1:
            raise InvalidOptionError(f"max_overshoot must be in [0, 1), not {self.max_overshoot}")
        if isinstance(self.payback_requests, bool) or not isinstance(self.payback_requests, int):
            raise InvalidOptionError("payback_requests must be a whole number of requests")
        if self.payback_requests < 1:
            raise InvalidOptionError("payback_requests must be >= 1")
        if self.refresh_every < 1:
            raise InvalidOptionError("refresh_every must be >= 1")
        if not 0 <= self.growth_headroom < 1:
            raise InvalidOptionError("growth_headroom must be in [0, 1)")
        for name in ("keep_recent_messages", "output_reserve", "native_cooldown_requests"):
            if getattr(self, name) < 0:
                raise InvalidOptionError(f"{name} must be >= 0")
        if self.native_pause_limit < 1:
            raise InvalidOptionError("native_pause_limit must be >= 1")
        for name in (
            "stable_growth_tokens",
            "deployment_context_limit",
            "context_target",
            "budget_tokens",
            "compile_floor",
            "memory_floor",
        ):
            value = getattr(self, name)
            if value is not None:
                check_tokens(name, value)
        # None: the recent tail is never shortened (the library's guarantee).
        keep = self.keep_recent_messages
        least = self.min_recent_messages
        self._set("min_recent_messages", keep if least is None else max(0, min(least, keep)))
        self._set("backoff_thresholds", tuple(sorted(self.backoff_thresholds)))
        profiles = {
            name: value
            if isinstance(value, ModelProfile)
            else ModelProfile.from_mapping(name, value)
            for name, value in (self.model_profiles or {}).items()
        }
        self._set("model_profiles", MappingProxyType(profiles))

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)  # normalising a frozen value once, while it is made

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, in the constructor's order."""
        return tuple(field.name for field in fields(cls))
