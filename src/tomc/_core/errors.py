"""One exception hierarchy for everything TOMC raises on purpose.

Callers catch :class:`TomcError`; the subclasses say which kind of problem it was. Every
surface maps them through one table, :data:`tomc._service.ERROR_TABLE` (CLI exit code, HTTP
status, MCP tool error), so the same problem reads the same everywhere.
"""

from __future__ import annotations

__all__ = [
    "AgentNotFoundError",
    "BudgetError",
    "CompiledMemoryRefusedError",
    "CounterError",
    "CounterUnavailableError",
    "GatewayError",
    "InputTooLargeError",
    "InvalidHistoryError",
    "InvalidOptionError",
    "NotebookNotFoundError",
    "NotebookStoreError",
    "SessionStateError",
    "TomcError",
    "UnsupportedClientError",
]


class TomcError(Exception):
    """Base class of every error TOMC raises deliberately."""


class InvalidHistoryError(TomcError, ValueError):
    """The history or task cannot be read: empty, wrong type, non-text message parts."""


class InvalidOptionError(TomcError, ValueError):
    """An option is out of range or unknown: strategy, counter name, budget."""


class InputTooLargeError(InvalidHistoryError):
    """Input exceeds an interactive character limit of a surface (CLI, MCP, web, notebooks).

    ``what`` names the part that is too long (``input``, ``history``, ``task``).
    """

    def __init__(self, size: int, limit: int, hint: str = "", *, what: str = "input") -> None:
        self.size = size
        self.limit = limit
        self.what = what
        message = f"{what} has {size:,} characters, over the interactive limit of {limit:,}"
        super().__init__(f"{message}; {hint}" if hint else message)


class CounterError(TomcError, RuntimeError):
    """A token counter cannot count this text (its library refused it)."""


class CounterUnavailableError(CounterError):
    """A token counter needs an optional dependency that is not installed."""


class BudgetError(TomcError, RuntimeError):
    """The packed memory re-counted differently from its rows: refused rather than overrun."""


class NotebookNotFoundError(TomcError, LookupError):
    """The named notebook does not exist."""


class CompiledMemoryRefusedError(TomcError, ValueError):
    """The text to save is a compiled memory, not original source text."""


class NotebookStoreError(TomcError, RuntimeError):
    """The notebook store cannot be used: its folder or database file is unusable."""


class SessionStateError(TomcError, ValueError):
    """A saved conversation state cannot be loaded: not JSON, another version, a missing or
    malformed field."""


class UnsupportedClientError(TomcError, TypeError):
    """A model client the session cannot drive (async where sync is expected, no such method)."""


class GatewayError(TomcError, RuntimeError):
    """The local gateway or an agent's configuration cannot be used: no gateway answers, it
    cannot start, or an agent's configuration file cannot be read, understood or written."""


class AgentNotFoundError(GatewayError):
    """``tomc run`` cannot find the agent's executable (``claude``, ``codex``)."""
