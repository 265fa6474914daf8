"""Where Claude Code and Codex compact on their own, and TOMC's default context target from it.

Pure functions (no I/O): the launcher feeds them the environment and configuration it starts
the agent with, the gateway feeds them what a request shows (agent, model, betas).

**Claude Code 2.1.197** (read from the shipped bundle, ``@anthropic-ai/claude-code`` 2.1.197,
``bin/claude.exe``; the minified names are given so a later version can be checked):

- Default model: Opus 4.8. The alias ``opus`` resolves to ``claude-opus-4-8`` and, on the
  first-party API for everyone but Pro, the default setting is ``claude-opus-4-8[1m]`` (``$4r``,
  ``cT``, ``bU``); the ``[1m]`` suffix makes it send the ``context-1m-2025-08-07`` beta.
- Window it assumes (``rE`` / ``WIi``): 1,000,000 with a ``[1m]`` suffix or that beta; also for
  models whose catalog entry says ``native_1m`` (opus-4-7, opus-4-8, sonnet-5, fable-5), but only
  when ``ANTHROPIC_BASE_URL`` is unset or api.anthropic.com (``Eu``), so never behind a gateway;
  otherwise 200,000 (``uNt``). ``CLAUDE_CODE_DISABLE_1M_CONTEXT`` turns the 1M cases off.
- Output reservation: ``min(max output tokens, 20,000)`` (``Gre``: ``Math.min(Kut(e),_ua)``,
  ``_ua=20000``); every current model's default output limit is 32K or 64K, so 20,000.
  ``CLAUDE_CODE_MAX_OUTPUT_TOKENS`` can lower it.
- Compaction window (``P4``): ``CLAUDE_CODE_AUTO_COMPACT_WINDOW`` (integer, raised to at least
  100,000, capped at 1,000,000, invalid ignored), else the ``autoCompactWindow`` setting
  (100K-1M), else a per-model default (200,000 for claude-sonnet-4-6 / claude-opus-4-6 below a
  1M window; 967,000 for claude-sonnet-5), each capped at the assumed window; else the assumed
  window itself with source ``auto``.
- Threshold (``eBn``): ``window - reservation - 13,000``; ``CLAUDE_AUTOCOMPACT_PCT_OVERRIDE=P``
  (0 < P <= 100) makes it ``min(floor((window - reservation) * P / 100), that)``.
- Source ``auto``: no proactive compaction at all (``MRf``: ``if(pJ()&&!jLe(t,n))return!1``);
  Claude Code compacts reactively when the API refuses the prompt, i.e. at the provider's
  window. This is the out-of-the-box case for claude-opus-4-8.
- ``DISABLE_AUTO_COMPACT`` (or ``DISABLE_COMPACT``, or ``"autoCompactEnabled": false`` in its
  settings) turns auto-compaction off (``gC``).
- Figure compared (``yS``): the last response's usage, ``input + cache_creation + cache_read +
  output`` tokens (``qre``), plus a rough estimate of the messages after that response.

**Codex 0.171** (``@openai/codex`` 0.171.0; the model catalog embedded in its binary, and
``codex-rs/protocol/src/openai_models.rs``, ``codex-rs/models/.../model_info.rs`` in
github.com/openai/codex):

- Default model: the catalog's highest-priority listed model, ``gpt-6.2-sol`` (priority 1).
- Catalog windows: gpt-6.2-sol, gpt-6.1-sol, gpt-6.1-terra 500,000; gpt-6.2-astra, gpt-6-astra,
  gpt-6-sol, gpt-6-luna, gpt-5.6-sol/-terra/-luna 272,000; gpt-5.5 272,000 (its
  ``max_context_window`` is 272,000, the others' 872,000). No entry sets
  ``auto_compact_token_limit`` or ``effective_context_window_percent`` (default 95: the hard
  cap on input).
- Threshold (``ModelInfo::auto_compact_token_limit``): ``context_window * 9 / 10``; a
  configured ``model_auto_compact_token_limit`` wins but is capped at that 90%.
  ``model_context_window`` replaces the catalog window (capped at ``max_context_window``).
- Figure compared: the session's total token usage as the Responses API last reported it
  (input, cached input included, plus output), compared before each turn and after a turn that
  needs a follow-up.
- Codex sends no ``max_output_tokens``: nothing is reserved for output.

**TOMC's default target** is :data:`DEFAULT_TARGET_SHARE` of the agent's threshold, never below
:data:`TARGET_FLOOR`; with no threshold (auto-compaction off, or an agent or model whose
threshold is unknown), the same share of the model's window minus the output reservation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ...chat._profiles import ProfileTable
from ...chat.dialects import DIALECTS

__all__ = [
    "CLAUDE_DEFAULT_MODEL",
    "CODEX_CATALOG",
    "CODEX_DEFAULT_MODEL",
    "DEFAULT_TARGET_SHARE",
    "TARGET_FLOOR",
    "AgentLimit",
    "agent_defaults",
    "claude_code_limit",
    "codex_limit",
    "default_target",
    "detect_agent",
    "request_limit",
    "window_limit",
]

#: The share of the agent's own compaction threshold TOMC keeps each prompt under by default.
#: One constant, to be tuned from measurements.
DEFAULT_TARGET_SHARE = 0.4
#: A default target is never below this many tokens.
TARGET_FLOOR = 16_000

# ---------------------------------------------------------------- Claude Code 2.1.197
CLAUDE_DEFAULT_MODEL = "claude-opus-4-8"
CLAUDE_WINDOW = 200_000  # uNt
CLAUDE_1M_WINDOW = 1_000_000
CLAUDE_OUTPUT_RESERVE_CAP = 20_000  # _ua
CLAUDE_COMPACT_BUFFER = 13_000  # eBn
CLAUDE_WINDOW_MIN, CLAUDE_WINDOW_MAX = 100_000, 1_000_000  # tBn, hlo
CLAUDE_1M_BETA = "context-1m-2025-08-07"
#: Models whose catalog entry is ``native_1m`` (1M only on the first-party URL).
CLAUDE_NATIVE_1M = frozenset(
    {"claude-opus-4-7", "claude-opus-4-8", "claude-sonnet-5", "claude-fable-5"}
)
#: Per-model compaction windows (``Opp`` and ``gua``).
CLAUDE_MODEL_WINDOWS = {
    "claude-sonnet-4-6": 200_000,
    "claude-opus-4-6": 200_000,
    "claude-sonnet-5": 967_000,
}
#: Default max output tokens per model (``$ke``); all are above the 20K cap but these.
CLAUDE_SMALL_OUTPUT = {"claude-3-opus": 4096, "claude-3-haiku": 4096, "claude-3-sonnet": 8192}

# ---------------------------------------------------------------- Codex 0.171
CODEX_DEFAULT_MODEL = "gpt-6.2-sol"
#: slug: (context_window, max_context_window), from the catalog embedded in Codex 0.171.
CODEX_CATALOG: Mapping[str, tuple[int, int]] = {
    "gpt-6.2-sol": (500_000, 872_000),
    "gpt-6.2-astra": (272_000, 872_000),
    "gpt-6.1-sol": (500_000, 872_000),
    "gpt-6.1-terra": (500_000, 872_000),
    "gpt-6-astra": (272_000, 872_000),
    "gpt-6-sol": (272_000, 872_000),
    "gpt-6-luna": (272_000, 872_000),
    "gpt-5.6-sol": (272_000, 872_000),
    "gpt-5.6-terra": (272_000, 872_000),
    "gpt-5.6-luna": (272_000, 872_000),
    "gpt-5.5": (272_000, 272_000),
    "codex-auto-review": (272_000, 872_000),
}

_TRUE = {"1", "true", "yes", "on"}
_SUFFIX_1M = re.compile(r"(\[1m\])+$", re.IGNORECASE)


@dataclass(frozen=True)
class AgentLimit:
    """An agent's own compaction point for one model, and TOMC's default target from it."""

    agent: str
    model: str
    #: The context window the agent works with (for Claude Code: the compaction window).
    window: int | None
    #: Prompt tokens at which the agent compacts on its own; ``None`` when it does not.
    threshold: int | None
    #: Tokens the agent keeps free for the answer.
    output_reserve: int
    #: Where the threshold comes from (``CLAUDE_CODE_AUTO_COMPACT_WINDOW``, ``catalog``, ...).
    source: str
    target: int | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_target(
    threshold: int | None, window: int | None = None, output_reserve: int = 0
) -> int | None:
    """:data:`DEFAULT_TARGET_SHARE` of ``threshold`` (else of ``window - output_reserve``),
    at least :data:`TARGET_FLOOR`; ``None`` when neither is known."""
    if threshold is not None and threshold > 0:
        base = threshold
    elif window is not None and window > 0:
        base = window - output_reserve
    else:
        return None
    return max(TARGET_FLOOR, int(base * DEFAULT_TARGET_SHARE))


def _truthy(value: object) -> bool:
    return str(value or "").strip().lower() in _TRUE


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value).strip().replace("_", ""))
    except (TypeError, ValueError):
        return None


def _claude_family(model: str) -> str:
    """``claude-opus-4-8`` for ``claude-opus-4-8[1m]``, ``claude-opus-4-8-20260101``,
    ``us.anthropic.claude-opus-4-8-v1``, ..."""
    name = _SUFFIX_1M.sub("", model.strip().lower())
    match = re.search(r"claude-(?:\d(?:-\d)?-)?[a-z]+(?:-\d+){0,2}", name)
    if not match:
        return name
    family = re.sub(r"-\d{8}$", "", match.group(0))
    return family


def _profile_window(model: str, profiles: ProfileTable | None) -> int | None:
    profile = (profiles or ProfileTable()).get(model)
    return profile.context_window if profile else None


def claude_code_limit(
    model: str | None = None,
    environ: Mapping[str, str] | None = None,
    settings: Mapping[str, Any] | None = None,
    *,
    betas: str = "",
    first_party_url: bool = False,
    profiles: ProfileTable | None = None,
) -> AgentLimit:
    """Claude Code's compaction threshold for ``model`` (default :data:`CLAUDE_DEFAULT_MODEL`)
    under ``environ`` and its ``settings.json`` data; ``betas`` is the request's
    ``anthropic-beta`` header, ``first_party_url`` whether it talks to api.anthropic.com
    itself (never behind TOMC)."""
    env = environ or {}
    conf = settings or {}
    given = (model or env.get("ANTHROPIC_MODEL") or conf.get("model") or "").strip()
    one_m_suffix = bool(_SUFFIX_1M.search(given))
    family = _claude_family(given) if given else CLAUDE_DEFAULT_MODEL
    if family in ("opus", "best", "opusplan"):
        family = CLAUDE_DEFAULT_MODEL
    no_1m = _truthy(env.get("CLAUDE_CODE_DISABLE_1M_CONTEXT"))
    one_m = not no_1m and (
        one_m_suffix or CLAUDE_1M_BETA in betas or (first_party_url and family in CLAUDE_NATIVE_1M)
    )
    assumed = CLAUDE_1M_WINDOW if one_m else CLAUDE_WINDOW
    if not family.startswith("claude-") and _int(env.get("CLAUDE_CODE_MAX_CONTEXT_TOKENS")):
        assumed = _int(env["CLAUDE_CODE_MAX_CONTEXT_TOKENS"]) or assumed
    default_output = CLAUDE_SMALL_OUTPUT.get(family, 32_000)
    max_output = _int(env.get("CLAUDE_CODE_MAX_OUTPUT_TOKENS"))
    output = max_output if max_output and max_output > 0 else default_output
    reserve = min(output, CLAUDE_OUTPUT_RESERVE_CAP)
    enabled = not (
        _truthy(env.get("DISABLE_AUTO_COMPACT"))
        or _truthy(env.get("DISABLE_COMPACT"))
        or conf.get("autoCompactEnabled") is False
    )

    def done(window: int | None, threshold: int | None, source: str) -> AgentLimit:
        target = default_target(threshold, window, reserve)
        return AgentLimit("claude", family, window, threshold, reserve, source, target)

    if not enabled:
        return done(assumed, None, "auto-compaction off")
    configured: int | None = None
    source = ""
    raw = env.get("CLAUDE_CODE_AUTO_COMPACT_WINDOW", "")
    if raw:
        value = _int(raw)
        if value is not None and value > 0:
            configured = max(CLAUDE_WINDOW_MIN, min(value, CLAUDE_WINDOW_MAX))
            source = "CLAUDE_CODE_AUTO_COMPACT_WINDOW"
    if configured is None:
        value = _int(conf.get("autoCompactWindow"))
        if value is not None and CLAUDE_WINDOW_MIN <= value <= CLAUDE_WINDOW_MAX:
            configured, source = value, "settings autoCompactWindow"
    # Opus/Sonnet 4.6 only below a 1M window (Opp); Sonnet 5 always (gua).
    if (
        configured is None
        and family in CLAUDE_MODEL_WINDOWS
        and (family == "claude-sonnet-5" or assumed < CLAUDE_1M_WINDOW)
    ):
        configured, source = CLAUDE_MODEL_WINDOWS[family], "model default"
    if configured is None:
        # Source "auto": no proactive compaction; it compacts when the API refuses the prompt,
        # i.e. at the provider's real window (which behind a gateway can exceed the assumed one).
        api_window = max(assumed, _profile_window(family, profiles) or 0)
        return done(api_window, api_window - reserve, "reactive (provider window)")
    window = min(assumed, configured)
    effective = window - reserve
    threshold = effective - CLAUDE_COMPACT_BUFFER
    pct = env.get("CLAUDE_AUTOCOMPACT_PCT_OVERRIDE", "")
    try:
        share = float(pct) if pct else None
    except ValueError:
        share = None
    if share is not None and 0 < share <= 100:
        threshold = min(int(effective * share / 100), threshold)
        source += " + CLAUDE_AUTOCOMPACT_PCT_OVERRIDE"
    return done(window, threshold, source)


def codex_limit(
    model: str | None = None,
    config: Mapping[str, Any] | None = None,
    *,
    profiles: ProfileTable | None = None,
) -> AgentLimit:
    """Codex's compaction threshold for ``model`` under its ``config.toml`` data (the active
    ``profile``'s keys win over the top level; ``model`` wins over both)."""
    conf = dict(config or {})
    profile_name = conf.get("profile")
    profiles_table = conf.get("profiles") or {}
    chosen = profiles_table.get(profile_name) if isinstance(profile_name, str) else None
    if isinstance(chosen, Mapping):
        conf.update(chosen)
    slug = (model or conf.get("model") or CODEX_DEFAULT_MODEL).strip()
    catalog = CODEX_CATALOG.get(slug)
    window = catalog[0] if catalog else _profile_window(slug, profiles)
    source = "catalog 90%" if catalog else ("model profile 90%" if window else "")
    configured_window = _int(conf.get("model_context_window"))
    if configured_window and configured_window > 0:
        window = min(configured_window, catalog[1]) if catalog else configured_window
        source = "model_context_window 90%"
    limit = _int(conf.get("model_auto_compact_token_limit"))
    threshold = window * 9 // 10 if window else None
    if limit is not None and limit > 0:
        threshold = min(limit, threshold) if threshold else limit
        if threshold == limit:
            source = "model_auto_compact_token_limit"
    target = default_target(threshold, window, 0)
    return AgentLimit("codex", slug, window, threshold, 0, source or "unknown", target)


def window_limit(
    model: str, output_reserve: int = 0, *, agent: str = "", profiles: ProfileTable | None = None
) -> AgentLimit:
    """A client that is not a known agent gets no default target (its requests are compacted
    only when they would not fit the model's window, as the library does); an agent whose own
    compaction is off gets the share of the model's window."""
    window = _profile_window(model, profiles)
    target = default_target(None, window, output_reserve) if agent else None
    return AgentLimit(agent or "other", model, window, None, output_reserve, "model window", target)


def detect_agent(headers: Mapping[str, str]) -> str | None:
    """``"claude"`` or ``"codex"`` from a request's lower-cased headers, else ``None``."""
    agent = headers.get("user-agent", "").lower()
    if (
        headers.get("x-app", "").lower() == "cli"
        or "x-claude-code-session-id" in headers
        or agent.startswith("claude-cli")
    ):
        return "claude"
    originator = headers.get("originator", "").lower()
    if originator.startswith("codex") or agent.startswith("codex"):
        return "codex"
    return None


def request_limit(
    api: str,
    headers: Mapping[str, str],
    body: Mapping[str, Any],
    profiles: ProfileTable | None = None,
) -> AgentLimit | None:
    """The default for a request that carries no target: the agent that sent it (by its
    headers) with its default settings and the request's model; another client gets the
    model's window. ``None`` when the model is not a string."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return None
    agent = detect_agent(headers)
    if agent == "claude" and api == "messages":
        return claude_code_limit(model, betas=headers.get("anthropic-beta", ""), profiles=profiles)
    if agent == "codex" and api == "responses":
        return codex_limit(model, profiles=profiles)
    dialect = DIALECTS.get(api)  # each format names its output limit its own way
    reserve = dialect.output_reserve(body) if dialect is not None else None
    return window_limit(model, reserve or 0, agent=agent or "", profiles=profiles)


def agent_defaults() -> list[dict[str, Any]]:
    """The default targets for the agents' default settings and current models (for the
    gateway's status): what a request without ``x-tomc-context-target`` gets."""
    limits = [
        claude_code_limit(CLAUDE_DEFAULT_MODEL, betas=CLAUDE_1M_BETA),
        claude_code_limit(CLAUDE_DEFAULT_MODEL),
        claude_code_limit("claude-sonnet-4-6"),
        claude_code_limit("claude-haiku-4-5"),
        *(codex_limit(slug) for slug in ("gpt-6.2-sol", "gpt-6-sol", "gpt-5.6-sol", "gpt-5.5")),
    ]
    rows = []
    for limit, one_m in zip(limits, [True] + [False] * (len(limits) - 1), strict=True):
        row = limit.to_dict()
        row["context_1m"] = one_m
        rows.append(row)
    return rows
