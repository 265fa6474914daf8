"""The public surface: a change to it should be a deliberate, reviewed change to this list."""

import tomc

EXPECTED = {
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
    "__version__",
    "check_interactive_size",
    "compile_memory",
    "default_budget",
    "get_counter",
}


def test_public_api_is_pinned() -> None:
    assert set(tomc.__all__) == EXPECTED
    assert len(tomc.__all__) == len(set(tomc.__all__))
    for name in tomc.__all__:
        assert hasattr(tomc, name), name


def test_errors_share_one_base() -> None:
    for name in (
        "BudgetError",
        "CounterUnavailableError",
        "InputTooLargeError",
        "InvalidHistoryError",
        "InvalidOptionError",
    ):
        assert issubclass(getattr(tomc, name), tomc.TomcError)
