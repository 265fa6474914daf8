"""The web source inspector as a Starlette application: one static page and a small JSON API.

:func:`create_app` builds the whole application; :func:`inspector_routes` returns just its
routes, for mounting in a larger local app (which then brings its own Host check and error
handlers). The compiler is injected (``compile_fn``), so tests and a gateway can replace it.

Endpoints (JSON answers are UTF-8; errors are ``{"error": {"status", "type", "message"}}``):

``GET /``                   the page (``static/index.html``)
``GET /static/<name>``      a shipped static file (only names present in the package)
``GET /api/health``         ``{"status": "ok", "version": ...}``
``GET /api/options``        strategies, counters, the character limits, the body limit
``GET /api/example``        the bundled example history, task and budget
``POST /api/compile``       compile a history; the body is a JSON :class:`CompileRequest`

Requests whose ``Host`` is not an allowed name are refused with 421 before routing: a web page
elsewhere cannot reach the inspector by pointing its own domain name at 127.0.0.1 (DNS
rebinding). Compiling runs in a worker thread, so a long compile never blocks the event loop.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Collection, Mapping
from functools import partial
from importlib import resources
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import Receive, Scope

from .. import __version__
from .._core.compiler import STRATEGIES as _LIBRARY_STRATEGIES
from .._core.compiler import compile_memory
from .._core.result import CompileResult
from .._core.sources import MAX_INTERACTIVE_CHARS, MAX_TASK_CHARS
from .._core.tokens import COUNTER_NAMES
from .._http.hosts import HostCheck
from .._http.origins import OriginCheck
from .._http.redact import install_redaction
from .._http.server import LOOPBACK_HOSTS
from .._service import (
    DEFAULT_COUNTER,
    DEFAULT_STRATEGY,
    HISTORY_FORMATS,
    Compiled,
    CompileFunction,
    CompileRequest,
    compile_request,
    report_error,
)

__all__ = [
    "BODY_TIMEOUT_S",
    "LOOPBACK_HOSTS",
    "MAX_BODY_BYTES",
    "STRATEGIES",
    "build_response",
    "create_app",
    "inspector_routes",
    "load_example",
    "misdirected",
]

# The library's strategies, its default first (the page lists them in this order).
STRATEGIES = (DEFAULT_STRATEGY, *(s for s in _LIBRARY_STRATEGIES if s != DEFAULT_STRATEGY))
# JSON can spend up to 6 bytes on one character (a \uXXXX escape; 12 for an escaped surrogate
# pair) and a chat list adds per-message keys, so the byte cap is generous on purpose: it only
# exists so a body is refused before it is read, the character limit is the real rule.
MAX_BODY_BYTES = 8 * MAX_INTERACTIVE_CHARS + 64 * 1024
#: A body that stops arriving for this long before its Content-Length is complete gets a 400.
BODY_TIMEOUT_S = 5.0
# Python refuses to convert longer integer literals (ValueError); name the problem instead.
_MAX_INT_DIGITS = sys.get_int_max_str_digits() or 4300
_ALL_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")

_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}
_JSON = "application/json; charset=utf-8"
# Everything the page needs is served from this origin; the policy makes a stray CDN reference
# fail loudly in the browser instead of silently working only on machines with a network.
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
_COMMON_HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}

_log = logging.getLogger("tomc.web")


class HTTPError(Exception):
    """A request the API refuses: the status, a type name and a message meant for people."""

    def __init__(
        self,
        status: int,
        message: str,
        kind: str = "BadRequest",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.headers = dict(headers or {})


# ---- responses ---------------------------------------------------------------------------


def _encode_json(data: Any) -> bytes:
    # An unpaired surrogate (from a \ud800 escape in the request) cannot be UTF-8 encoded; as a
    # JSON escape it round-trips exactly, as the request sent it.
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return text.encode("utf-8", "backslashreplace")


def _response(
    status: int, body: bytes, content_type: str, headers: Mapping[str, str] | None = None
) -> Response:
    return Response(
        body,
        status_code=status,
        media_type=None,
        headers={"Content-Type": content_type, **_COMMON_HEADERS, **(headers or {})},
    )


def _json_response(status: int, data: Any, headers: Mapping[str, str] | None = None) -> Response:
    return _response(status, _encode_json(data), _JSON, headers)


def _error_response(exc: HTTPError) -> Response:
    payload = {"error": {"status": exc.status, "type": exc.kind, "message": exc.message}}
    return _json_response(exc.status, payload, exc.headers)


# ---- static files and the example --------------------------------------------------------


def _load_static() -> dict[str, tuple[bytes, str]]:
    """Read the shipped static files once; only these names can ever be served."""
    files: dict[str, tuple[bytes, str]] = {}
    for entry in resources.files(__package__).joinpath("static").iterdir():
        name = entry.name
        suffix = name[name.rfind(".") :] if "." in name else ""
        if entry.is_file() and suffix in _CONTENT_TYPES:
            files[name] = (entry.read_bytes(), _CONTENT_TYPES[suffix])
    return files


def load_example() -> dict[str, Any]:
    """The bundled example: ``history`` (one string), ``task``, ``budget_tokens``, ``strategy``."""
    raw = resources.files(__package__).joinpath("static", "example.json").read_text("utf-8")
    data = json.loads(raw)
    return {
        "name": data["name"],
        "history": "\n".join(data["history_lines"]) + "\n",
        "task": data["task"],
        "budget_tokens": data["budget_tokens"],
        "strategy": data["strategy"],
        "counter": data["counter"],
    }


def options() -> dict[str, Any]:
    """What ``GET /api/options`` answers: the choices and limits the page offers."""
    return {
        "strategies": list(STRATEGIES),
        "default_strategy": DEFAULT_STRATEGY,
        "counters": list(COUNTER_NAMES),
        "default_counter": DEFAULT_COUNTER,
        "history_formats": list(HISTORY_FORMATS),
        "max_chars": MAX_INTERACTIVE_CHARS,
        "max_task_chars": MAX_TASK_CHARS,
        "max_body_bytes": MAX_BODY_BYTES,
    }


# ---- compile -----------------------------------------------------------------------------


def _unit_views(result: CompileResult) -> list[dict[str, Any]]:
    """Each source unit with its status for the page: ``kept``, ``record`` or ``omitted``.

    ``kept``: its own text was packed into the memory. ``record``: its text was not packed,
    but an included record (state, relation, count) cites it, so what it says is kept in
    compiled form. ``omitted``: neither. ``reason`` says which, in words.
    """
    source_rows = {row.key: row for row in result.ledger if row.kind == "source"}
    cited_by: dict[str, list[str]] = {}
    for row in result.ledger:
        if row.included and row.kind != "source":
            for source_id in row.source_ids:
                cited_by.setdefault(source_id, []).append(f"{row.kind} {row.key}")
    views = []
    for unit in result.sources:
        view = unit.to_dict()
        row = source_rows.get(unit.id)
        records = cited_by.get(unit.id, [])
        if row is not None and row.included:
            view["status"], view["reason"] = "kept", row.reason
        elif records:
            shown = ", ".join(records[:3]) + (
                f" and {len(records) - 3} more" if len(records) > 3 else ""
            )
            note = f"; its own line: {row.reason}" if row is not None else ""
            view["status"], view["reason"] = "record", f"supports included {shown}{note}"
        else:
            view["status"] = "omitted"
            view["reason"] = row.reason if row is not None else "no included record cites it"
        view["records"] = records
        views.append(view)
    return views


def build_response(compiled: Compiled) -> dict[str, Any]:
    """``CompileResult.to_dict()`` plus each unit's status and how the input was read."""
    data = compiled.result.to_dict(include_sources=False)
    data["sources"] = _unit_views(compiled.result)
    data["input"] = {"format": compiled.history_format, "max_chars": MAX_INTERACTIVE_CHARS}
    return data


def _parse_int(text: str) -> int:
    digits = len(text) - text.startswith("-")
    if digits > _MAX_INT_DIGITS:
        raise HTTPError(
            400,
            f"the body holds a number with {digits:,} digits; a number in a request may have "
            f"at most {_MAX_INT_DIGITS:,}",
        )
    return int(text)


def _decode_body(raw: bytes) -> Any:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise HTTPError(400, f"the body is not valid UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text, parse_int=_parse_int)
    except json.JSONDecodeError as exc:
        raise HTTPError(
            400, f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise HTTPError(400, "the body is nested too deeply") from None


def _compile_body(raw: bytes, compile_fn: CompileFunction) -> Response:
    """Everything after the body has arrived; runs in a worker thread."""
    try:
        request = CompileRequest.from_json(_decode_body(raw))
        return _json_response(200, build_response(compile_request(request, compile_fn=compile_fn)))
    except HTTPError as exc:
        return _error_response(exc)
    except Exception as exc:
        report = report_error(exc, "compiling the history")
        if not report.expected:
            _log.error("%s", report.message, exc_info=exc)
        return _error_response(HTTPError(report.http_status, report.message, report.type))


async def _read_body(receive: Receive, length: int, timeout_s: float) -> bytes | None:
    """The body, or ``None`` when the client went away; :class:`HTTPError` if it stalls."""
    chunks: list[bytes] = []
    received = 0
    more = True
    while more:
        with anyio.move_on_after(timeout_s) as waited:
            message = await receive()
        if waited.cancelled_caught:
            # Closing is the only sane end for a connection whose body never completes.
            raise HTTPError(
                400,
                f"the body stopped after {received:,} of the {length:,} bytes announced: "
                f"nothing more arrived for {timeout_s:g} s",
                headers={"Connection": "close"},
            )
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        received += len(chunk)
        chunks.append(chunk)
        more = message.get("more_body", False)
    return b"".join(chunks)


def _check_compile_headers(request: Request) -> int:
    """The announced body length, after the checks that need no body (411, 400, 413, 415)."""
    headers = request.headers
    if "transfer-encoding" in headers or "content-length" not in headers:
        raise HTTPError(
            411,
            "the request needs a Content-Length header (chunked bodies are not accepted)",
            "LengthRequired",
        )
    try:
        length = int(headers["content-length"])
    except ValueError:
        raise HTTPError(400, "Content-Length is not a number") from None
    if length > MAX_BODY_BYTES:
        # Answered from the header alone: the server discards the unread body after replying.
        raise HTTPError(
            413,
            f"the request body has {length:,} bytes, over the limit of {MAX_BODY_BYTES:,} "
            f"(the history limit is {MAX_INTERACTIVE_CHARS:,} characters)",
            "BodyTooLarge",
        )
    # Requiring JSON also keeps other web sites from posting here: a cross-origin page can only
    # send application/json after a CORS preflight, which this server never grants.
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/json":
        raise HTTPError(
            415,
            "send the request as JSON with the header Content-Type: application/json",
            "UnsupportedMediaType",
        )
    return length


# ---- routes ------------------------------------------------------------------------------

Endpoint = Callable[[Request], Any]


def _only(allowed: tuple[str, ...], endpoint: Endpoint) -> Endpoint:
    """Answer 405 with an ``Allow`` header for any other method; errors become JSON."""

    async def handle(request: Request) -> Response:
        if request.method not in allowed:
            return _error_response(
                HTTPError(
                    405,
                    f"{request.method} is not allowed here; use {', '.join(allowed)}",
                    "MethodNotAllowed",
                    {"Allow": ", ".join(allowed)},
                )
            )
        try:
            return await endpoint(request)
        except HTTPError as exc:
            return _error_response(exc)

    return handle


def inspector_routes(
    *, compile_fn: CompileFunction = compile_memory, body_timeout_s: float = BODY_TIMEOUT_S
) -> list[BaseRoute]:
    """The inspector's routes (page, static files, JSON API), ready to mount in an app.

    ``compile_fn`` is called as :func:`tomc.compile_memory` is; ``body_timeout_s`` is how long
    a request body may stall before it is refused.
    """
    static = _load_static()
    example = load_example()

    async def page(request: Request) -> Response:
        return await static_file(request, "index.html")

    async def static_file(request: Request, name: str | None = None) -> Response:
        name = name or request.path_params["name"]
        entry = static.get(name)
        if entry is None:
            raise HTTPError(404, f"nothing is served at {request.url.path}", "NotFound")
        body, content_type = entry
        headers = {"Content-Security-Policy": _CSP} if content_type.startswith("text/html") else {}
        return _response(200, body, content_type, headers)

    async def health(request: Request) -> Response:
        return _json_response(200, {"status": "ok", "version": __version__})

    async def get_options(request: Request) -> Response:
        return _json_response(200, options())

    async def get_example(request: Request) -> Response:
        return _json_response(200, example)

    async def compile_endpoint(request: Request) -> Response:
        length = _check_compile_headers(request)
        try:
            raw = await _read_body(request.receive, length, body_timeout_s)
        except ClientDisconnect:
            raw = None
        if raw is None:  # the client left; there is no one to answer
            return Response(status_code=400)
        return await anyio.to_thread.run_sync(partial(_compile_body, raw, compile_fn))

    get = ("GET", "HEAD")
    return [
        Route("/", _only(get, page), methods=_ALL_METHODS),
        Route("/index.html", _only(get, page), methods=_ALL_METHODS),
        Route("/static/{name}", _only(get, static_file), methods=_ALL_METHODS),
        Route("/api/health", _only(get, health), methods=_ALL_METHODS),
        Route("/api/options", _only(get, get_options), methods=_ALL_METHODS),
        Route("/api/example", _only(get, get_example), methods=_ALL_METHODS),
        Route("/api/compile", _only(("POST",), compile_endpoint), methods=_ALL_METHODS),
    ]


# ---- the application ---------------------------------------------------------------------


def misdirected(name: str) -> Response:
    error = HTTPError(
        421,
        f"this inspector does not answer to the host name {name!r}; open it as "
        f"http://127.0.0.1 or http://localhost (or start it with --allow-host {name})",
        "MisdirectedRequest",
        {"Connection": "close"},
    )
    return _error_response(error)


_CROSS_SITE_WHY = "the inspector answers only its own page (open it at its own address)"


def _cross_site(scope: Scope, message: str) -> Response:
    return _error_response(HTTPError(403, message, "CrossSiteRequest"))


def create_app(
    *,
    compile_fn: CompileFunction = compile_memory,
    allowed_hosts: Collection[str] | None = LOOPBACK_HOSTS,
    body_timeout_s: float = BODY_TIMEOUT_S,
) -> Starlette:
    """The inspector application: its routes behind the Host check and the cross-site check
    (pages of other origins are refused, 403), with JSON errors for unknown paths (404) and
    anything unexpected (500, no internals; the traceback is logged). Log records of TOMC and
    the server are redacted from here on (:func:`~tomc._http.redact.install_redaction`).

    ``allowed_hosts`` are the host names it answers to (``None``: any).
    """
    install_redaction()

    async def not_found(request: Request, exc: Exception) -> Response:
        if isinstance(exc, HTTPException) and exc.status_code != 404:
            return _error_response(HTTPError(exc.status_code, str(exc.detail), "HTTPError"))
        error = HTTPError(404, f"nothing is served at {request.url.path}", "NotFound")
        return _error_response(error)

    async def internal_error(request: Request, exc: Exception) -> Response:
        report = report_error(exc, f"serving {request.method} {request.url.path}")
        _log.error("%s", report.message, exc_info=exc)
        return _error_response(HTTPError(500, report.message, report.type))

    return Starlette(
        routes=inspector_routes(compile_fn=compile_fn, body_timeout_s=body_timeout_s),
        middleware=[
            Middleware(HostCheck, allowed=allowed_hosts, refuse=misdirected),
            Middleware(OriginCheck, refuse=_cross_site, why=_CROSS_SITE_WHY),
        ],
        exception_handlers={HTTPException: not_found, Exception: internal_error},
    )
