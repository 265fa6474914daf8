"""Native compaction events from Codex and Claude Code, and the cooldown they cause.

A trusted outer integration routes a conversation's events here; nothing is polled. While a
host compacts natively, requests pass through; after it finishes, a few logical requests pass
through too, so the host's fresh summary settles before TOMC rewrites anything again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["NativeEvent", "NativeState", "read_native_event"]


@dataclass(frozen=True, slots=True)
class NativeEvent:
    """What one event meant: ``kind`` is ``started``, ``completed`` or ``ignored``."""

    source: str
    kind: str
    detail: str

    @property
    def recognized(self) -> bool:
        return self.kind != "ignored"


def _ignored(source: str, detail: str) -> NativeEvent:
    return NativeEvent(source, "ignored", detail)


def _read_codex(event: Mapping[str, Any]) -> NativeEvent:
    method = event.get("method")
    params = event.get("params")
    if method == "thread/compacted":  # deprecated, still sent by older app-servers
        return NativeEvent("codex", "completed", "thread/compacted")
    if method not in ("item/started", "item/completed"):
        return _ignored("codex", f"method {method!r} is not a compaction notification")
    item = params.get("item") if isinstance(params, Mapping) else None
    if not isinstance(item, Mapping) or item.get("type") != "contextCompaction":
        kind = item.get("type") if isinstance(item, Mapping) else None
        return _ignored("codex", f"{method} of item type {kind!r}")
    kind = "started" if method == "item/started" else "completed"
    return NativeEvent("codex", kind, f"{method} contextCompaction {item.get('id', '')}".strip())


def _read_claude(payload: Mapping[str, Any]) -> NativeEvent:
    name = payload.get("hook_event_name")
    if name == "PreCompact":
        return NativeEvent("claude", "started", f"PreCompact ({payload.get('trigger', '?')})")
    if name == "PostCompact":
        return NativeEvent("claude", "completed", "PostCompact")
    if name == "SessionStart" and payload.get("source") == "compact":
        return NativeEvent("claude", "completed", "SessionStart after compact")
    return _ignored("claude", f"hook {name!r} is not a compaction event")


def read_native_event(source: str, event: Any) -> NativeEvent:
    """Classify an event; malformed or unrelated input is reported as ignored, never raised."""
    if isinstance(event, str | bytes):
        try:
            event = json.loads(event)
        except ValueError:
            return _ignored(str(source), "event is not valid JSON")
    if not isinstance(event, Mapping):
        return _ignored(str(source), f"event is a {type(event).__name__}, not a JSON object")
    if source == "codex":
        return _read_codex(event)
    if source == "claude":
        return _read_claude(event)
    return _ignored(str(source), f"unknown source {source!r}; use 'codex' or 'claude'")


@dataclass
class NativeState:
    """Whether a native compaction is running, and how many requests still cool down after one.

    Only the counters live here (they are part of a conversation's state); the limits are the
    session's options and come with each call. A compaction that starts and never reports
    completion pauses at most ``pause_limit`` logical requests, then the session resumes (a lost
    completion event must not disable it forever). A completion with no start since the last
    one, arriving before any request or while that one's cooldown still runs (a host that sends
    both ``item/completed`` and ``thread/compacted``), does not restart the cooldown.
    """

    in_progress: NativeEvent | None = None
    paused_requests: int = 0
    cooldown_left: int = 0
    last_completed: NativeEvent | None = None
    requests_since_completion: int | None = None

    def apply(self, event: NativeEvent, cooldown_requests: int) -> bool:
        """Apply an event; ``False`` when it changes nothing (ignored, or a repeated completion)."""
        if event.kind == "started":
            self.in_progress = event
            self.paused_requests = 0
            return True
        if event.kind != "completed":
            return False
        if self.in_progress is None and (
            self.requests_since_completion == 0 or self.cooldown_left > 0
        ):
            return False  # the same compaction reported again, or its cooldown still running
        self.in_progress = None
        self.cooldown_left = cooldown_requests
        self.last_completed = event
        self.requests_since_completion = 0
        return True

    def gate(self, cooldown_requests: int, pause_limit: int) -> tuple[str, str] | None:
        """Called once per logical request: ``(code, reason)`` to pass through, else ``None``."""
        if self.requests_since_completion is not None:
            self.requests_since_completion += 1
        if self.in_progress is not None:
            event = self.in_progress
            if self.paused_requests < pause_limit:
                self.paused_requests += 1
                return (
                    "native_pause",
                    f"native compaction in progress ({event.source}: {event.detail}); "
                    f"request {self.paused_requests} of at most {pause_limit}",
                )
            # No completion arrived within the bound: resume rather than stay paused forever.
            self.in_progress = None
        if self.cooldown_left > 0:
            done = cooldown_requests - self.cooldown_left + 1
            self.cooldown_left -= 1
            source = self.last_completed.source if self.last_completed else "native"
            return (
                "native_cooldown",
                f"native compaction completed ({source}); cooldown request {done} of "
                f"{cooldown_requests}",
            )
        return None
