"""TOMC: a CPU context compiler for long LLM histories.

>>> import tomc
>>> result = tomc.compile_memory("A = 3\\nB copies A\\nA = 8", "What is B?", strategy="tomc")
>>> print(result.compiled_memory, end="")
STATE B = 3 (u0,u1)
STATE A = 8 (u2)
"""

from .budget import default_budget
from .chat import AutomaticChatSession
from .compiler import CAPS, RECORD_SHARE, STRATEGIES, compile_memory
from .counters import BpeCounter, LexicalCounter, TokenCounter, get_counter
from .errors import (
    BudgetError,
    CounterUnavailableError,
    InputTooLargeError,
    InvalidHistoryError,
    InvalidOptionError,
    TomcError,
    UnsupportedClientError,
)
from .notebooks import NotebookStore
from .result import UNKNOWN, CompileResult, LedgerRow, SourceUnit
from .sources import MAX_INTERACTIVE_CHARS, check_interactive_size

__version__ = "0.1.0"

__all__ = [
    "CAPS",
    "MAX_INTERACTIVE_CHARS",
    "RECORD_SHARE",
    "STRATEGIES",
    "UNKNOWN",
    "AutomaticChatSession",
    "BpeCounter",
    "BudgetError",
    "CompileResult",
    "CounterUnavailableError",
    "InputTooLargeError",
    "InvalidHistoryError",
    "InvalidOptionError",
    "LedgerRow",
    "LexicalCounter",
    "NotebookStore",
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
