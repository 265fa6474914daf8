"""What a session learns about its conversation, as plain data that survives a JSON round trip.

:class:`ConversationState` is everything one conversation's decisions depend on besides the
session's options and the request itself: the frozen memory (its segments, and a digest of the
entries it covers, so that an edit before its boundary is noticed by content), the request and
rebuild counters, the native-compaction counters, the back-off thresholds already crossed, the
safety margins learned from provider usage, the next request's usage hint and the figures of the
last request sent. Caches that only save time (the per-item reads, the counters) are not part of
it: a session that loads a saved state decides every later request exactly as the one that
saved it. :meth:`ConversationState.to_json` is deterministic (sorted keys, ASCII, floats as exact
hexadecimal strings), so a store shared between processes can keep it as it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .._core.errors import SessionStateError
from ._account import CostAccount
from ._conversation import Entry
from ._layout import HISTORY, WORK, Region
from ._native import NativeEvent, NativeState
from ._plan import RequestPlan, Segment
from .dialects import DIALECTS

__all__ = ["STATE_VERSION", "ConversationState", "FrozenMemory", "covered_digest"]

#: The layout of :meth:`ConversationState.to_json`; a blob of another version is refused.
STATE_VERSION = 1


def covered_digest(entries: Sequence[Entry], end: int) -> str:
    """One digest of the exact content of ``entries[:end]``, in order."""
    return hashlib.sha256(b"".join(entry.digest for entry in entries[:end])).hexdigest()


@dataclass(frozen=True)
class FrozenMemory:
    """The memory in use: its segments, and what they stand for.

    ``covered`` entries from the start of the history, with content digest ``digest`` and
    counted by ``counter`` (a model encoding, ``""`` for none), are what the memory was built
    from; a request whose first ``covered`` entries differ must not reuse it.
    """

    segments: tuple[Segment, ...]
    covered: int
    digest: str
    counter: str
    explicit_budget: int | None
    built_request: int
    built_len: int
    dialect: str

    def why_stale(self, plan: RequestPlan) -> str:
        """Why ``plan`` may not reuse this memory, or ``""`` when it may."""
        if self.dialect != plan.dialect.name:
            return "the request format changed"
        entries = plan.entries
        if (
            len(entries) < self.covered
            or self.counter != plan.encoding
            or covered_digest(entries, self.covered) != self.digest
        ):
            return "history before the boundary was edited"
        if plan.explicit_budget != self.explicit_budget:
            return "the explicit budget changed"
        return ""


@dataclass
class ConversationState:
    """Everything a session learned about one conversation (see the module docstring).

    ``margins`` maps a counter (a model encoding, ``""`` for a model without one) to the safety
    factor learned for it; ``last_sent`` is the last request's token estimate and its counter.
    """

    requests: int = 0
    rebuilds: int = 0
    frozen: FrozenMemory | None = None
    native: NativeState = field(default_factory=NativeState)
    thresholds_done: set[float] = field(default_factory=set)
    margins: dict[str, float] = field(default_factory=dict)
    usage_hint: int | None = None
    last_sent: tuple[int, str] | None = None
    account: CostAccount = field(default_factory=CostAccount)

    def snapshot(self) -> ConversationState:
        """A copy that later requests of the session do not change."""
        return replace(
            self,
            account=replace(self.account),
            native=replace(self.native),
            thresholds_done=set(self.thresholds_done),
            margins=dict(self.margins),
        )

    def to_json(self) -> str:
        """The state as deterministic JSON text (see :meth:`from_json`)."""
        native = self.native
        data = {
            "version": STATE_VERSION,
            "requests": self.requests,
            "rebuilds": self.rebuilds,
            "frozen": _frozen_data(self.frozen) if self.frozen is not None else None,
            "native": {
                "in_progress": _event_data(native.in_progress),
                "paused_requests": native.paused_requests,
                "cooldown_left": native.cooldown_left,
                "last_completed": _event_data(native.last_completed),
                "requests_since_completion": native.requests_since_completion,
            },
            "thresholds_done": sorted(float.hex(share) for share in self.thresholds_done),
            "margins": {counter: float.hex(f) for counter, f in self.margins.items()},
            "usage_hint": self.usage_hint,
            "last_sent": (
                {"tokens": self.last_sent[0], "counter": self.last_sent[1]}
                if self.last_sent is not None
                else None
            ),
            "account": _account_data(self.account),
        }
        return json.dumps(data, sort_keys=True, ensure_ascii=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> ConversationState:
        """The state :meth:`to_json` wrote; :class:`tomc.SessionStateError` for anything else."""
        try:
            data = json.loads(text)
        except (ValueError, TypeError, RecursionError) as exc:
            raise SessionStateError(f"conversation state is not JSON text ({exc})") from None
        top = _Fields(data, "conversation state")
        version = top.get("version", int)
        if version != STATE_VERSION:
            raise SessionStateError(
                f"conversation state has version {version}; this TOMC reads version {STATE_VERSION}"
            )
        native = top.sub("native")
        last = top.sub("last_sent", optional=True)
        frozen = top.sub("frozen", optional=True)
        return cls(
            requests=top.get("requests", int),
            rebuilds=top.get("rebuilds", int),
            frozen=_read_frozen(frozen) if frozen is not None else None,
            native=NativeState(
                in_progress=_read_event(native.sub("in_progress", optional=True)),
                paused_requests=native.get("paused_requests", int),
                cooldown_left=native.get("cooldown_left", int),
                last_completed=_read_event(native.sub("last_completed", optional=True)),
                requests_since_completion=native.get("requests_since_completion", int, True),
            ),
            thresholds_done={
                _hex_float(v, "thresholds_done") for v in top.get("thresholds_done", list)
            },
            margins={
                _text(k, "margins"): _hex_float(v, f"margins[{k!r}]")
                for k, v in top.get("margins", dict).items()
            },
            usage_hint=top.get("usage_hint", int, True),
            last_sent=(last.get("tokens", int), last.get("counter", str)) if last else None,
            account=_read_account(top.sub("account") if "account" in top.data else None),
        )


# ----------------------------------------------------------------------------- encoding


def _event_data(event: NativeEvent | None) -> dict[str, str] | None:
    if event is None:
        return None
    return {"source": event.source, "kind": event.kind, "detail": event.detail}


def _frozen_data(frozen: FrozenMemory) -> dict[str, Any]:
    return {
        "covered": frozen.covered,
        "digest": frozen.digest,
        "counter": frozen.counter,
        "explicit_budget": frozen.explicit_budget,
        "built_request": frozen.built_request,
        "built_len": frozen.built_len,
        "dialect": frozen.dialect,
        # The wire item and its entry are the dialect's memory item for the text and role: only
        # what is needed to make them again is kept.
        "segments": [
            {
                "start": s.region.start,
                "end": s.region.end,
                "kind": s.region.kind,
                "role": _item_role(s.item),
                "text": s.text,
                "tokens": s.tokens,
                "budget": s.budget,
                "compiled": s.compiled,
                "strategy": s.strategy,
                "latency_s": float.hex(s.latency_s),
            }
            for s in frozen.segments
        ],
    }


def _item_role(item: Any) -> str:
    return str(item.get("role", "user")) if isinstance(item, dict) else "user"


def _account_data(account: CostAccount) -> dict[str, Any]:
    return {
        "direct": float.hex(account.direct),
        "sent": float.hex(account.sent),
        "direct_prompt": account.direct_prompt,
        "sent_prompt": account.sent_prompt,
        "seen_at": float.hex(account.seen_at) if account.seen_at is not None else None,
        "growth": float.hex(account.growth),
        "floor": account.floor,
        "expected_cached": account.expected_cached,
        "expected_prompt": account.expected_prompt,
        "cache_misses": account.cache_misses,
    }


# ----------------------------------------------------------------------------- decoding


def _read_account(fields: _Fields | None) -> CostAccount:
    """The cost account; a state saved before accounts existed starts an empty one."""
    if fields is None:
        return CostAccount()
    seen = fields.get("seen_at", str, True)
    return CostAccount(
        direct=_hex_float(fields.get("direct", str), "account.direct"),
        sent=_hex_float(fields.get("sent", str), "account.sent"),
        direct_prompt=fields.get("direct_prompt", int),
        sent_prompt=fields.get("sent_prompt", int),
        seen_at=_hex_float(seen, "account.seen_at") if seen is not None else None,
        growth=_hex_float(fields.get("growth", str), "account.growth"),
        floor=fields.get("floor", int),
        # Saved before the cache check existed: nothing to check, none missed.
        **{
            name: fields.get(name, int) if name in fields.data else 0
            for name in ("expected_cached", "expected_prompt", "cache_misses")
        },
    )


class _Fields:
    """Typed access to one JSON object of a state, with errors that name the field."""

    def __init__(self, data: Any, where: str) -> None:
        if not isinstance(data, dict):
            raise SessionStateError(f"{where} must be a JSON object, not {type(data).__name__}")
        self.data, self.where = data, where

    def get(self, name: str, kind: type, optional: bool = False) -> Any:
        if name not in self.data:
            raise SessionStateError(f"{self.where} has no {name!r}")
        value = self.data[name]
        if value is None and optional:
            return None
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise SessionStateError(
                f"{self.where}: {name!r} must be {kind.__name__}, not {type(value).__name__}"
            )
        return value

    def sub(self, name: str, optional: bool = False) -> _Fields | None:
        value = self.get(name, dict, optional)
        return _Fields(value, f"{self.where}.{name}") if value is not None else None


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise SessionStateError(f"conversation state: {where} must hold strings")
    return value


def _hex_float(value: Any, where: str) -> float:
    try:
        return float.fromhex(_text(value, where))
    except ValueError:
        raise SessionStateError(
            f"conversation state: {where} holds {value!r}, not a float"
        ) from None


def _read_event(fields: _Fields | None) -> NativeEvent | None:
    if fields is None:
        return None
    kind = fields.get("kind", str)
    if kind not in ("started", "completed", "ignored"):
        raise SessionStateError(f"{fields.where}: unknown event kind {kind!r}")
    return NativeEvent(fields.get("source", str), kind, fields.get("detail", str))


def _read_frozen(fields: _Fields) -> FrozenMemory:
    name = fields.get("dialect", str)
    dialect = DIALECTS.get(name)
    if dialect is None:
        raise SessionStateError(f"{fields.where}: unknown dialect {name!r}")
    covered = fields.get("covered", int)
    segments: list[Segment] = []
    for index, raw in enumerate(fields.get("segments", list)):
        seg = _Fields(raw, f"{fields.where}.segments[{index}]")
        region = Region(seg.get("start", int), seg.get("end", int), seg.get("kind", str))
        previous = segments[-1].region.end if segments else 0
        if region.kind not in (HISTORY, WORK) or not previous <= region.start < region.end:
            raise SessionStateError(f"{seg.where} is not a region after the one before it")
        text, tokens = seg.get("text", str), seg.get("tokens", int)
        item = dialect.memory_item(text, seg.get("role", str))
        entry, _ = dialect.read(item, region.start)
        segments.append(
            Segment(
                region=region,
                item=item,
                entry=replace(entry, tokens=tokens),
                text=text,
                tokens=tokens,
                budget=seg.get("budget", int),
                compiled=seg.get("compiled", int),
                strategy=seg.get("strategy", str),
                latency_s=_hex_float(seg.get("latency_s", str), f"{seg.where}.latency_s"),
            )
        )
    if not segments or segments[-1].region.end != covered:
        raise SessionStateError(f"{fields.where}: its segments must end where 'covered' does")
    return FrozenMemory(
        segments=tuple(segments),
        covered=covered,
        digest=fields.get("digest", str),
        counter=fields.get("counter", str),
        explicit_budget=fields.get("explicit_budget", int, True),
        built_request=fields.get("built_request", int),
        built_len=fields.get("built_len", int),
        dialect=name,
    )
