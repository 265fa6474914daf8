"""Which upstream a request goes to, in which wire format, and which conversation it belongs to.

Upstreams: ``/v1/messages`` (and anything that carries Anthropic's headers) goes to the
``anthropic`` upstream; everything else goes to ``openai``, except requests of Codex signed in
with a ChatGPT account (they carry a ``ChatGPT-Account-ID`` header and a ChatGPT bearer token the
OpenAI API does not accept), which go to ``chatgpt``, the endpoint Codex itself uses for them.

Conversations are keyed from what the client sends, in this order:

- Claude Code: the ``x-claude-code-session-id`` header, else the session id inside
  ``metadata.user_id`` (a JSON string since v2.1.78, ``..._session_<uuid>`` before); a subagent's
  ``x-claude-code-agent-id`` makes its own conversation;
- Codex: the body's ``prompt_cache_key``, else a ``session-id`` / ``session_id`` /
  ``conversation_id`` header;
- otherwise a hash of the instructions and the first user turn, which stay the same for the
  whole conversation;

and the model, so a side request to a small model under the same session is kept apart.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..settings import GatewaySettings

__all__ = ["API_PATHS", "Route", "conversation_key", "route_request"]

#: Paths whose requests are rewritten, and the dialect that reads them.
API_PATHS: Mapping[str, str] = {
    "/v1/messages": "messages",
    "/v1/responses": "responses",
    "/v1/chat/completions": "chat",
}
_LEGACY_SESSION = re.compile(r"_session_([0-9a-fA-F-]{8,})")


@dataclass(frozen=True, slots=True)
class Route:
    """Where one request goes: the upstream kind, the full URL, and the dialect if rewritten."""

    kind: str
    url: str
    api: str | None


def route_request(
    path: str, query: str, headers: Mapping[str, str], settings: GatewaySettings
) -> Route:
    """The upstream URL for ``path`` (as the client sent it) and the dialect that may rewrite it.

    ``headers`` are lower-cased names. The ``/v1`` prefix is kept for Anthropic (its base URL has
    none) and replaced by the OpenAI or ChatGPT base URL, which includes its own prefix.
    """
    api = API_PATHS.get(path)
    anthropic = path.startswith("/v1/messages") or (
        api is None and ("anthropic-version" in headers or "x-api-key" in headers)
    )
    if anthropic:
        kind, url = "anthropic", settings.upstream("anthropic") + path
    else:
        kind = "chatgpt" if "chatgpt-account-id" in headers else "openai"
        rest = path[len("/v1") :] if path == "/v1" or path.startswith("/v1/") else path
        url = settings.upstream(kind) + rest
    if query:
        url = f"{url}?{query}"
    return Route(kind, url, api)


def _hash(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def _first_user(items: Any) -> Any:
    if isinstance(items, str):
        return items
    for item in items or ():
        if isinstance(item, Mapping) and item.get("role") == "user":
            return item.get("content")
    return None


def _claude_session(headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
    session = headers.get("x-claude-code-session-id")
    if not session:
        metadata = body.get("metadata")
        user_id = metadata.get("user_id") if isinstance(metadata, Mapping) else None
        if isinstance(user_id, str):
            try:
                decoded = json.loads(user_id)
            except ValueError:
                decoded = None
            if isinstance(decoded, Mapping) and isinstance(decoded.get("session_id"), str):
                session = decoded["session_id"]
            elif match := _LEGACY_SESSION.search(user_id):
                session = match[1]
    if not session:
        return None
    agent = headers.get("x-claude-code-agent-id")
    return f"claude:{session}" + (f":agent:{agent}" if agent else "")


def conversation_key(api: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> str:
    """A stable key for the conversation a request belongs to (see the module docstring), with
    the model: a side request to a small model under the same session is another conversation."""
    return f"{_conversation(api, headers, body)}|{body.get('model')}"


def _conversation(api: str, headers: Mapping[str, str], body: Mapping[str, Any]) -> str:
    if api == "messages":
        session = _claude_session(headers, body)
        if session:
            return session
        return "messages:" + _hash(body.get("system"), _first_user(body.get("messages")))
    if api == "responses":
        key = body.get("prompt_cache_key")
        if isinstance(key, str) and key:
            return f"responses:{key}"
        for name in ("session-id", "session_id", "conversation_id"):
            if headers.get(name):
                return f"responses:{headers[name]}"
        return "responses:" + _hash(body.get("instructions"), _first_user(body.get("input")))
    key = body.get("prompt_cache_key") or body.get("user")
    if isinstance(key, str) and key:
        return f"chat:{key}"
    messages = body.get("messages") or []
    system = [m for m in messages if isinstance(m, Mapping) and m.get("role") == "system"][:1]
    return "chat:" + _hash(system, _first_user(messages))
