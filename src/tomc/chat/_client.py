"""Driving the caller's own SDK client: which method sends the request, and with which headers.

:func:`call` and :func:`acall` are the bodies of ``AutomaticChatSession.create`` and ``acreate``:
find the client's method for the request's format (named, or guessed from the client and the
request), let the session prepare the request, send it with the headers the session adds joined
to the caller's own, and hand a finished response's usage back. :func:`join_headers` is the one
rule for adding a value to a comma-separated header (``anthropic-beta``); the gateway's relay
uses it too.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .._core.errors import UnsupportedClientError
from ._decision import Decision
from ._options import check_choice
from ._plan import PreparedRequest
from .dialects import DIALECTS, Dialect, guess_dialects

__all__ = ["acall", "call", "join_headers", "resolve", "with_headers"]


def call(
    client: Any,
    api: str | None,
    default_api: str | None,
    request: Mapping[str, Any],
    prepare: Callable[[str], PreparedRequest],
    observe: Callable[[Any], None],
) -> Any:
    """Send ``request`` (the call's options, without the model) as ``prepare`` rewrites it for
    the format ``api`` (else ``default_api``, else guessed); return the client's result."""
    dialect, send = resolve(client, api, default_api, request, want_async=False)
    prepared = prepare(dialect.name)
    response = send(**with_headers(prepared.body, prepared.headers, client))
    if not request.get("stream"):
        # Reading usage from a finished response is free; a stream is left untouched.
        observe(dialect.prompt_tokens(response))
    return response


async def acall(
    client: Any,
    api: str | None,
    default_api: str | None,
    request: Mapping[str, Any],
    prepare: Callable[[str], PreparedRequest],
    observe: Callable[[Any], None],
    remember: Callable[[Decision], None],
) -> Any:
    """:func:`call` for an async client: ``prepare`` runs in a worker thread (a large compile
    never blocks the event loop) and ``remember`` gets its decision in the caller's context."""
    dialect, send = resolve(client, api, default_api, request, want_async=True)
    prepared = await asyncio.to_thread(prepare, dialect.name)
    remember(prepared.decision)
    result = await send(**with_headers(prepared.body, prepared.headers, client))
    if not request.get("stream"):
        observe(dialect.prompt_tokens(result))
    return result


def resolve(
    client: Any,
    api: str | None,
    default_api: str | None,
    options: Mapping[str, Any],
    *,
    want_async: bool,
) -> tuple[Dialect, Callable[..., Any]]:
    """The format and the client's method that sends it; :class:`tomc.UnsupportedClientError`
    for a client that has no such method, or is async where sync is wanted (or the reverse)."""
    if api is not None:
        check_choice("api", api, tuple(DIALECTS))
    name = api or default_api
    candidates = [DIALECTS[name]] if name else guess_dialects(options)
    for dialect in candidates:
        send = dialect.endpoint(client)
        if send is None:
            continue
        is_async = inspect.iscoroutinefunction(inspect.unwrap(send))
        if is_async != want_async:
            method, other = ("create", "acreate") if want_async else ("acreate", "create")
            raise UnsupportedClientError(
                f"{type(client).__name__} is {'an async' if is_async else 'a sync'} client: "
                f"use session.{other}(...) with it, not session.{method}(...)"
            )
        return dialect, send
    wanted = ", ".join(f"{d.name} ({d.method_name})" for d in candidates)
    raise UnsupportedClientError(
        f"{type(client).__name__} has no method for {wanted}; pass a Chat Completions, "
        "Anthropic Messages or OpenAI Responses client (or name the format with api=...)"
    )


def join_headers(
    headers: Iterable[tuple[str, str]],
    add: Mapping[str, str],
    defaults: Mapping[str, Any] | None = None,
) -> list[tuple[str, str]]:
    """``headers`` with each of ``add`` joined to the header of the same name (names compare
    case-insensitively): its value is appended to the comma-separated list unless already in
    it (then the header stays as it was). A name not in ``headers`` is added, starting from
    its value in ``defaults`` (what the client sends anyway) when there is one."""
    out = list(headers)
    for name, value in add.items():
        for index, (existing, current) in enumerate(out):
            if existing.lower() == name.lower():
                out[index] = (existing, _joined(current, value))
                break
        else:
            base = next((v for k, v in (defaults or {}).items() if k.lower() == name.lower()), None)
            out.append((name, _joined(base, value)))
    return out


def _joined(current: Any, value: str) -> str:
    text = str(current or "")
    parts = [part.strip() for part in text.split(",") if part.strip()]
    return text if value in parts else ",".join([*parts, value])


def with_headers(body: dict[str, Any], headers: Mapping[str, str], client: Any) -> dict[str, Any]:
    """``body`` with ``headers`` joined to the caller's own values of the same names: from the
    call's ``extra_headers``, else from the client's ``default_headers``, so a beta the caller
    set anywhere is kept beside the one added."""
    if not headers:
        return body
    defaults = getattr(client, "default_headers", None)
    defaults = defaults if isinstance(defaults, Mapping) else {}
    merged = join_headers((body.get("extra_headers") or {}).items(), headers, defaults)
    return {**body, "extra_headers": dict(merged)}
