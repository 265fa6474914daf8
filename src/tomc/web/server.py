"""HTTP server of the web source inspector: one static page plus a JSON API over the library.

Standard library only (``ThreadingHTTPServer``): the inspector is a local, single-user tool, so
a framework would add a dependency without adding anything it needs.

Endpoints (all JSON answers are UTF-8; errors are ``{"error": {"status", "type", "message"}}``):

``GET /``                   the page (``static/index.html``)
``GET /static/<name>``      a shipped static file (only names present in the package)
``GET /api/health``         ``{"status": "ok", "version": ...}``
``GET /api/options``        strategies, counters, the character limit, the body limit
``GET /api/example``        the bundled example history, task and budget
``POST /api/compile``       compile a history; the body is a JSON object (see :func:`parse_request`)
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any
from urllib.parse import urlsplit

from .. import __version__
from ..compiler import STRATEGIES as _LIBRARY_STRATEGIES
from ..counters import COUNTER_NAMES
from ..errors import InputTooLargeError, InvalidHistoryError, TomcError
from ..sources import MAX_INTERACTIVE_CHARS, check_interactive_size, detect_chat_messages

__all__ = [
    "DEFAULT_HOST",
    "DEFAULT_PORT",
    "MAX_BODY_BYTES",
    "STRATEGIES",
    "CompileRequest",
    "InspectorServer",
    "build_response",
    "make_server",
    "parse_request",
    "serve",
]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
# The library's strategies, its default first (the page lists them in this order).
STRATEGIES = ("tomc_raw", *(name for name in _LIBRARY_STRATEGIES if name != "tomc_raw"))
HISTORY_FORMATS = ("auto", "text", "messages")

# JSON can spend up to 6 bytes on one character (a \uXXXX escape; 12 for an escaped surrogate
# pair) and a chat list adds per-message keys, so the byte cap is generous on purpose: it only
# exists so a body is refused before it is read, the character limit is the real rule.
MAX_BODY_BYTES = 8 * MAX_INTERACTIVE_CHARS + 64 * 1024
# After refusing an oversized body, discard at most this much of it before closing: a client
# that is still sending when the socket closes gets a reset and never sees the 413 message.
_DRAIN_BYTES = 4 * 1024 * 1024
_DRAIN_TIMEOUT_S = 2.0

_REQUEST_FIELDS = frozenset(
    {"history", "task", "budget_tokens", "strategy", "counter", "uncapped", "history_format"}
)

_CONTENT_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".json": "application/json; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
}

# Everything the page needs is served from this origin; the policy makes a stray CDN reference
# fail loudly in the browser instead of silently working only on machines with a network.
_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)


class RequestError(Exception):
    """A request the API refuses; carries the HTTP status and a message meant for people."""

    def __init__(self, status: HTTPStatus, message: str, kind: str = "BadRequest") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


@dataclass(frozen=True)
class CompileRequest:
    """A validated ``POST /api/compile`` body."""

    history: str | list[Any]
    task: str
    budget_tokens: int | None
    strategy: str
    counter: str
    uncapped: bool
    history_format: str  # what was compiled: "text" or "messages"


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


def parse_request(body: Any) -> CompileRequest:
    """Validate a decoded ``/api/compile`` body; raise :class:`RequestError` or a TOMC error.

    Fields: ``history`` (str, or a list of chat messages), ``task`` (str), optional
    ``budget_tokens`` (int or null), ``strategy``, ``counter``, ``uncapped`` (bool) and
    ``history_format`` (``auto`` | ``text`` | ``messages``: how a *string* history is read;
    ``auto`` treats a JSON array of message objects as chat messages).
    """
    if not isinstance(body, dict):
        raise RequestError(
            HTTPStatus.BAD_REQUEST,
            f"the request body must be a JSON object, not {_json_type(body)}",
        )
    unknown = sorted(set(body) - _REQUEST_FIELDS)
    if unknown:
        raise RequestError(
            HTTPStatus.BAD_REQUEST,
            f"unknown field(s): {', '.join(unknown)}; expected some of "
            + ", ".join(sorted(_REQUEST_FIELDS)),
        )
    if "history" not in body:
        raise RequestError(HTTPStatus.BAD_REQUEST, "the field 'history' is required")
    history = body["history"]
    if not isinstance(history, str | list):
        raise RequestError(
            HTTPStatus.BAD_REQUEST,
            f"'history' must be a string or a list of chat messages, not {_json_type(history)}",
        )
    task = body.get("task", "")
    if not isinstance(task, str):
        raise RequestError(
            HTTPStatus.BAD_REQUEST, f"'task' must be a string, not {_json_type(task)}"
        )
    budget = body.get("budget_tokens")
    # bool is an int in Python; `true` as a budget is a client bug, not 1 token.
    if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
        raise RequestError(
            HTTPStatus.BAD_REQUEST,
            f"'budget_tokens' must be a whole number of tokens or null, not {_json_type(budget)}",
        )
    strategy = body.get("strategy", "tomc_raw")
    counter = body.get("counter", "lexical")
    for name, value in (("strategy", strategy), ("counter", counter)):
        if not isinstance(value, str):
            raise RequestError(
                HTTPStatus.BAD_REQUEST, f"'{name}' must be a string, not {_json_type(value)}"
            )
    uncapped = body.get("uncapped", False)
    if not isinstance(uncapped, bool):
        raise RequestError(
            HTTPStatus.BAD_REQUEST, f"'uncapped' must be true or false, not {_json_type(uncapped)}"
        )
    history_format = body.get("history_format", "auto")
    if history_format not in HISTORY_FORMATS:
        raise RequestError(
            HTTPStatus.BAD_REQUEST,
            f"'history_format' must be one of {', '.join(HISTORY_FORMATS)}, not {history_format!r}",
        )

    # The limit applies to what the person submitted (the page counts the same characters), so
    # it is checked before a pasted JSON list is parsed.
    check_interactive_size(history, task, MAX_INTERACTIVE_CHARS)
    compiled_format = "messages" if isinstance(history, list) else "text"
    if isinstance(history, str) and history_format != "text":
        messages = detect_chat_messages(history)
        if messages is not None:
            history, compiled_format = messages, "messages"
        elif history_format == "messages":
            raise InvalidHistoryError(
                "history_format is 'messages' but the history is not a JSON list of chat "
                'messages such as [{"role": "user", "content": "..."}]'
            )
    return CompileRequest(
        history=history,
        task=task,
        budget_tokens=budget,
        strategy=strategy,
        counter=counter,
        uncapped=uncapped,
        history_format=compiled_format,
    )


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}
    if value is None:
        return "null"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return "a number"
    return names.get(type(value), type(value).__name__)


def _unit_views(result: Any) -> list[dict[str, Any]]:
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


def build_response(request: CompileRequest) -> dict[str, Any]:
    """Compile; answer ``CompileResult.to_dict()`` plus each unit's status and input facts."""
    from .. import compile_memory  # resolved per call so tests can substitute the compiler

    result = compile_memory(
        request.history,
        request.task,
        budget_tokens=request.budget_tokens,
        strategy=request.strategy,
        counter=request.counter,
        uncapped=request.uncapped,
    )
    data = result.to_dict(include_sources=False)
    data["sources"] = _unit_views(result)
    data["input"] = {"format": request.history_format, "max_chars": MAX_INTERACTIVE_CHARS}
    return data


class InspectorHandler(BaseHTTPRequestHandler):
    """Routes requests; every failure becomes a JSON error response, never a dead server."""

    server: InspectorServer
    server_version = "tomc-inspector"
    _answered = False
    _head = False
    # A stalled client must not pin a thread forever (slow bodies included).
    timeout = 30

    # ---- dispatch -------------------------------------------------------------------------
    def do_GET(self) -> None:
        self._dispatch(head=False)

    def do_HEAD(self) -> None:
        self._dispatch(head=True)

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        try:
            if path == "/api/compile":
                self._compile()
                return
            self._discard_body()
            if path in self._get_routes() or path.startswith("/static/"):
                self._method_not_allowed("GET, HEAD")
            else:
                self._not_found(path)
        except Exception:  # the last line of defence: report, keep serving
            self._internal_error()

    def _refuse_method(self) -> None:
        path = urlsplit(self.path).path
        self._discard_body()
        self._method_not_allowed("POST" if path == "/api/compile" else "GET, HEAD")

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def _get_routes(self) -> dict[str, Any]:
        return {
            "/": lambda: self._static("index.html"),
            "/index.html": lambda: self._static("index.html"),
            "/api/health": lambda: self._send_json(
                HTTPStatus.OK, {"status": "ok", "version": __version__}
            ),
            "/api/options": lambda: self._send_json(HTTPStatus.OK, self.server.options()),
            "/api/example": lambda: self._send_json(HTTPStatus.OK, self.server.example),
        }

    def _dispatch(self, *, head: bool) -> None:
        self._head = head
        path = urlsplit(self.path).path
        try:
            routes = self._get_routes()
            if path in routes:
                routes[path]()
            elif path.startswith("/static/"):
                self._static(path.removeprefix("/static/"))
            elif path == "/api/compile":
                self._method_not_allowed("POST")
            else:
                self._not_found(path)
        except Exception:
            self._internal_error()

    def _discard_body(self) -> None:
        """Read and drop a small body this request will not use, so the reply is not reset."""
        self.close_connection = True
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            return
        if 0 < length <= MAX_BODY_BYTES:
            self.rfile.read(length)

    # ---- endpoints ------------------------------------------------------------------------
    def _static(self, name: str) -> None:
        entry = self.server.static.get(name)
        if entry is None:
            self._not_found(self.path)
            return
        body, content_type = entry
        headers = {"Content-Security-Policy": _CSP} if content_type.startswith("text/html") else {}
        self._send(HTTPStatus.OK, body, content_type, headers)

    def _compile(self) -> None:
        try:
            body = self._read_json_body()
            request = parse_request(body)
            data = build_response(request)
        except _AlreadyAnswered:
            return
        except RequestError as exc:
            self._send_error_json(exc.status, exc.kind, exc.message)
            return
        except InputTooLargeError as exc:
            self._send_error_json(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, type(exc).__name__, str(exc))
            return
        except TomcError as exc:
            self._send_error_json(HTTPStatus.BAD_REQUEST, type(exc).__name__, str(exc))
            return
        self._send_json(HTTPStatus.OK, data)

    def _read_json_body(self) -> Any:
        if "Transfer-Encoding" in self.headers or "Content-Length" not in self.headers:
            raise RequestError(
                HTTPStatus.LENGTH_REQUIRED,
                "the request needs a Content-Length header (chunked bodies are not accepted)",
                "LengthRequired",
            )
        try:
            length = int(self.headers["Content-Length"])
        except ValueError:
            raise RequestError(HTTPStatus.BAD_REQUEST, "Content-Length is not a number") from None
        if length < 0:
            raise RequestError(HTTPStatus.BAD_REQUEST, "Content-Length is negative")
        if length > MAX_BODY_BYTES:
            self._refuse_oversized(length)
            raise _AlreadyAnswered
        # Read the (bounded) body before judging it: closing a socket with unread bytes makes
        # the kernel send a reset, which can swallow the error response on its way out.
        raw = self.rfile.read(length)
        if len(raw) < length:
            raise RequestError(
                HTTPStatus.BAD_REQUEST,
                f"the body ended after {len(raw):,} of the {length:,} bytes announced",
            )
        content_type = self.headers.get("Content-Type", "")
        # Requiring JSON also keeps other web sites from posting here: a cross-origin page can
        # only send application/json after a CORS preflight, which this server never grants.
        if content_type.split(";")[0].strip().lower() != "application/json":
            raise RequestError(
                HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
                "send the request as JSON with the header Content-Type: application/json",
                "UnsupportedMediaType",
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RequestError(
                HTTPStatus.BAD_REQUEST, f"the body is not valid UTF-8 (byte {exc.start})"
            ) from None
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise RequestError(
                HTTPStatus.BAD_REQUEST,
                f"the body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
            ) from None
        except RecursionError:
            raise RequestError(HTTPStatus.BAD_REQUEST, "the body is nested too deeply") from None

    def _refuse_oversized(self, length: int) -> None:
        """Answer 413 without reading the body into memory, then close the connection."""
        self._send_error_json(
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
            "BodyTooLarge",
            f"the request body has {length:,} bytes, over the limit of {MAX_BODY_BYTES:,} "
            f"(the history limit is {MAX_INTERACTIVE_CHARS:,} characters)",
        )
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.settimeout(_DRAIN_TIMEOUT_S)
            remaining = min(length, _DRAIN_BYTES)
            while remaining > 0:
                chunk = self.rfile.read1(min(remaining, 65536))
                if not chunk:
                    break
                remaining -= len(chunk)
        except OSError:  # the client gave up or stalled: nothing more to do for it
            pass

    # ---- responses ------------------------------------------------------------------------
    def _not_found(self, path: str) -> None:
        self._send_error_json(HTTPStatus.NOT_FOUND, "NotFound", f"nothing is served at {path}")

    def _method_not_allowed(self, allowed: str) -> None:
        self._send_error_json(
            HTTPStatus.METHOD_NOT_ALLOWED,
            "MethodNotAllowed",
            f"{self.command} is not allowed here; use {allowed}",
            {"Allow": allowed},
        )

    def _internal_error(self) -> None:
        # The traceback goes to the server log only: the page shows words, not internals.
        exc_type = sys.exc_info()[0]
        self.log_error(
            "internal error on %s %s\n%s", self.command, self.path, traceback.format_exc()
        )
        if self._answered:  # headers are out; a second status line would corrupt the reply
            return
        name = exc_type.__name__ if exc_type else "error"
        self._send_error_json(
            HTTPStatus.INTERNAL_SERVER_ERROR,
            "InternalError",
            f"the server hit an unexpected {name} while handling this request; "
            "the details are in the server log",
        )

    def _send_error_json(
        self, status: HTTPStatus, kind: str, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        payload = {"error": {"status": int(status), "type": kind, "message": message}}
        self._send_json(status, payload, headers)

    def _send_json(
        self, status: HTTPStatus, data: Any, headers: Mapping[str, str] | None = None
    ) -> None:
        body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8", headers)

    def _send(
        self,
        status: HTTPStatus,
        body: bytes,
        content_type: str,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self._answered = True
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header("Referrer-Policy", "no-referrer")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if not self._head:
            self.wfile.write(body)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        if self.server.verbose:
            super().log_request(code, size)

    def log_message(self, format: str, *args: Any) -> None:
        if not self.server.quiet:
            super().log_message(format, *args)


class _AlreadyAnswered(Exception):
    """Internal signal: a response (413) was already written; stop handling the request."""


class InspectorServer(ThreadingHTTPServer):
    """The threaded HTTP server with the static files and example loaded once."""

    daemon_threads = True  # a hung request must not keep the process alive on Ctrl-C

    def __init__(
        self, address: tuple[str, int], *, quiet: bool = False, verbose: bool = False
    ) -> None:
        self.quiet = quiet
        self.verbose = verbose and not quiet
        self.static = _load_static()
        self.example = load_example()
        super().__init__(address, InspectorHandler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}/"

    def options(self) -> dict[str, Any]:
        return {
            "strategies": list(STRATEGIES),
            "default_strategy": "tomc_raw",
            "counters": list(COUNTER_NAMES),
            "default_counter": "lexical",
            "history_formats": list(HISTORY_FORMATS),
            "max_chars": MAX_INTERACTIVE_CHARS,
            "max_body_bytes": MAX_BODY_BYTES,
        }


def make_server(
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    quiet: bool = False,
    verbose: bool = False,
) -> InspectorServer:
    """Bind the inspector (``port=0`` picks a free port; see ``server.url``); call
    ``serve_forever()`` on the result to run it."""
    return InspectorServer((host, port), quiet=quiet, verbose=verbose)


def serve(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, *, verbose: bool = False) -> None:
    """Run the inspector until interrupted (what ``tomc serve`` calls)."""
    server = make_server(host, port, verbose=verbose)
    print(f"TOMC inspector on {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
