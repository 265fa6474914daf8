"""Cache-cost simulator: what each refresh policy costs under provider prompt caching.

Replays workloads request by request through a real :class:`AutomaticChatSession` and prices
every request the way the providers bill prefix caching:

- ``openai``: a cached prefix counts from 1,024 tokens, in 128-token steps, and matches any
  earlier request's prefix; cached input costs a tenth of the price.
- ``anthropic``: a cache entry is written at the end of every request (writes cost 1.25x)
  and at the newest TOMC memory item, where the Messages dialect puts a breakpoint; a later
  request reads the longest written prefix (reads cost 0.1x); requests under 1,024 tokens are
  not cached.

Prefixes are compared at whole-message granularity and tokens are lexical estimates, so the
figures are billed-input *equivalents* (1.0 = one uncached input token), not invoices.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..chat._items import read_item
from ..chat._memory import MEMORY_MARK
from ..chat._meter import meter_for
from ..chat._session import AutomaticChatSession
from ..chat.dialects._base import as_mapping
from ..chat.dialects._chat_completions import ChatCompletions
from ..chat.dialects._pricing import ANTHROPIC_BILLING, OPENAI_BILLING
from .workloads import Workload, agent_workload, locomo_workloads

__all__ = ["POLICIES", "PolicyResult", "SimulationReport", "default_workloads", "simulate"]

POLICIES = ("full", "stable", "cadence-2", "cadence-1")
MIN_PREFIX, OPENAI_STEP = OPENAI_BILLING.min_prefix, OPENAI_BILLING.step
CACHED_READ, ANTHROPIC_WRITE = OPENAI_BILLING.read, ANTHROPIC_BILLING.write
#: The simulated clock: one request every ten seconds, so no cache expires in a replay and the
#: same workload always decides the same.
_START, _GAP_S = 1_800_000_000.0, 10.0


@dataclass
class _Pricer:
    """Prefix-cache state of one provider for one simulated conversation."""

    kind: str
    prefixes: dict[int, int] = field(default_factory=dict)  # chain hash -> prefix tokens
    billed: float = 0.0
    cached: int = 0

    def charge(
        self, chain: Sequence[tuple[int, int]], total: int, marks: Sequence[int] = ()
    ) -> None:
        # chain[k] = (hash of messages[:k+1], tokens of messages[:k+1]); ``marks`` are further
        # Anthropic breakpoints (chain indices), where entries are written too.
        hit = 0
        for key, tokens in chain:
            if key in self.prefixes:
                hit = tokens
        if self.kind == "openai":
            cached = 0 if hit < MIN_PREFIX else hit - (hit - MIN_PREFIX) % OPENAI_STEP
            self.billed += total - cached + CACHED_READ * cached
            self.prefixes.update(chain)  # every prefix of a request can be matched later
        else:
            cached = hit if hit >= MIN_PREFIX else 0
            if total >= MIN_PREFIX:
                self.billed += CACHED_READ * cached + ANTHROPIC_WRITE * (total - cached)
                for mark in (*marks, len(chain) - 1) if chain else ():
                    key, tokens = chain[mark]  # the request's end, and any other breakpoint
                    self.prefixes[key] = tokens
            else:
                self.billed += total
        self.cached += cached


@dataclass(frozen=True)
class PolicyResult:
    """One workload replayed under one policy."""

    workload: str
    policy: str
    window: int
    requests: int
    input_tokens: int
    openai_billed: float
    openai_cached: int
    anthropic_billed: float
    anthropic_cached: int
    rebuilds: int
    passthroughs: int
    max_request: int
    over_window: int

    @property
    def openai_hit_rate(self) -> float:
        return self.openai_cached / self.input_tokens if self.input_tokens else 0.0

    @property
    def anthropic_hit_rate(self) -> float:
        return self.anthropic_cached / self.input_tokens if self.input_tokens else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["openai_hit_rate"] = self.openai_hit_rate
        data["anthropic_hit_rate"] = self.anthropic_hit_rate
        return data


class _Tokens:
    """Message counts keyed by canonical text, shared across a workload's replays.

    Counted the way a session counts a model without a published tokenizer (o200k with a margin
    when the ``bpe`` extra is installed, else the calibrated lexical estimate).
    """

    def __init__(self) -> None:
        self.cache: dict[str, int] = {}
        self.meter = meter_for(None)
        self.dialect = ChatCompletions()

    def chain(self, messages: Iterable[Any]) -> tuple[list[tuple[int, int]], int]:
        chain, key, total = [], 0, 0
        for message in messages:
            data = as_mapping(message) or {}
            text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
            tokens = self.cache.get(text)
            if tokens is None:
                tokens = self.cache[text] = read_item(self.dialect, self.meter, data, 0).tokens
            key = hash((key, text))
            total += tokens
            chain.append((key, total))
        return chain, total


def memory_marks(messages: Sequence[Any], offset: int = 0) -> tuple[int, ...]:
    """Where the Messages dialect puts its breakpoint: the newest TOMC memory item (its chain
    index, messages starting at ``offset`` in the chain)."""
    for index in range(len(messages) - 1, -1, -1):
        data = as_mapping(messages[index]) or {}
        content = data.get("content")
        if isinstance(content, list) and content:
            content = (as_mapping(content[0]) or {}).get("text")
        if isinstance(content, str) and content.startswith(MEMORY_MARK):
            return (index + offset,)
    return ()


def _session(policy: str, window: int) -> AutomaticChatSession | None:
    if policy == "full":
        return None
    if policy == "stable":
        return AutomaticChatSession(deployment_context_limit=window)
    every = int(policy.rsplit("-", 1)[1])
    return AutomaticChatSession(
        refresh_policy="cadence", refresh_every=every, deployment_context_limit=window
    )


def replay(workload: Workload, policy: str, tokens: _Tokens | None = None) -> PolicyResult:
    """Replay one workload under ``full``, ``stable``, ``cadence-2`` or ``cadence-1``."""
    if policy not in POLICIES:
        raise ValueError(f"unknown policy {policy!r}; use one of {POLICIES}")
    tokens = tokens or _Tokens()
    session = _session(policy, workload.window)
    pricers = {kind: _Pricer(kind) for kind in ("openai", "anthropic")}
    requests = input_tokens = passthroughs = max_request = over_window = 0
    fit_limit = workload.window - workload.max_tokens
    now = _START
    for history in workload.replay():
        sent = history
        now += _GAP_S
        if session is not None:
            prepared = session.prepare_request(
                {"model": "simulated", "messages": history, "max_tokens": workload.max_tokens},
                api="chat",
                now=now,
            )
            sent, decision = prepared.body["messages"], prepared.decision
            passthroughs += decision.action == "passthrough"
        chain, total = tokens.chain(sent)
        if session is not None:
            session.observe_usage(total)  # what the provider would report back
        for pricer in pricers.values():
            pricer.charge(chain, total, memory_marks(sent))
        requests += 1
        input_tokens += total
        max_request = max(max_request, total)
        over_window += total > fit_limit
    return PolicyResult(
        workload=workload.name,
        policy=policy,
        window=workload.window,
        requests=requests,
        input_tokens=input_tokens,
        openai_billed=pricers["openai"].billed,
        openai_cached=pricers["openai"].cached,
        anthropic_billed=pricers["anthropic"].billed,
        anthropic_cached=pricers["anthropic"].cached,
        rebuilds=session.rebuilds if session else 0,
        passthroughs=passthroughs if session else requests,
        max_request=max_request,
        over_window=over_window,
    )


@dataclass(frozen=True)
class SimulationReport:
    """Rows summed per workload group and policy, with the goals checked."""

    rows: tuple[PolicyResult, ...]
    notes: tuple[str, ...] = ()

    def row(self, workload: str, policy: str) -> PolicyResult:
        return next(r for r in self.rows if r.workload == workload and r.policy == policy)

    def goals(self) -> list[str]:
        """The issue's goals, one line each, marked met or missed."""
        lines = []
        for name in dict.fromkeys(r.workload for r in self.rows):
            full, stable = self.row(name, "full"), self.row(name, "stable")
            if full.over_window == 0:
                worst = max(
                    stable.openai_billed / full.openai_billed,
                    stable.anthropic_billed / full.anthropic_billed,
                )
                verdict = "met" if worst <= 1.05 else "MISSED"
                lines.append(
                    f"{name}: full history fits; stable costs {worst:.3f}x full "
                    f"(goal <= 1.05x): {verdict}"
                )
            else:
                verdict = "met" if stable.over_window == 0 else "MISSED"
                lines.append(
                    f"{name}: full history overflows in {full.over_window} of {full.requests} "
                    f"requests; stable overflows in {stable.over_window} (goal 0): {verdict}"
                )
        return lines

    def to_markdown(self) -> str:
        header = (
            "| Workload | Policy | Requests | Input tokens | OpenAI billed | vs full | hit "
            "| Anthropic billed | vs full | hit | Rebuilds | Pass-through | Max request "
            "| Over window |\n"
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"
        )
        lines = [header]
        for r in self.rows:
            full = self.row(r.workload, "full")
            lines.append(
                f"| {r.workload} | {r.policy} | {r.requests:,} | {r.input_tokens:,} "
                f"| {r.openai_billed:,.0f} | {r.openai_billed / full.openai_billed:.2f}x "
                f"| {r.openai_hit_rate:.0%} | {r.anthropic_billed:,.0f} "
                f"| {r.anthropic_billed / full.anthropic_billed:.2f}x "
                f"| {r.anthropic_hit_rate:.0%} | {r.rebuilds:,} | {r.passthroughs:,} "
                f"| {r.max_request:,} / {r.window:,} | {r.over_window:,} |"
            )
        goals = "\n".join(f"- {line}" for line in self.goals())
        notes = "\n".join(f"- {note}" for note in self.notes)
        return "\n".join(lines) + "\n\nGoals:\n" + goals + ("\n\nNotes:\n" + notes if notes else "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": [r.to_dict() for r in self.rows],
            "goals": self.goals(),
            "notes": list(self.notes),
        }


def _sum(name: str, results: Sequence[PolicyResult]) -> PolicyResult:
    first = results[0]
    return PolicyResult(
        workload=name,
        policy=first.policy,
        window=first.window,
        requests=sum(r.requests for r in results),
        input_tokens=sum(r.input_tokens for r in results),
        openai_billed=sum(r.openai_billed for r in results),
        openai_cached=sum(r.openai_cached for r in results),
        anthropic_billed=sum(r.anthropic_billed for r in results),
        anthropic_cached=sum(r.anthropic_cached for r in results),
        rebuilds=sum(r.rebuilds for r in results),
        passthroughs=sum(r.passthroughs for r in results),
        max_request=max(r.max_request for r in results),
        over_window=sum(r.over_window for r in results),
    )


def default_workloads(
    *, quick: bool = False, locomo: str | Path | None = None
) -> tuple[list[tuple[str, list[Workload]]], list[str]]:
    """The standard groups: agent sessions that fit and that overflow, and LoCoMo chats.

    Returns the groups and notes (e.g. that the LoCoMo file was not found).
    """
    fits_turns, over_turns, over_window = (20, 40, 24_000) if quick else (60, 100, 64_000)
    groups = [
        (
            f"agent, window 128K ({fits_turns} tasks)",
            [agent_workload("agent-fits", turns=fits_turns, window=128_000)],
        ),
        (
            f"agent, overflows {over_window // 1000}K ({over_turns} tasks)",
            [agent_workload("agent-overflow", turns=over_turns, window=over_window, seed=11)],
        ),
    ]
    notes = []
    if locomo is not None:
        path = Path(locomo)
        if path.is_file():
            count = 1 if quick else None
            for window in (128_000, 8_000):
                chats = locomo_workloads(path, window=window, conversations=count)
                groups.append((f"LoCoMo x{len(chats)}, window {window // 1000}K", chats))
        else:
            notes.append(f"LoCoMo skipped: {path} not found")
    return groups, notes


def simulate(
    groups: Sequence[tuple[str, Sequence[Workload]]] | None = None,
    *,
    policies: Sequence[str] = POLICIES,
    quick: bool = False,
    locomo: str | Path | None = None,
    progress: Any = None,
) -> SimulationReport:
    """Replay workload groups under each policy; ``groups=None`` uses :func:`default_workloads`.

    ``progress``, if given, is called as ``progress(label, done, total)`` before each replay
    (its short label, the replays done so far and how many there are), and once more at the
    end with an empty label and ``done == total``.
    """
    notes: list[str] = []
    if groups is None:
        groups, notes = default_workloads(quick=quick, locomo=locomo)
    if "full" not in policies:
        policies = ("full", *policies)  # ratios are relative to full history
    rows = []
    total = len(groups) * len(policies)
    for name, workloads in groups:
        tokens = _Tokens()
        for policy in policies:
            if progress:
                progress(f"{name}: {policy}", len(rows), total)
            rows.append(_sum(name, [replay(w, policy, tokens) for w in workloads]))
    if progress:
        progress("", len(rows), total)
    notes.append(
        "Billed-input equivalents: 1.0 per uncached input token; OpenAI caches from 1,024 "
        "tokens in 128-token steps at 0.1x; Anthropic writes at 1.25x and reads at 0.1x. "
        "Tokens as a session counts a model without a published tokenizer; whole-message "
        "prefixes; output tokens are not priced."
    )
    return SimulationReport(tuple(rows), tuple(notes))


def report_json(report: SimulationReport) -> str:
    """The report as indented JSON (for ``tomc simulate --json``)."""
    return json.dumps(report.to_dict(), indent=2)
