"""The public surface: a change to it should be a deliberate, reviewed change to this list."""

import json
import subprocess
import sys

import tomc

EXPECTED = {
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
    "SourceUnit",
    "TokenCounter",
    "TomcError",
    "UnsupportedClientError",
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
        "NotebookNotFoundError",
        "NotebookStoreError",
        "CompiledMemoryRefusedError",
        "UnsupportedClientError",
    ):
        assert issubclass(getattr(tomc, name), tomc.TomcError)


def _modules_after(code: str) -> dict[str, bool]:
    probe = (
        f"import sys; {code}; import json; "
        "print(json.dumps({m: m in sys.modules for m in "
        "('sqlite3', 'tomc.chat', 'tomc._notebooks', 'starlette', 'uvicorn', 'mcp')}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out)


def test_import_tomc_stays_light() -> None:
    """A caller who only compiles loads no database, chat package or web server."""
    loaded = _modules_after("import tomc; tomc.compile_memory('a = 1', 'a?')")
    assert not any(loaded.values()), loaded


def test_lazy_attributes_load_on_first_use() -> None:
    loaded = _modules_after("import tomc; tomc.NotebookStore; tomc.AutomaticChatSession")
    assert loaded["sqlite3"] and loaded["tomc._notebooks"] and loaded["tomc.chat"]
    assert not loaded["starlette"] and not loaded["uvicorn"]
    assert tomc.NotebookStore.__module__ == "tomc._notebooks"
    assert "NotebookStore" in dir(tomc)
