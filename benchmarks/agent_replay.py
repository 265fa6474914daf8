"""Long agent loops: replay real coding-agent trajectories request by request.

    python -m benchmarks.agent_replay [--quick] [--windows 16000,24000,32000] [--reserve 4096]
                                      [--dialects chat,messages,responses]
                                      [--reasoning native|drop] [--data PATH] [--json]

Request k is ``messages[:k]`` for every k where ``messages[k]`` is an assistant message (the
model's reply to that request). For every window and method it measures what would be sent:
prompt tokens (o200k, an approximation of the billed count), requests over the window, evidence
lines of the final patch kept, billed input under OpenAI and Anthropic prompt caching, and
per-request overhead. A new method is one entry in ``METHODS``. The `tomc` method also runs in
the Anthropic Messages and OpenAI Responses formats (``--dialects``), compared with chat request
by request.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks import trajectories as tj
from benchmarks.agent_dialects import REFERENCE, Comparison
from benchmarks.dialect_convert import DIALECTS as DIALECT_NAMES
from benchmarks.dialect_convert import RequestConverter
from tomc import AutomaticChatSession, LexicalCounter
from tomc._simulation.simulate import _Pricer, memory_marks
from tomc.chat.dialects import DIALECTS

WINDOWS = (16_000, 24_000, 32_000)
QUICK_WINDOWS = (24_000,)
QUICK_TRAJECTORIES = 12
QUICK_DIALECTS = ("chat",)
RESERVE = 4096
PROVIDERS = ("openai", "anthropic")
COUNT_NOTE = (
    "Prompt tokens are exact o200k_base counts of each message's text (content, tool names and "
    f"raw arguments) plus {tj.MESSAGE_FRAMING} framing tokens per message, "
    f"{tj.TOOL_CALL_FRAMING} per tool call, {tj.REPLY_PRIMING} for reply priming and the o200k "
    "count of the tool schemas' JSON once per request: an approximation of what a provider "
    "bills, not a reproduction of it. The baselines decide what fits with these same counts; "
    "`tomc` uses its own count (o200k too, for a model profile naming that encoding, with its "
    "own framing constants), and `tomc-margin` o200k times its safety margin."
)


# ------------------------------------------------------------------ prepared trajectory


class Prepared:
    """One trajectory with everything the replay needs per message, computed once.

    Messages are identified by object identity inside one trajectory (``Prepared`` keeps them
    alive, so ids cannot be reused); anything else a method sends, such as a TOMC memory, is
    measured from its canonical JSON and cached.
    """

    def __init__(self, trajectory: tj.Trajectory, count: Callable[[str], int]) -> None:
        self.trajectory = trajectory
        self.messages = trajectory.messages
        self.tools = trajectory.tools
        self._count = count
        tools = tj.tools_json(self.tools)
        self.tools_tokens = count(tools) if tools else 0
        self.tools_key = hash(("tools", tools))
        self.evidence = tj.evidence_lines(trajectory.submission)
        self.tokens: list[int] = []
        self.keys: list[int] = []
        self.masks: list[int] = []
        for message in self.messages:
            self.tokens.append(tj.message_tokens(message, count))
            self.keys.append(hash(tj.canonical(message)))
            self.masks.append(self._mask(message))
        self.index = {id(message): i for i, message in enumerate(self.messages)}
        self.prefix = [0]
        for tokens in self.tokens:
            self.prefix.append(self.prefix[-1] + tokens)
        self.head_end, self.groups = tj.head_and_groups(self.messages)
        self.group_starts = [start for start, _ in self.groups]
        # An evidence line is "shown" at the first tool message that contains it.
        self.shown = [
            next(
                (
                    i
                    for i, m in enumerate(self.messages)
                    if m.get("role") == "tool" and self.masks[i] >> bit & 1
                ),
                None,
            )
            for bit in range(len(self.evidence))
        ]
        paths = tj.patched_paths(trajectory.submission)
        self.requests: list[int] = []
        self.edits: set[int] = set()
        self.patched_edits: set[int] = set()
        for k, message in enumerate(self.messages):
            if k == 0 or message.get("role") != "assistant":
                continue
            self.requests.append(k)
            command = tj.command_of(message)
            if tj.writes_file(command):
                self.edits.add(k)
                if tj.mentions_path(command, paths):
                    self.patched_edits.add(k)
        self._foreign: dict[str, tuple[int, int, int]] = {}

    def _mask(self, message: Mapping[str, Any]) -> int:
        text = tj.evidence_text(message)
        return sum(1 << bit for bit, line in enumerate(self.evidence) if line in text)

    def facts(self, message: Any) -> tuple[int, int, int]:
        """``(tokens, prefix key, evidence mask)`` of any message a method sends."""
        index = self.index.get(id(message))
        if index is not None and self.messages[index] is message:
            return self.tokens[index], self.keys[index], self.masks[index]
        data = dict(message) if isinstance(message, Mapping) else {"content": str(message)}
        text = tj.canonical(data)
        cached = self._foreign.get(text)
        if cached is None:
            tokens = tj.message_tokens(data, self._count)
            cached = self._foreign[text] = (tokens, hash(text), self._mask(data))
        return cached

    def available(self, k: int) -> int:
        """Evidence lines shown by tool messages before request k, as a bit mask."""
        return sum(
            1 << bit for bit, shown in enumerate(self.shown) if shown is not None and shown < k
        )

    def full_tokens(self, k: int) -> int:
        """Prompt tokens of request k sent unchanged."""
        return self.tools_tokens + tj.REPLY_PRIMING + self.prefix[k]

    def base_tokens(self) -> int:
        """Tools, reply priming and the head (system prompt and task): in every request."""
        return self.tools_tokens + tj.REPLY_PRIMING + self.prefix[self.head_end]

    def groups_before(self, k: int) -> int:
        """How many groups start before message k (the groups of request k)."""
        low, high = 0, len(self.group_starts)
        while low < high:
            mid = (low + high) // 2
            if self.group_starts[mid] < k:
                low = mid + 1
            else:
                high = mid
        return low


# ------------------------------------------------------------------ methods


@dataclass
class Outcome:
    """What a method sends for one request, and what it decided (for TOMC)."""

    messages: Sequence[Any]
    action: str | None = None
    reason: str | None = None
    rebuilds: int = 0
    estimate: int | None = None  # the method's own estimate of the unchanged request
    tokens_after: int | None = None  # ... and of what it sends
    seconds: float | None = None  # the method's own time, when the call does more (conversion)


class Full:
    """The request unchanged."""

    def __init__(self, prepared: Prepared, window: int, reserve: int) -> None:
        self.prepared = prepared

    def __call__(self, request: list[Any]) -> Outcome:
        return Outcome(request)


class Sliding:
    """Head (system + task) plus the newest whole groups that fit, re-cut every request.

    When not even the newest group fits, it is sent anyway: an agent cannot go on without the
    result it has just received (the request is then counted over the window).
    """

    def __init__(self, prepared: Prepared, window: int, reserve: int) -> None:
        self.prepared = prepared
        self.budget = window - reserve

    def __call__(self, request: list[Any]) -> Outcome:
        p, k = self.prepared, len(request)
        count = p.groups_before(k)
        room = self.budget - p.base_tokens()
        first = count
        while first > 0 and p.prefix[k] - p.prefix[p.group_starts[first - 1]] <= room:
            first -= 1
        if first == count and count:
            first = count - 1
        return Outcome(_head_and_tail(request, p, first, count))


class Chunked:
    """Cache-friendly truncation: cut only when the request would not fit, then keep the cut.

    On overflow the oldest whole groups are dropped until the request fills at most half the
    prompt budget (the newest group is always kept); the first kept group then stays first
    until the request overflows again, so consecutive requests share their prefix.
    """

    def __init__(self, prepared: Prepared, window: int, reserve: int) -> None:
        self.prepared = prepared
        self.budget = window - reserve
        self.first = 0  # index of the first kept group
        self.cuts = 0  # each cut is a full prefix-cache miss, like a TOMC rebuild

    def __call__(self, request: list[Any]) -> Outcome:
        p, k = self.prepared, len(request)
        count = p.groups_before(k)
        base = p.base_tokens()

        def size(first: int) -> int:
            return base + (p.prefix[k] - p.prefix[p.group_starts[first]] if first < count else 0)

        if size(self.first) > self.budget:
            self.cuts += 1
            while self.first < count - 1 and size(self.first) > self.budget // 2:
                self.first += 1
        return Outcome(
            _head_and_tail(request, p, min(self.first, count), count), rebuilds=self.cuts
        )


class Masking:
    """Observation masking (Lindenbauer et al., "The Complexity Trap", 2025): every tool output
    older than the newest :attr:`KEEP` turns is replaced by a short placeholder; the calls, the
    agent's reasoning and everything else stay. An output is masked once, when it leaves the
    recent turns, so consecutive requests share their prefix up to it. Nothing guarantees the
    result fits the window (such requests count as over it)."""

    KEEP = 10
    PLACEHOLDER = "[old tool output omitted]"

    def __init__(self, prepared: Prepared, window: int, reserve: int) -> None:
        self.prepared = prepared
        self.masked: dict[int, dict[str, Any]] = {}  # message index -> its masked copy

    def __call__(self, request: list[Any]) -> Outcome:
        p, k = self.prepared, len(request)
        count = p.groups_before(k)
        cut = p.group_starts[count - self.KEEP] if count > self.KEEP else 0
        out = list(request)
        for index in range(p.head_end, cut):
            if request[index].get("role") == "tool":
                copy = self.masked.get(index)
                if copy is None:
                    copy = self.masked[index] = {**request[index], "content": self.PLACEHOLDER}
                out[index] = copy
        return Outcome(out)


def _head_and_tail(request: list[Any], p: Prepared, first: int, count: int) -> list[Any]:
    if first >= count:
        return request[: p.head_end]
    return request[: p.head_end] + request[p.group_starts[first] :]


class Tomc:
    """``AutomaticChatSession.prepare_request`` through its public call, one session per
    trajectory.

    The session is told the model's tokenizer is o200k (an OpenAI model family), so its fit
    decisions count what this benchmark counts; ``TomcUnknownTokenizer`` runs the same session
    for a model whose tokenizer is unpublished (its calibrated safety margin). ``dialect``
    sends each request in that wire format (``benchmarks.dialect_convert``) and reads what the
    session sends back as Chat messages, so every format is measured alike; ``chat`` converts
    nothing.
    """

    MODEL = "replay"
    ENCODING: str | None = "o200k_base"

    #: Extra AutomaticChatSession arguments for an ablation (``--session``).
    SESSION_OPTIONS: Mapping[str, Any] = {}

    def __init__(
        self,
        prepared: Prepared,
        window: int,
        reserve: int,
        dialect: str = "chat",
        reasoning: str = "native",
    ) -> None:
        self.window, self.reserve, self.dialect = window, reserve, dialect
        self.options = {"model": self.MODEL, "tools": prepared.tools, "max_tokens": reserve}
        self.converter = RequestConverter(dialect, reasoning=reasoning)
        self.validate = DIALECTS[dialect].validate
        self.invalid: list[tuple[int, list[str]]] = []  # (request length, problems)
        profile: dict[str, Any] = {"context_window": window}
        if self.ENCODING:
            profile["encoding"] = self.ENCODING
        self.session = AutomaticChatSession(
            deployment_context_limit=window,
            model_profiles={self.MODEL: profile},
            **self.SESSION_OPTIONS,
        )
        self.now = 1_800_000_000.0

    def __call__(self, request: list[Any]) -> Outcome:
        body = self.converter.body({**self.options, "messages": request})
        # One request every 10 seconds: the replay's clock, so the cache never expires in it
        # and the same trajectory always gives the same bytes.
        self.now += 10.0
        started = time.perf_counter()
        prepared = self.session.prepare_request(
            body, api=self.dialect, deployment_context_limit=self.window, now=self.now
        )
        seconds = time.perf_counter() - started
        decision = prepared.decision
        if decision.action != "passthrough":
            # Every rewritten request must still satisfy its format's rules.
            items = prepared.body[DIALECTS[self.dialect].items_key]
            problems = self.validate(items)
            if problems:
                self.invalid.append((len(request), problems))
        return Outcome(
            self.converter.back(prepared.body),
            action=decision.action,
            reason=decision_label(decision),
            rebuilds=self.session.rebuilds,
            estimate=decision.tokens_before,
            seconds=seconds,
            tokens_after=decision.tokens_after,
        )

    def observe(self, prompt_tokens: int) -> None:
        # What a provider reports back in `usage`; `create` reads it from every response.
        self.session.observe_usage(prompt_tokens)


class TomcUnknownTokenizer(Tomc):
    """The same session for a model without a published tokenizer (o200k x margin)."""

    ENCODING = None


METHODS: dict[str, Callable[[Prepared, int, int], Callable[[list[Any]], Outcome]]] = {
    "full": Full,
    "sliding": Sliding,
    "chunked": Chunked,
    "masking": Masking,
    "tomc": Tomc,
    "tomc-margin": TomcUnknownTokenizer,
}

_REASONS = (  # passthrough reasons, most specific first; prose until Decision has a code
    ("unsupported history", "unsupported_content"),
    ("breaks tool pairing", "pairing"),
    ("no old history lies before the protected", "nothing_to_compile"),
    ("leave no room", "no_room"),
    ("did not shrink", "no_shrink"),
    ("compilation failed", "compile_error"),
    ("unknown model", "unknown_model"),
    ("native", "native"),
    ("backoff", "backoff"),
    ("fits:", "fits"),
)


def decision_label(decision: Any) -> str:
    """A short, stable label for a decision: its ``code`` when it has one, else from the prose."""
    code = getattr(decision, "code", None)
    if isinstance(code, str) and code:
        return code
    if decision.action != "passthrough":
        return decision.action
    for needle, label in _REASONS:
        if needle in decision.reason:
            return label
    return "other: " + re.sub(r"\d[\d,]*", "N", decision.reason)[:60]


# ------------------------------------------------------------------ measuring


EVIDENCE_SCOPES = ("all", "edit", "patched_edit")


@dataclass
class EvidenceTally:
    """Evidence lines kept and available, summed over the requests of one scope."""

    requests: int = 0
    kept: int = 0
    available: int = 0

    def add(self, kept: int, available: int) -> None:
        self.requests += 1
        self.kept += kept
        self.available += available


@dataclass
class Tally:
    """One window and method, summed over trajectories."""

    window: int
    method: str
    requests: int = 0
    over_window: int = 0
    max_prompt: int = 0
    input_tokens: int = 0
    evidence: dict[str, EvidenceTally] = field(
        default_factory=lambda: {scope: EvidenceTally() for scope in EVIDENCE_SCOPES}
    )
    billed: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PROVIDERS, 0.0))
    cached: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PROVIDERS, 0))
    rebuilds: int = 0
    overhead_ms: list[float] = field(default_factory=list)
    actions: Counter = field(default_factory=Counter)
    reasons: Counter = field(default_factory=Counter)
    over_reasons: Counter = field(default_factory=Counter)
    estimate_ratios: list[float] = field(default_factory=list)
    invalid: int = 0  # rewritten requests that broke their format's rules

    def row(self, reference: Mapping[str, Tally]) -> dict[str, Any]:
        full, sliding = reference.get("full"), reference.get("sliding")
        row: dict[str, Any] = {
            "window": self.window,
            "method": self.method,
            "requests": self.requests,
            "over_window": self.over_window,
            "max_prompt": self.max_prompt,
            "input_tokens": self.input_tokens,
            "evidence": {scope: asdict(tally) for scope, tally in self.evidence.items()},
            "rebuilds": self.rebuilds,
            "rebuilds_per_request": self.rebuilds / self.requests if self.requests else 0.0,
            "invalid_rewrites": self.invalid,
            "overhead_ms": _quantiles(self.overhead_ms, (0.5, 0.95, 1.0)),
        }
        for provider in PROVIDERS:
            billed = self.billed[provider]
            row[f"{provider}_billed"] = billed
            row[f"{provider}_cached_tokens"] = self.cached[provider]
            for name, other in (("sliding", sliding), ("full", full)):
                ratio = (
                    billed / other.billed[provider] if other and other.billed[provider] else None
                )
                row[f"{provider}_vs_{name}"] = ratio
        if self.actions:
            row["actions"] = dict(sorted(self.actions.items()))
            row["reasons"] = dict(sorted(self.reasons.items()))
            row["over_window_reasons"] = dict(sorted(self.over_reasons.items()))
            row["estimate_ratio"] = _quantiles(self.estimate_ratios, (0.5, 0.95, 1.0))
        return row


def measure(prepared: Prepared, messages: Sequence[Any]) -> tuple[list[tuple[int, int]], int, int]:
    """``(prefix chain, prompt tokens, evidence mask)`` of what is sent.

    The chain is what ``_Pricer`` matches: ``(key of everything up to here, tokens so far)``,
    tool schemas first, as providers place them before the messages.
    """
    key, running = prepared.tools_key, prepared.tools_tokens
    chain, mask = [(key, running)], 0
    for message in messages:
        tokens, message_key, message_mask = prepared.facts(message)
        key, running = hash((key, message_key)), running + tokens
        chain.append((key, running))
        mask |= message_mask
    return chain, running + tj.REPLY_PRIMING, mask


@dataclass(frozen=True)
class Step:
    """One request of a replay, for comparing runs request by request."""

    k: int
    reason: str | None
    total: int  # o200k prompt tokens sent
    kept: int  # evidence lines kept
    estimate: int | None  # the session's own count of the unchanged request
    tokens_after: int | None  # ... and of what it sent


def replay(
    prepared: Prepared,
    method: str,
    window: int,
    reserve: int,
    tally: Tally,
    *,
    runner: Callable[[list[Any]], Outcome] | None = None,
    trace: list[Step] | None = None,
) -> None:
    """Replay one trajectory under one method and window, adding to ``tally``.

    ``runner`` replaces ``METHODS[method]`` (the `tomc` method in another wire format);
    ``trace`` receives one :class:`Step` per request.
    """
    if runner is None:
        runner = METHODS[method](prepared, window, reserve)
    pricers = {provider: _Pricer(provider) for provider in PROVIDERS}
    limit = window - reserve
    messages = prepared.messages
    rebuilds = 0
    for k in prepared.requests:
        request = messages[:k]
        started = time.perf_counter()
        outcome = runner(request)
        seconds = outcome.seconds
        if seconds is None:
            seconds = time.perf_counter() - started
        tally.overhead_ms.append(seconds * 1000)
        chain, total, mask = measure(prepared, outcome.messages)
        marks = memory_marks(outcome.messages, offset=1)  # chain[0] is the tool schemas
        for pricer in pricers.values():
            pricer.charge(chain, total, marks)
        observe = getattr(runner, "observe", None)
        if observe is not None:
            observe(total)
        tally.requests += 1
        tally.input_tokens += total
        tally.max_prompt = max(tally.max_prompt, total)
        over = total > limit
        tally.over_window += over
        available = prepared.available(k)
        kept, shown = (mask & available).bit_count(), available.bit_count()
        if trace is not None:
            trace.append(
                Step(k, outcome.reason, total, kept, outcome.estimate, outcome.tokens_after)
            )
        tally.evidence["all"].add(kept, shown)
        if k in prepared.edits:
            tally.evidence["edit"].add(kept, shown)
        if k in prepared.patched_edits:
            tally.evidence["patched_edit"].add(kept, shown)
        rebuilds = outcome.rebuilds
        if outcome.action is not None:
            tally.actions[outcome.action] += 1
            tally.reasons[outcome.reason] += 1
            if over:
                tally.over_reasons[outcome.reason] += 1
            if outcome.estimate:
                tally.estimate_ratios.append(prepared.full_tokens(k) / outcome.estimate)
    for provider, pricer in pricers.items():
        tally.billed[provider] += pricer.billed
        tally.cached[provider] += pricer.cached
    tally.rebuilds += rebuilds
    tally.invalid += len(getattr(runner, "invalid", ()))


# ------------------------------------------------------------------ calibration


def calibration(preps: Sequence[Prepared]) -> dict[str, Any]:
    """How far o200k counts run above the lexical estimate, per message and per request.

    Per message: o200k / lexical of the message's text parts (framing left out, since both
    sides would add the same constants). Per request (every request of the full history):
    both counts with framing, tool schemas and priming, which is what a fit decision needs.
    """
    lexical = LexicalCounter().count
    message_ratios: list[float] = []
    request_ratios: list[float] = []
    o200k_total = lexical_total = 0
    for p in preps:
        lexical_tokens = [tj.message_tokens(m, lexical) for m in p.messages]
        tools = tj.tools_json(p.tools)
        lexical_base = (lexical(tools) if tools else 0) + tj.REPLY_PRIMING
        for message, exact, estimate in zip(p.messages, p.tokens, lexical_tokens, strict=True):
            framing = estimate - sum(lexical(part) for part in tj.token_parts(message))
            text_exact, text_estimate = exact - framing, estimate - framing
            o200k_total += text_exact
            lexical_total += text_estimate
            if text_estimate > 0:
                message_ratios.append(text_exact / text_estimate)
        lexical_prefix = [0]
        for tokens in lexical_tokens:
            lexical_prefix.append(lexical_prefix[-1] + tokens)
        for k in p.requests:
            request_ratios.append(p.full_tokens(k) / (lexical_base + lexical_prefix[k]))
    levels = (0.5, 0.95, 0.99, 0.999, 1.0)
    return {
        "messages": len(message_ratios),
        "requests": len(request_ratios),
        "text_o200k_over_lexical": o200k_total / lexical_total if lexical_total else None,
        "message_ratio": _quantiles(message_ratios, levels),
        "request_ratio": _quantiles(request_ratios, levels),
        # The smallest f with f * lexical >= o200k: the maximum ratio (all requests), and the
        # 99.9th percentile (99.9% of messages).
        "factor_all_requests": max(request_ratios, default=None),
        "factor_999_messages": _quantiles(message_ratios, (0.999,)).get("p99.9"),
    }


def _quantiles(values: Sequence[float], levels: Sequence[float]) -> dict[str, float]:
    """Nearest-rank quantiles (deterministic, no interpolation); level 1.0 is the maximum."""
    if not values:
        return {}
    ordered = sorted(values)
    result = {}
    for level in levels:
        rank = max(1, math.ceil(round(level * len(ordered), 9)))
        name = "max" if level >= 1 else f"p{level * 100:g}"
        result[name] = ordered[min(rank, len(ordered)) - 1]
    return result


# ------------------------------------------------------------------ the run


@dataclass
class Report:
    windows: tuple[int, ...]
    reserve: int
    data: dict[str, Any]
    tallies: dict[tuple[int, str], Tally]
    calibration: dict[str, Any]
    seconds: float
    dialects: tuple[str, ...] = ()
    # (window, dialect) -> the `tomc` method in that format ("chat" is the `tomc` row itself)
    dialect_tallies: dict[tuple[int, str], Tally] = field(default_factory=dict)
    comparisons: dict[tuple[int, str], Comparison] = field(default_factory=dict)
    conversion_notes: dict[str, list[str]] = field(default_factory=dict)

    def rows(self) -> list[dict[str, Any]]:
        rows = []
        for window in self.windows:
            reference = {m: self.tallies[(window, m)] for m in METHODS}
            rows.extend(self.tallies[(window, m)].row(reference) for m in METHODS)
        return rows

    def dialect_rows(self) -> list[dict[str, Any]]:
        """One row per window and dialect, with ``matches_chat`` (the comparison) beside it."""
        rows = []
        for window in self.windows:
            reference = {m: self.tallies[(window, m)] for m in METHODS}
            for dialect in self.dialects:
                row = self.dialect_tallies[(window, dialect)].row(reference)
                row["dialect"] = dialect
                comparison = self.comparisons.get((window, dialect))
                if comparison is not None:
                    row["matches_chat"] = comparison.to_dict()
                rows.append(row)
        return rows

    def to_dict(self) -> dict[str, Any]:
        return {
            "reserve": self.reserve,
            "windows": list(self.windows),
            "data": self.data,
            "rows": self.rows(),
            "dialects": list(self.dialects),
            "dialect_rows": self.dialect_rows(),
            "conversion_notes": self.conversion_notes,
            "calibration": self.calibration,
            "seconds": self.seconds,
            "note": COUNT_NOTE,
        }

    def to_markdown(self) -> str:
        from benchmarks.agent_report import markdown

        return markdown(self)


def run(
    data: str | Path = tj.DEFAULT_DATA,
    *,
    windows: Sequence[int] = WINDOWS,
    reserve: int = RESERVE,
    limit: int | None = None,
    progress: bool = True,
    dialects: Sequence[str] = DIALECT_NAMES,
    reasoning: str = "native",
) -> Report:
    """Replay the trajectories at every window under every method, and the `tomc` method in
    every wire format of ``dialects`` (chat is the `tomc` method itself)."""
    started = time.perf_counter()
    if reserve < 0 or any(window <= reserve for window in windows):
        raise ValueError(f"every window must exceed the output reserve ({reserve:,})")
    unknown = [d for d in dialects if d not in DIALECT_NAMES]
    if unknown:
        raise ValueError(f"unknown dialect {unknown[0]!r}: choose from {', '.join(DIALECT_NAMES)}")
    dialects = tuple(dict.fromkeys(dialects))
    others = [d for d in dialects if d != REFERENCE]
    trajectories = tj.load(data, limit)
    count = tj.o200k_counter()
    tallies = {(w, m): Tally(w, m) for w in windows for m in METHODS}
    dialect_tallies = {(w, d): Tally(w, "tomc") for w in windows for d in others}
    for window in windows:
        dialect_tallies[(window, REFERENCE)] = tallies[(window, "tomc")]
    comparisons = {(w, d): Comparison(w, d) for w in windows for d in others}
    notes: dict[str, dict[str, None]] = {d: {} for d in others}
    preps = []
    items = trajectories
    if progress:
        from tqdm import tqdm

        items = tqdm(trajectories, desc="agent replay", file=sys.stderr)
    for trajectory in items:
        prepared = Prepared(trajectory, count)
        preps.append(prepared)
        for window in windows:
            chat_trace: list[Step] = []
            for method in METHODS:
                trace = chat_trace if method == "tomc" else None
                replay(prepared, method, window, reserve, tallies[(window, method)], trace=trace)
            for dialect in others:
                runner = Tomc(prepared, window, reserve, dialect, reasoning)
                trace = []
                replay(
                    prepared,
                    "tomc",
                    window,
                    reserve,
                    dialect_tallies[(window, dialect)],
                    runner=runner,
                    trace=trace,
                )
                comparisons[(window, dialect)].add(trajectory.id, chat_trace, trace)
                notes[dialect].update(dict.fromkeys(runner.converter.notes))
    data_facts = {
        "path": _shown_path(Path(data)),
        "trajectories": len(trajectories),
        "messages": sum(len(p.messages) for p in preps),
        "requests": sum(len(p.requests) for p in preps),
        "evidence_lines": sum(len(p.evidence) for p in preps),
        "evidence_shown": sum(s is not None for p in preps for s in p.shown),
        "edit_requests": sum(len(p.edits) for p in preps),
        "patched_edit_requests": sum(len(p.patched_edits) for p in preps),
        "recorded_file_edits": sum(t.recorded_file_edits for t in trajectories),
        "full_history_tokens": [
            min(p.prefix[-1] for p in preps),
            max(p.prefix[-1] for p in preps),
        ],
        "with_reasoning_content": sum(
            any("reasoning_content" in m for m in p.messages) for p in preps
        ),
    }
    return Report(
        tuple(windows),
        reserve,
        data_facts,
        tallies,
        calibration(preps),
        time.perf_counter() - started,
        dialects,
        dialect_tallies,
        comparisons,
        {dialect: list(found) for dialect, found in notes.items()},
    )


def _shown_path(path: Path) -> str:
    """The data path relative to the repository root when it can be (no machine paths)."""
    root = Path(__file__).resolve().parents[1]
    try:
        return os.path.relpath(path.resolve(), root)
    except ValueError:  # another drive on Windows
        return str(path)


def _windows(text: str) -> tuple[int, ...]:
    try:
        windows = tuple(int(part.replace("_", "")) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"windows must be integers like 16000,24000: {text!r}"
        ) from None
    if not windows or any(window <= 0 for window in windows):
        raise argparse.ArgumentTypeError(f"windows must be positive integers: {text!r}")
    return windows


def _dialects(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [name for name in names if name not in DIALECT_NAMES]
    if not names or unknown:
        raise argparse.ArgumentTypeError(
            f"dialects must be some of {','.join(DIALECT_NAMES)}: {text!r}"
        )
    return names


def _hide_bpe_from_sessions() -> None:
    """Make the sessions' meter find no BPE vocabulary, as on an install without the extra."""
    from tomc._core.errors import CounterUnavailableError
    from tomc.chat import _meter as meter

    def unavailable(encoding: str) -> Any:
        raise CounterUnavailableError(f"bpe:{encoding} hidden by --without-bpe")

    meter._bpe = unavailable  # type: ignore[assignment]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"the first {QUICK_TRAJECTORIES} trajectories at one window (24000)",
    )
    parser.add_argument("--windows", type=_windows, help="comma-separated windows in tokens")
    parser.add_argument("--reserve", type=int, default=RESERVE, help="output tokens reserved")
    parser.add_argument("--data", default=str(tj.DEFAULT_DATA), help="trajectory file")
    parser.add_argument(
        "--dialects",
        type=_dialects,
        help="wire formats to replay the `tomc` method in, comma-separated "
        f"(default: {','.join(DIALECT_NAMES)}; --quick: chat)",
    )
    parser.add_argument(
        "--reasoning",
        choices=("native", "drop"),
        default="native",
        help="reasoning_content in Messages / Responses: a thinking block / reasoning item "
        "(native), or left out (drop)",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable rows instead")
    parser.add_argument(
        "--session",
        type=json.loads,
        default={},
        help="extra AutomaticChatSession arguments for the tomc methods, as JSON "
        '(an ablation, e.g. \'{"work_query": "task"}\')',
    )
    parser.add_argument(
        "--without-bpe",
        action="store_true",
        help="replay the sessions as if the bpe extra were not installed (they fall back to "
        "the calibrated lexical estimate); the benchmark's own counts stay o200k",
    )
    args = parser.parse_args(argv)
    Tomc.SESSION_OPTIONS = args.session
    if args.without_bpe:
        _hide_bpe_from_sessions()
    windows = args.windows or (QUICK_WINDOWS if args.quick else WINDOWS)
    dialects = args.dialects or (QUICK_DIALECTS if args.quick else DIALECT_NAMES)
    try:
        report = run(
            args.data,
            windows=windows,
            reserve=args.reserve,
            limit=QUICK_TRAJECTORIES if args.quick else None,
            dialects=dialects,
            reasoning=args.reasoning,
        )
    except (tj.DataError, ValueError) as exc:
        print(f"agent_replay: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.to_markdown())
    return 0


if __name__ == "__main__":
    sys.exit(main())
