"""Which upstream a request goes to, in which wire format, and which conversation it belongs to.

Every answer comes from the dialect registry (:data:`tomc.chat.dialects.DIALECTS`):

- a ``POST`` to a path a format :meth:`~tomc.chat.dialects.Dialect.serves` is in that format
  and may be rewritten (``/v1/messages``, ``/v1/responses``, ``/v1/chat/completions``);
- the upstream is that format's, picked by its headers (Codex signed in with a ChatGPT account
  goes to ``chatgpt``); any other path goes to the format that
  :meth:`~tomc.chat.dialects.Dialect.owns` it (``/v1/messages/count_tokens``, Anthropic's
  headers), else to the default format's upstream (OpenAI's);
- a conversation is keyed by the name its client gives it (the format's conversation hint:
  Claude Code's session, Codex's ``prompt_cache_key`` or session header), else by a hash of what
  stays the same for the whole conversation (the format's conversation seed: instructions and
  first user turn), and by the model, so a side request to a small model under the same session
  is kept apart.

What a browser asks any site for on its own (``/favicon.ico``, ``/robots.txt``, Apple's touch
icons, Chrome DevTools' probe) is no API request: :func:`browser_path` names those paths, which
the gateway answers itself and never forwards.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ...chat.dialects import DEFAULT_DIALECT, DIALECTS, Dialect
from ..settings import GatewaySettings

__all__ = [
    "UpstreamRoute",
    "api_for_path",
    "browser_path",
    "compaction_api",
    "compaction_dialect",
    "conversation_key",
    "conversation_of",
    "dialect_for_path",
    "error_api",
    "request_view",
    "route_request",
    "wire_body",
]


@dataclass(frozen=True, slots=True)
class UpstreamRoute:
    """Where one request goes: the upstream kind, the full URL, and the dialect if rewritten
    (``api`` is its name); ``answers`` names the format whose provider gets it (the dialect's,
    or the one that owns a path only forwarded), whose error shape the gateway's own answers
    take."""

    kind: str
    url: str
    api: str | None
    dialect: Dialect | None = field(default=None, compare=False, repr=False)
    answers: str = DEFAULT_DIALECT


#: Paths a browser asks for by itself: the site's icon (``/favicon.ico``, Apple's
#: ``/apple-touch-icon[-WxH][-precomposed].png``), ``/robots.txt``, and the file Chrome's
#: developer tools look for. No provider serves an API there.
_BROWSER_PATHS = re.compile(
    r"/(favicon\.ico|robots\.txt|apple-touch-icon[-\w]*\.png"
    r"|\.well-known/appspecific/com\.chrome\.devtools\.json)"
)


def browser_path(path: str) -> bool:
    """Whether ``path`` is one a browser asks for by itself (see the module docstring)."""
    return _BROWSER_PATHS.fullmatch(path) is not None


def _dialect(api: str | Dialect) -> Dialect:
    return DIALECTS[api] if isinstance(api, str) else api


def dialect_for_path(path: str) -> Dialect | None:
    """The format a ``POST`` to ``path`` carries (one the gateway may rewrite), else ``None``."""
    return next((dialect for dialect in DIALECTS.values() if dialect.serves(path)), None)


def api_for_path(path: str) -> str | None:
    """The name of :func:`dialect_for_path`'s format, else ``None``."""
    dialect = dialect_for_path(path)
    return dialect.name if dialect is not None else None


def compaction_dialect(path: str) -> Dialect | None:
    """The format whose own compaction endpoint ``path`` is (``/v1/responses/compact``)."""
    return next((dialect for dialect in DIALECTS.values() if dialect.compacts(path)), None)


def compaction_api(path: str) -> str | None:
    """The name of :func:`compaction_dialect`'s format, else ``None``."""
    dialect = compaction_dialect(path)
    return dialect.name if dialect is not None else None


def _owner(path: str, headers: Mapping[str, str]) -> Dialect:
    """The format whose provider gets a request on a path no format serves."""
    owners = (dialect for dialect in DIALECTS.values() if dialect.owns(path, headers))
    return next(owners, DIALECTS[DEFAULT_DIALECT])


def error_api(path: str, headers: Mapping[str, str]) -> str:
    """The format whose provider a request on ``path`` goes to (``headers``: lower-cased
    names), whose error shape the client's SDK parses: ``count_tokens`` gets Anthropic's."""
    return (dialect_for_path(path) or _owner(path, headers)).name


def route_request(
    path: str, query: str, headers: Mapping[str, str], settings: GatewaySettings
) -> UpstreamRoute:
    """The upstream URL for ``path`` (as the client sent it) and the dialect that may rewrite it.

    ``headers`` are lower-cased names. The upstream's base URL replaces the part of the path it
    carries itself (OpenAI's ``/v1``; Anthropic's base URL has none).
    """
    served = dialect_for_path(path)
    answering = served or _owner(path, headers)
    upstream = answering.upstream(headers)
    url = upstream.join(settings.upstream(upstream.kind), path)
    if query:
        url = f"{url}?{query}"
    api = served.name if served else None
    return UpstreamRoute(upstream.kind, url, api, served, answering.name)


def request_view(api: str | Dialect, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """The body as the session reads it: the session (like the SDK calls) reads the model from
    the request, so a model the format carries in the URL joins the body as ``model``. ``api``
    is the format (or its name)."""
    model = _dialect(api).model_of(path, body)
    if model is None or "model" in body:
        return body
    return {**body, "model": model}


def wire_body(
    body: dict[str, Any], view: dict[str, Any], rewritten: dict[str, Any]
) -> dict[str, Any]:
    """A rewritten :func:`request_view` of ``body`` back in the format's own shape: without the
    ``model`` the view added."""
    if view is body:
        return rewritten
    return {key: value for key, value in rewritten.items() if key != "model"}


def _hash(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:24]


def conversation_key(
    api: str | Dialect, headers: Mapping[str, str], body: Mapping[str, Any]
) -> str:
    """A stable key for the conversation a request belongs to (see the module docstring), with
    the model: a side request to a small model under the same session is another conversation.
    ``api`` is the format (or its name); ``body`` the :func:`request_view`, which names the
    model."""
    dialect = _dialect(api)
    name = dialect.conversation_hint(headers, body)
    if name is None:
        name = f"{dialect.name}:" + _hash(*dialect.conversation_seed(body))
    return f"{name}|{body.get('model')}"


def conversation_of(
    dialect: Dialect, path: str, headers: Mapping[str, str], body: dict[str, Any]
) -> tuple[dict[str, Any], str]:
    """A request's :func:`request_view` and :func:`conversation_key`, together."""
    view = request_view(dialect, path, body)
    return view, conversation_key(dialect, headers, view)
