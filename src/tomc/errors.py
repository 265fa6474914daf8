"""One exception hierarchy for everything TOMC raises on purpose.

Callers catch :class:`TomcError`; the subclasses say which kind of problem it was so
adapters can map them (a tool error in MCP, a 400 in the web API, exit code 1 in the CLI).
"""

from __future__ import annotations

__all__ = [
    "BudgetError",
    "CounterError",
    "CounterUnavailableError",
    "InputTooLargeError",
    "InvalidHistoryError",
    "InvalidOptionError",
    "TomcError",
]


class TomcError(Exception):
    """Base class of every error TOMC raises deliberately."""


class InvalidHistoryError(TomcError, ValueError):
    """The history or task cannot be read: empty, wrong type, non-text message parts."""


class InvalidOptionError(TomcError, ValueError):
    """An option is out of range or unknown: strategy, counter name, budget."""


class InputTooLargeError(InvalidHistoryError):
    """Input exceeds the interactive character limit of a surface (CLI, MCP, web)."""

    def __init__(self, size: int, limit: int, hint: str = "") -> None:
        self.size = size
        self.limit = limit
        message = f"input has {size:,} characters, over the interactive limit of {limit:,}"
        super().__init__(f"{message}; {hint}" if hint else message)


class CounterError(TomcError, RuntimeError):
    """A token counter cannot count this text (its library refused it)."""


class CounterUnavailableError(CounterError):
    """A token counter needs an optional dependency that is not installed."""


class BudgetError(TomcError, RuntimeError):
    """The packed memory re-counted differently from its rows: refused rather than overrun."""
