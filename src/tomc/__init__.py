"""TOMC: a CPU context compiler for long LLM histories.

>>> import tomc
>>> result = tomc.compile_memory("A = 3\\nB copies A\\nA = 8", "What is B?", strategy="tomc")
>>> print(result.compiled_memory, end="")
STATE B = 3 (u0,u1)
STATE A = 8 (u2)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._core.budget import default_budget
from ._core.compiler import CAPS, RECORD_SHARE, STRATEGIES, compile_memory
from ._core.errors import (
    BudgetError,
    CompiledMemoryRefusedError,
    CounterUnavailableError,
    InputTooLargeError,
    InvalidHistoryError,
    InvalidOptionError,
    NotebookNotFoundError,
    NotebookStoreError,
    SessionStateError,
    TomcError,
    UnsupportedClientError,
)
from ._core.result import UNKNOWN, CompileResult, LedgerRow, SourceUnit
from ._core.sources import MAX_INTERACTIVE_CHARS, MAX_TASK_CHARS, check_interactive_size
from ._core.tokens import BpeCounter, LexicalCounter, TokenCounter, get_counter

if TYPE_CHECKING:
    from ._notebooks import NotebookStore
    from .chat import AutomaticChatSession

__version__ = "0.1.0"

__all__ = [
    "CAPS",
    "MAX_INTERACTIVE_CHARS",
    "MAX_TASK_CHARS",
    "RECORD_SHARE",
    "STRATEGIES",
    "UNKNOWN",
    "AutomaticChatSession",
    "BpeCounter",
    "BudgetError",
    "CompileResult",
    "CompiledMemoryRefusedError",
    "CounterUnavailableError",
    "InputTooLargeError",
    "InvalidHistoryError",
    "InvalidOptionError",
    "LedgerRow",
    "LexicalCounter",
    "NotebookNotFoundError",
    "NotebookStore",
    "NotebookStoreError",
    "SessionStateError",
    "SourceUnit",
    "TokenCounter",
    "TomcError",
    "UnsupportedClientError",
    "__version__",
    "check_interactive_size",
    "compile_memory",
    "default_budget",
    "get_counter",
]

# Loaded on first use: `import tomc` stays light (no sqlite3, no chat package) for a caller who
# only compiles.
_LAZY = {"AutomaticChatSession": ".chat", "NotebookStore": "._notebooks"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'tomc' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
