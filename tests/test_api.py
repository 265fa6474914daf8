"""The public surface: a change to it should be a deliberate, reviewed change to these lists.

Every public package's ``__all__`` is written out here; every name in it imports; and every
public name the package's namespace defines is in it (as httpx's own test does), so a name
cannot become public by accident.
"""

import __future__

import importlib
import json
import subprocess
import sys
import typing
from types import ModuleType

import pytest

import tomc

PUBLIC = {
    "tomc": [
        "AutomaticChatSession",
        "BpeCounter",
        "BudgetError",
        "CAPS",
        "CompileResult",
        "CompiledMemoryRefusedError",
        "CounterUnavailableError",
        "InputTooLargeError",
        "InvalidHistoryError",
        "InvalidOptionError",
        "LedgerRow",
        "LexicalCounter",
        "MAX_INTERACTIVE_CHARS",
        "MAX_TASK_CHARS",
        "NotebookNotFoundError",
        "NotebookStore",
        "NotebookStoreError",
        "RECORD_SHARE",
        "STRATEGIES",
        "SessionStateError",
        "SourceUnit",
        "TokenCounter",
        "TomcError",
        "UNKNOWN",
        "UnsupportedClientError",
        "__version__",
        "check_interactive_size",
        "compile_memory",
        "default_budget",
        "get_counter",
    ],
    "tomc.chat": [
        "AutomaticChatSession",
        "CODES",
        "ConversationState",
        "Decision",
        "ModelProfile",
        "NativeEvent",
        "PreparedRequest",
        "SessionOptions",
        "SessionStateError",
        "check_tool_pairing",
    ],
    "tomc.chat.dialects": [
        "ANTHROPIC_BILLING",
        "ASSISTANT",
        "BaseDialect",
        "COMPACTION",
        "CacheBilling",
        "CachePricing",
        "CacheTerms",
        "DEFAULT_DIALECT",
        "DIALECTS",
        "Dialect",
        "Entry",
        "INSTRUCTION",
        "OPENAI_BILLING",
        "PassThrough",
        "REASONING",
        "TOOL",
        "ToolCall",
        "ToolOutput",
        "USER",
        "Upstream",
        "WireUsage",
        "billing_rules",
        "canonical_digest",
        "dialect_for",
        "guess_dialects",
        "pairing_problems",
        "register_dialect",
        "token_count",
        "unregister_dialect",
        "whole_prompt_usage",
    ],
    "tomc.web": ["AppServer", "create_app", "inspector_routes", "make_server", "serve"],
}


def _not_api(name: str, value: object) -> bool:
    """Subpackages, ``from __future__`` features and typing helpers are not API names."""
    return isinstance(value, ModuleType | __future__._Feature) or value is getattr(
        typing, name, object()
    )


@pytest.mark.parametrize("package", sorted(PUBLIC))
def test_public_api_is_pinned(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == PUBLIC[package]
    assert len(module.__all__) == len(set(module.__all__))
    for name in module.__all__:
        assert hasattr(module, name), name
    defined = {
        name
        for name, value in vars(module).items()
        if not name.startswith("_") and not _not_api(name, value)
    }
    extra = sorted(defined - set(module.__all__))
    assert not extra, f"public in {package} but not in its __all__: {extra}"


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
