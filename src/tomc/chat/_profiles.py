"""Model profiles: documented context windows and output limits, with their sources.

The bundled table lives in ``tomc/chat/data/model_profiles.json``. Callers override or extend it per
session. A model id that is not listed is looked up without its decorations (``[1m]``, cloud
prefixes, routers' provider prefixes, dated snapshot suffixes), then by the family rule (see
``_CLAUDE_ID`` / ``_GPT_ID``): ``claude-opus-4-9`` gets the limits of ``claude-opus-4-8``,
``gpt-5.6-codex-mini`` those of a ``gpt-5.6-*`` sibling. Anything else gets no assumed capacity.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

from .._core.errors import InvalidOptionError
from .._core.tokens import BPE_ENCODINGS
from .dialects import CacheTerms

__all__ = ["ModelProfile", "ProfileTable", "bundled_profiles", "effective_window"]

# Dated snapshots ("gpt-4o-2024-08-06", "claude-opus-4-1-20250805") share the family's limits.
_SNAPSHOT_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")
# Spellings of the same model: Claude Code's "[1m]" suffix, cloud prefixes and version tags
# ("us.anthropic.claude-opus-4-8-v1:0"), routers' provider prefixes ("openai/gpt-5.5",
# "deepseek/deepseek-flash", LiteLLM's "moonshot/kimi-k3", OpenRouter's "moonshotai/kimi-k3").
_DECORATIONS = (
    re.compile(r"(\[1m\])+$", re.IGNORECASE),
    re.compile(r"^(?:[a-z]{2,4}\.)?anthropic\."),
    re.compile(r"^(?:openai|anthropic|deepseek|moonshotai|moonshot)/"),
    re.compile(r"-v\d+(?::\d+)?$"),
)
# Family rule: "claude-<tier>-<major>[-<minor>]" and "gpt-<major>[.<minor>][-<variant>]". A new
# id of a known family takes the limits (window, encoding) of its nearest known sibling: the
# same tier (Claude) or the same major version (GPT) with the highest version not above its own,
# preferring the same variant, then the plain id, then the first by name.
_CLAUDE_ID = re.compile(r"^(claude-[a-z]+)-(\d+(?:-\d{1,2})?)$")
_GPT_ID = re.compile(r"^gpt-(\d+)(?:\.(\d+))?(-.*)?$")


@dataclass(frozen=True, slots=True)
class ModelProfile:
    """A model's documented limits. ``source`` says where the figures come from."""

    model: str
    context_window: int
    max_output_tokens: int | None = None
    provider: str = ""
    source: str = ""
    #: The model's BPE encoding, where published (``o200k_base``): fit decisions count exactly.
    encoding: str | None = None
    #: The model's own prompt-cache prices and lifetime where they differ from its API
    #: format's rules (``"cache": {"read": 0.05}`` in the table).
    cache: CacheTerms | None = None
    #: The output the provider allows a request that sets no limit (Kimi K3: 131,072), which
    #: the prompt must leave room for.
    default_output_tokens: int | None = None

    @classmethod
    def from_mapping(cls, model: str, data: Mapping[str, Any]) -> ModelProfile:
        window = data.get("context_window")
        if not isinstance(window, int) or isinstance(window, bool) or window <= 0:
            raise InvalidOptionError(f"profile {model!r} needs a positive integer context_window")
        output = data.get("max_output_tokens")
        if output is not None and (not isinstance(output, int) or output <= 0):
            raise InvalidOptionError(f"profile {model!r}: max_output_tokens must be positive")
        default_output = data.get("default_output_tokens")
        if default_output is not None and (
            isinstance(default_output, bool)
            or not isinstance(default_output, int)
            or not 0 < default_output < window
        ):
            raise InvalidOptionError(
                f"profile {model!r}: default_output_tokens must be positive and under the window"
            )
        encoding = data.get("encoding")
        if encoding is not None and encoding not in BPE_ENCODINGS:
            raise InvalidOptionError(
                f"profile {model!r}: encoding must be one of {', '.join(BPE_ENCODINGS)}"
            )
        return cls(
            model=model,
            context_window=window,
            max_output_tokens=output,
            provider=str(data.get("provider", "")),
            source=str(data.get("source", "")),
            encoding=encoding,
            cache=_cache_terms(model, data.get("cache")),
            default_output_tokens=default_output,
        )


_CACHE_KEYS = ("read", "write", "ttl_s")


def _cache_terms(model: str, data: Any) -> CacheTerms | None:
    """A profile's ``cache`` entry (``read``, ``write``, ``ttl_s``), checked."""
    if data is None or isinstance(data, CacheTerms):
        return data
    if not isinstance(data, Mapping):
        raise InvalidOptionError(
            f"profile {model!r}: cache must be a mapping of {', '.join(_CACHE_KEYS)}"
        )
    unknown = sorted(set(data) - set(_CACHE_KEYS))
    if unknown:
        raise InvalidOptionError(
            f"profile {model!r}: unknown cache key {unknown[0]!r} "
            f"(expected {', '.join(_CACHE_KEYS)})"
        )
    try:
        return CacheTerms(**{key: data[key] for key in _CACHE_KEYS if key in data})
    except ValueError as exc:
        raise InvalidOptionError(f"profile {model!r}: {exc}") from None


@lru_cache(maxsize=1)
def bundled_profiles() -> dict[str, ModelProfile]:
    """The profiles shipped with TOMC, read once per process."""
    text = resources.files(__package__).joinpath("data/model_profiles.json").read_text("utf-8")
    models = json.loads(text)["models"]
    return {name: ModelProfile.from_mapping(name, data) for name, data in models.items()}


class ProfileTable:
    """Bundled profiles plus caller overrides, with a one-entry cache keyed by model id.

    A session asks for the same model on every request; the lookup runs again only when the
    model id changes.
    """

    def __init__(
        self, overrides: Mapping[str, ModelProfile | Mapping[str, Any]] | None = None
    ) -> None:
        self._table = dict(bundled_profiles())
        for name, value in (overrides or {}).items():
            self._table[name] = (
                value if isinstance(value, ModelProfile) else ModelProfile.from_mapping(name, value)
            )
        self._cached_id: str | None = None
        self._cached: ModelProfile | None = None
        self.lookups = 0  # how many real lookups ran; the cache makes repeats free

    def get(self, model: str) -> ModelProfile | None:
        """The profile for ``model`` (exact id, else its undated family), or ``None``."""
        if model == self._cached_id:
            return self._cached
        self.lookups += 1
        profile = self._table.get(model)
        if profile is None:
            profile = self._family(model)
        self._cached_id, self._cached = model, profile
        return profile

    def _family(self, model: str) -> ModelProfile | None:
        """The profile of ``model``'s undecorated, undated id, else of its nearest sibling."""
        name = model.strip().lower()
        for pattern in _DECORATIONS:
            name = pattern.sub("", name)
        name = _SNAPSHOT_SUFFIX.sub("", name)
        if name in self._table:
            return self._table[name]
        key = _sibling_key(name)
        if key is None:
            return None
        group, version, variant = key
        candidates = []
        for known in self._table:
            other = _sibling_key(known)
            if other is None or other[0] != group or other[1] > version:
                continue
            closeness = 0 if other[2] == variant else 1 if not other[2] else 2
            negated = tuple(-part for part in other[1])
            candidates.append((negated, closeness, known))
        return self._table[min(candidates)[2]] if candidates else None


def _sibling_key(model: str) -> tuple[str, tuple[int, ...], str] | None:
    """(family group, version, variant) for the family rule, or ``None``."""
    match = _CLAUDE_ID.match(model)
    if match:
        return match[1], tuple(int(part) for part in match[2].split("-")), ""
    match = _GPT_ID.match(model)
    if match:
        return f"gpt-{match[1]}", (int(match[1]), int(match[2] or 0)), match[3] or ""
    return None


def effective_window(profile: ModelProfile | None, deployment_limit: int | None) -> int | None:
    """The smaller of the model's window and the deployment limit, or ``None`` if neither is set."""
    candidates = [
        value
        for value in (profile.context_window if profile else None, deployment_limit)
        if value is not None
    ]
    return min(candidates) if candidates else None
