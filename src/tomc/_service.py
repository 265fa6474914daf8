"""One request path for every surface: the CLI, the web API, the MCP tools and notebook recall.

A surface turns what it received into a :class:`CompileRequest` (validated when it is built),
calls :func:`compile_request` (or :func:`compile_notebook`), and reports any exception through
:func:`report_error`. So there is one schema with one set of defaults, one set of limits, one
chat detector and one table from error to CLI exit code, HTTP status and MCP tool error.

Limits: the history may hold :data:`~tomc._core.sources.MAX_INTERACTIVE_CHARS` characters of text (a
chat list, given as a list or as JSON text, counts its messages' text) and the task,
separately, :data:`~tomc._core.sources.MAX_TASK_CHARS`. The task does not count against the
history's limit, so a notebook (capped at the history limit when it is saved) can always be
recalled, whatever the task.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

from ._core.compiler import STRATEGIES, compile_memory
from ._core.errors import (
    AgentNotFoundError,
    BudgetError,
    CounterUnavailableError,
    GatewayError,
    InputTooLargeError,
    InvalidHistoryError,
    InvalidOptionError,
    NotebookNotFoundError,
    NotebookStoreError,
    TomcError,
)
from ._core.sources import (
    MAX_INTERACTIVE_CHARS,
    MAX_TASK_CHARS,
    History,
    check_interactive_size,
    detect_chat_messages,
    read_history,
)
from ._core.tokens import COUNTER_NAMES, get_counter

if TYPE_CHECKING:
    from ._core.result import CompileResult

__all__ = [
    "DEFAULT_COUNTER",
    "DEFAULT_STRATEGY",
    "ERROR_TABLE",
    "EXIT_INTERNAL",
    "HISTORY_FORMATS",
    "MAX_BUDGET_TOKENS",
    "REQUEST_FIELDS",
    "TOOL_STRATEGY",
    "CompileFunction",
    "CompileRequest",
    "Compiled",
    "ErrorReport",
    "NotebookTexts",
    "check_recallable",
    "check_unicode",
    "compile_notebook",
    "compile_request",
    "explain_empty",
    "read_request_history",
    "report_error",
]

#: How a *string* history is read: ``auto`` reads a JSON array of message objects as chat,
#: ``text`` always as lines, ``messages`` insists on chat. A list is always chat.
HISTORY_FORMATS = ("auto", "text", "messages")
DEFAULT_STRATEGY = "tomc_raw"
#: Tools that prepare context for a model default to ``auto``: a history that already fits is
#: returned unchanged rather than compressed for nothing.
TOOL_STRATEGY = "auto"
DEFAULT_COUNTER = "lexical"
#: No memory comes near this size; refusing larger budgets keeps float arithmetic on the budget
#: (``budget * RECORD_SHARE``) from overflowing on numbers such as 10**400.
MAX_BUDGET_TOKENS = 10**12
CompileFunction = Callable[..., "CompileResult"]


def _kind(value: object) -> str:
    """What a value is, in the words of JSON (requests arrive as JSON or command-line text)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bytes | bytearray):
        return "bytes"
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, Sequence):
        return "an array"
    return type(value).__name__


def _show_int(value: int) -> str:
    # str() of an int over 4,300 digits raises ValueError; describe huge numbers by size.
    if value.bit_length() < 100:
        return f"{value:,}"
    return f"a number of {math.floor(math.log10(abs(value))) + 1:,} digits"


@dataclass(frozen=True, slots=True)
class CompileRequest:
    """What every surface asks for; validated when built (:class:`InvalidOptionError` or
    :class:`InvalidHistoryError` naming the field).

    ``history`` is text or a list of chat messages; ``history_format`` says how a string is
    read (see :data:`HISTORY_FORMATS`). ``budget_tokens`` is ``None`` (the library's default
    budget) or 0 to :data:`MAX_BUDGET_TOKENS`; ``counter`` is one of the built-in counter names.
    """

    history: History
    task: str
    budget_tokens: int | None = None
    strategy: str = DEFAULT_STRATEGY
    counter: str = DEFAULT_COUNTER
    uncapped: bool = False
    history_format: str = "auto"

    def __post_init__(self) -> None:
        history = self.history
        if not isinstance(history, str) and (
            not isinstance(history, Sequence) or isinstance(history, bytes | bytearray)
        ):
            raise InvalidHistoryError(
                f"'history' must be a string or a list of chat messages, not {_kind(history)}"
            )
        if not isinstance(self.task, str):
            raise InvalidHistoryError(f"'task' must be a string, not {_kind(self.task)}")
        budget = self.budget_tokens
        # bool is an int in Python; `true` as a budget is a client bug, not 1 token.
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int)):
            raise InvalidOptionError(
                f"'budget_tokens' must be a whole number of tokens or null, not {_kind(budget)}"
            )
        if budget is not None and budget < 0:
            raise InvalidOptionError(f"budget_tokens must be >= 0, not {_show_int(budget)}")
        if budget is not None and budget > MAX_BUDGET_TOKENS:
            raise InvalidOptionError(
                f"budget_tokens must be at most {MAX_BUDGET_TOKENS:,}, not {_show_int(budget)}; "
                "leave it out for the default budget"
            )
        for name in ("strategy", "counter"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise InvalidOptionError(f"'{name}' must be a string, not {_kind(value)}")
        if self.strategy not in STRATEGIES:
            raise InvalidOptionError(
                f"unknown strategy {self.strategy!r}; use one of "
                + ", ".join(map(repr, STRATEGIES))
            )
        if self.counter not in COUNTER_NAMES:
            get_counter(self.counter)  # raises the counter's own message (unknown, ambiguous)
            raise InvalidOptionError(
                f"unknown counter {self.counter!r}; use one of "
                + ", ".join(map(repr, COUNTER_NAMES))
            )
        if not isinstance(self.uncapped, bool):
            raise InvalidOptionError(
                f"'uncapped' must be true or false, not {_kind(self.uncapped)}"
            )
        if self.history_format not in HISTORY_FORMATS:
            shown = (
                repr(self.history_format)
                if isinstance(self.history_format, str)
                else _kind(self.history_format)
            )
            raise InvalidOptionError(
                f"'history_format' must be one of {', '.join(HISTORY_FORMATS)}, not {shown}"
            )

    @classmethod
    def from_json(cls, body: object, **defaults: Any) -> CompileRequest:
        """Build a request from a decoded JSON object; unknown fields are refused.

        ``defaults`` replace the schema's defaults for fields the body leaves out.
        """
        if not isinstance(body, Mapping):
            raise InvalidHistoryError(f"the request body must be a JSON object, not {_kind(body)}")
        unknown = sorted(set(body) - set(REQUEST_FIELDS))
        if unknown:
            raise InvalidOptionError(
                f"unknown field(s): {', '.join(unknown)}; expected some of "
                + ", ".join(sorted(REQUEST_FIELDS))
            )
        if "history" not in body:
            raise InvalidHistoryError("the field 'history' is required")
        values = {"task": "", **defaults, **body}
        return cls(**values)


#: The fields of a request, as a JSON body names them.
REQUEST_FIELDS = tuple(field.name for field in fields(CompileRequest))


@dataclass(frozen=True, slots=True)
class Compiled:
    """A compile result and how the history was read (``text`` or ``messages``)."""

    request: CompileRequest
    result: CompileResult
    history_format: str


def read_request_history(history: History, history_format: str = "auto") -> tuple[History, str]:
    """The history to compile and how it is read: ``("text" | "messages")``.

    A string that is a JSON array of message objects is chat unless ``history_format`` is
    ``text``; ``messages`` refuses a string that is not such an array.
    """
    if not isinstance(history, str):
        return history, "messages"
    if history_format != "text":
        messages = detect_chat_messages(history)
        if messages is not None:
            return messages, "messages"
        if history_format == "messages":
            raise InvalidHistoryError(
                "history_format is 'messages' but the history is not a JSON list of chat "
                'messages such as [{"role": "user", "content": "..."}]'
            )
    return history, "text"


def compile_request(
    request: CompileRequest,
    *,
    compile_fn: CompileFunction = compile_memory,
    max_chars: int | None = MAX_INTERACTIVE_CHARS,
    unicode_only: bool = False,
) -> Compiled:
    """Read the history, check the limits, compile.

    ``max_chars`` is the history's limit; ``None`` (the CLI's ``--max-chars 0``) lifts it and
    the task's. It counts the history's text: a chat list, given as a list or as JSON text,
    by its messages' text, however much JSON surrounds it. ``unicode_only`` refuses unpaired
    surrogates (see :func:`check_unicode`) for a surface that cannot send them back.
    """
    history, history_format = read_request_history(request.history, request.history_format)
    task_limit = MAX_TASK_CHARS if max_chars else None
    check_interactive_size(history, request.task, max_chars, task_limit=task_limit)
    if unicode_only:
        check_unicode(history, request.task)
    result = compile_fn(
        history,
        request.task,
        budget_tokens=request.budget_tokens,
        strategy=request.strategy,
        counter=request.counter,
        uncapped=request.uncapped,
    )
    return Compiled(request, result, history_format)


class NotebookTexts(Protocol):
    """What :func:`compile_notebook` needs of a notebook store (the store itself calls
    :func:`check_recallable`, so this module does not import it)."""

    def text(self, name: str) -> str: ...


def compile_notebook(
    store: NotebookTexts,
    name: str,
    task: str,
    *,
    compile_fn: CompileFunction = compile_memory,
    **options: Any,
) -> Compiled:
    """Compile notebook ``name``'s stored original text for ``task`` (``options`` as in
    :class:`CompileRequest`). The store only accepts text that passes
    :func:`check_recallable`, so this fails only for a bad task or option."""
    request = CompileRequest(history=store.text(name), task=task, **options)
    return compile_request(request, compile_fn=compile_fn, unicode_only=True)


def check_recallable(text: str) -> None:
    """Raise :class:`InvalidHistoryError` unless ``text`` reads as a history the way
    :func:`compile_notebook` reads it (the store calls this before it saves)."""
    history, _ = read_request_history(text, "auto")
    read_history(history)
    check_unicode(history)


def check_unicode(history: History, task: str = "") -> None:
    """Refuse unpaired surrogates, which JSON escapes such as ``\\ud800`` can produce.

    They are not Unicode text: a surface that must send the memory back as UTF-8 (the MCP
    server, notebook recall) could compile them but not return the result.
    """
    texts = (("task", task), ("history", history))
    for what, value in texts:
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            code = ord(text[exc.start])
            raise InvalidHistoryError(
                f"the {what} contains an unpaired surrogate (U+{code:04X}), which is not valid "
                "Unicode; send proper UTF-8 text"
            ) from None


def explain_empty(result: CompileResult) -> str | None:
    """Why a memory is empty, in words; ``None`` when it is not."""
    if result.compiled_memory:
        return None
    if result.budget_tokens == 0:
        return "the compiled memory is empty: the budget is 0 tokens"
    if result.applied_strategy == "tomc" and not any(row.kind != "source" for row in result.ledger):
        return (
            "the compiled memory is empty: strategy 'tomc' keeps typed records only and this "
            "history has none; use tomc_raw or rag to keep source lines"
        )
    smallest = min((row.tokens for row in result.ledger), default=0)
    return (
        f"the compiled memory is empty: nothing fits the budget of {result.budget_tokens:,} "
        f"tokens (the smallest candidate needs {smallest:,}); raise the budget"
    )


# ---- errors ------------------------------------------------------------------------------

#: CLI exit code of an unexpected exception: a bug in TOMC, not a problem with the input.
EXIT_INTERNAL = 4

#: Every deliberate error, mapped once: ``(error type, HTTP status, CLI exit code)``. The
#: first matching row wins, so subclasses come before their bases. Exit code 1: the request
#: was refused (change it); 3: the environment is missing something (a store folder, an
#: optional extra, a gateway that answers, a configuration file it can write); 4: TOMC failed;
#: 127: ``tomc run`` found no agent to run (a shell's "command not found", so that it cannot be
#: taken for the agent's own exit code). Click's own usage errors exit with 2. The MCP server
#: returns every one of them as a tool error carrying the same message.
ERROR_TABLE: tuple[tuple[type[TomcError], int, int], ...] = (
    (InputTooLargeError, 413, 1),
    (NotebookNotFoundError, 404, 1),
    (NotebookStoreError, 503, 3),
    (CounterUnavailableError, 501, 3),
    (AgentNotFoundError, 503, 127),
    (GatewayError, 503, 3),
    (BudgetError, 500, EXIT_INTERNAL),
    (TomcError, 400, 1),  # invalid history or option, compiled memory refused as source
)


@dataclass(frozen=True, slots=True)
class ErrorReport:
    """How a surface reports an exception: the same message everywhere.

    ``type`` is the error's class name (``InternalError`` for an unexpected exception);
    ``expected`` is False for an unexpected exception, whose traceback belongs in a log.
    """

    type: str
    message: str
    http_status: int
    exit_code: int
    expected: bool


def report_error(exc: BaseException, doing: str, *, detail: bool = False) -> ErrorReport:
    """Map ``exc`` through :data:`ERROR_TABLE`.

    ``doing`` says what was being done ("compiling the history"); it names the step in the
    message of an unexpected exception. ``detail`` adds that exception's own text (the CLI and
    MCP server run on the user's machine; the web API does not show internals).
    """
    if isinstance(exc, TomcError):
        for error_type, status, exit_code in ERROR_TABLE:
            if isinstance(exc, error_type):
                return ErrorReport(type(exc).__name__, str(exc), status, exit_code, True)
    name = type(exc).__name__
    message = f"unexpected {name} while {doing}"
    text = str(exc).strip().splitlines()
    if detail and text:
        message += f": {text[0][:300]}"
    message += "; this is a bug in TOMC"
    return ErrorReport("InternalError", message, 500, EXIT_INTERNAL, False)
