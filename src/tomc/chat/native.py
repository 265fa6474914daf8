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


class NativeState:
    """Whether a native compaction is running, and how many requests still cool down after one."""

    def __init__(self, cooldown_requests: int) -> None:
        if cooldown_requests < 0:
            raise ValueError("native_cooldown_requests must be >= 0")
        self.cooldown_requests = cooldown_requests
        self.in_progress: NativeEvent | None = None
        self.cooldown_left = 0
        self.last_completed: NativeEvent | None = None

    def apply(self, event: NativeEvent) -> None:
        if event.kind == "started":
            self.in_progress = event
        elif event.kind == "completed":
            self.in_progress = None
            self.cooldown_left = self.cooldown_requests
            self.last_completed = event

    def gate(self) -> str | None:
        """Called once per logical request: a pass-through reason, or ``None`` to proceed."""
        if self.in_progress is not None:
            event = self.in_progress
            return f"native compaction in progress ({event.source}: {event.detail})"
        if self.cooldown_left > 0:
            done = self.cooldown_requests - self.cooldown_left + 1
            self.cooldown_left -= 1
            source = self.last_completed.source if self.last_completed else "native"
            return (
                f"native compaction completed ({source}); cooldown request {done} of "
                f"{self.cooldown_requests}"
            )
        return None
