"""The service layer every surface calls: request schema, limits, chat detection, error table."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tomc
from tomc._core.errors import (
    BudgetError,
    CompiledMemoryRefusedError,
    CounterUnavailableError,
    InputTooLargeError,
    InvalidHistoryError,
    InvalidOptionError,
    NotebookNotFoundError,
    NotebookStoreError,
    TomcError,
)
from tomc._notebooks import NotebookStore
from tomc._service import (
    ERROR_TABLE,
    MAX_BUDGET_TOKENS,
    CompileRequest,
    check_recallable,
    compile_notebook,
    compile_request,
    explain_empty,
    read_request_history,
    report_error,
)

CHAT = [{"role": "user", "content": "A = 3"}, {"role": "assistant", "content": "B copies A"}]


def test_defaults_are_the_libraries() -> None:
    request = CompileRequest(history="a = 1", task="a?")
    assert (request.budget_tokens, request.strategy) == (None, "tomc_raw")
    assert request.counter == "lexical"
    assert (request.uncapped, request.history_format) == (False, "auto")
    result = compile_request(request).result
    assert result.compiled_memory == tomc.compile_memory("a = 1", "a?").compiled_memory


@pytest.mark.parametrize(
    ("fields", "error", "fragment"),
    [
        ({"history": 5}, InvalidHistoryError, "'history' must be a string or a list"),
        ({"history": b"a = 1"}, InvalidHistoryError, "not bytes"),
        ({"task": None}, InvalidHistoryError, "'task' must be a string, not null"),
        ({"budget_tokens": True}, InvalidOptionError, "not a boolean"),
        ({"budget_tokens": 2.0}, InvalidOptionError, "whole number of tokens or null"),
        ({"budget_tokens": -1}, InvalidOptionError, "budget_tokens must be >= 0, not -1"),
        ({"budget_tokens": MAX_BUDGET_TOKENS + 1}, InvalidOptionError, "at most 1,000,000,000,000"),
        ({"budget_tokens": 10**400}, InvalidOptionError, "not a number of 401 digits"),
        ({"budget_tokens": -(10**5000)}, InvalidOptionError, "not a number of 5,001 digits"),
        ({"strategy": "best"}, InvalidOptionError, "unknown strategy 'best'"),
        ({"strategy": None}, InvalidOptionError, "'strategy' must be a string"),
        ({"counter": "bpe"}, InvalidOptionError, "ambiguous"),
        ({"counter": "bpe:r50k"}, InvalidOptionError, "unknown BPE encoding"),
        ({"counter": "words"}, InvalidOptionError, "unknown counter 'words'"),
        ({"uncapped": 1}, InvalidOptionError, "'uncapped' must be true or false, not a number"),
        ({"history_format": "xml"}, InvalidOptionError, "not 'xml'"),
    ],
)
def test_requests_are_validated_when_built(
    fields: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    with pytest.raises(error) as raised:
        CompileRequest(**{"history": "a = 1", "task": "a?", **fields})
    assert fragment in str(raised.value)


def test_the_largest_budget_compiles() -> None:
    request = CompileRequest(history="a = 1\nb = 2", task="a?", budget_tokens=MAX_BUDGET_TOKENS)
    result = compile_request(request).result
    assert result.budget_tokens == MAX_BUDGET_TOKENS
    # Records beside a history that fits would cost more than it: it comes back as it is.
    assert result.applied_strategy == "unchanged" and result.compiled_memory == "a = 1\nb = 2"


def test_from_json_refuses_unknown_fields_and_fills_defaults() -> None:
    with pytest.raises(InvalidOptionError, match=r"unknown field\(s\): budget"):
        CompileRequest.from_json({"history": "a", "task": "b", "budget": 3})
    with pytest.raises(InvalidHistoryError, match="must be a JSON object, not an array"):
        CompileRequest.from_json([1])
    with pytest.raises(InvalidHistoryError, match="'history' is required"):
        CompileRequest.from_json({"task": "b"})
    request = CompileRequest.from_json({"history": "a"}, strategy="auto")
    assert (request.task, request.strategy) == ("", "auto")


@pytest.mark.parametrize(
    ("history", "history_format", "expected_format"),
    [
        (json.dumps(CHAT), "auto", "messages"),
        (json.dumps(CHAT), "text", "text"),
        (json.dumps(CHAT), "messages", "messages"),
        (CHAT, "text", "messages"),  # a list is always chat
        ("[10:02] deploy done", "auto", "text"),
        ("[1, 2]", "auto", "text"),
        ('{"a": 1}', "auto", "text"),
    ],
)
def test_one_chat_detector(history: Any, history_format: str, expected_format: str) -> None:
    read, fmt = read_request_history(history, history_format)
    assert fmt == expected_format
    assert (read == CHAT) == (expected_format == "messages")


def test_messages_format_insists_on_chat() -> None:
    with pytest.raises(InvalidHistoryError, match="not a JSON list of chat messages"):
        read_request_history("a = 1", "messages")


def test_the_limit_counts_the_history_text_and_the_task_separately() -> None:
    limit, task_limit = tomc.MAX_INTERACTIVE_CHARS, tomc.MAX_TASK_CHARS
    full = "x" * limit
    compile_request(CompileRequest(history=full, task="t" * task_limit, budget_tokens=1))
    with pytest.raises(InputTooLargeError, match="history has 200,001") as raised:
        compile_request(CompileRequest(history=full + "y", task="t"))
    assert raised.value.what == "history"
    with pytest.raises(InputTooLargeError, match="task has 10,001") as raised:
        compile_request(CompileRequest(history="a", task="t" * (task_limit + 1)))
    assert raised.value.what == "task"
    # A chat list pasted as JSON counts its message text, not the JSON around it.
    pasted = json.dumps([{"role": "user", "content": full, "name": "n" * 1_000}])
    compiled = compile_request(CompileRequest(history=pasted, task="t", budget_tokens=1))
    assert compiled.history_format == "messages"
    # None lifts both limits (the CLI's --max-chars 0).
    compile_request(
        CompileRequest(history=full * 2, task="t" * 20_000, budget_tokens=1), max_chars=None
    )


def test_unicode_only_refuses_unpaired_surrogates() -> None:
    request = CompileRequest(history='[{"role": "user", "content": "a \\ud800"}]', task="a?")
    assert "\ud800" in compile_request(request).result.compiled_memory
    with pytest.raises(InvalidHistoryError, match=r"unpaired surrogate \(U\+D800\)"):
        compile_request(request, unicode_only=True)


def test_compile_function_is_injected() -> None:
    calls: list[tuple[Any, str, dict[str, Any]]] = []

    def recording(history: Any, task: str, **options: Any) -> Any:
        calls.append((history, task, options))
        return tomc.compile_memory(history, task, **options)

    request = CompileRequest(history=json.dumps(CHAT), task="B?", strategy="tomc", uncapped=True)
    compile_request(request, compile_fn=recording)
    assert calls == [
        (
            CHAT,
            "B?",
            {"budget_tokens": None, "strategy": "tomc", "counter": "lexical", "uncapped": True},
        )
    ]


def test_notebook_recall_reads_the_store_the_same_way(tmp_path: Any) -> None:
    store = NotebookStore(tmp_path)
    store.append("chat", json.dumps(CHAT))
    compiled = compile_notebook(store, "chat", "What is B?", strategy="tomc")
    assert compiled.history_format == "messages"
    assert compiled.result.compiled_memory.startswith("STATE B = 3 (u0,u1)")
    with pytest.raises(NotebookNotFoundError):
        compile_notebook(store, "missing", "t")


@pytest.mark.parametrize(
    "text", ['[{"a": 1}]', "\n \n", "a\x00b", '[{"role": "user", "content": "\\udc00"}]']
)
def test_check_recallable_refuses_what_recall_could_not_read(text: str) -> None:
    with pytest.raises(InvalidHistoryError):
        check_recallable(text)


@pytest.mark.parametrize(
    ("error", "status", "exit_code"),
    [
        (InputTooLargeError(3, 2), 413, 1),
        (InvalidHistoryError("x"), 400, 1),
        (InvalidOptionError("x"), 400, 1),
        (CompiledMemoryRefusedError("x"), 400, 1),
        (NotebookNotFoundError("x"), 404, 1),
        (NotebookStoreError("x"), 503, 3),
        (CounterUnavailableError("x"), 501, 3),
        (BudgetError("x"), 500, 4),
        (TomcError("x"), 400, 1),
    ],
)
def test_one_error_table(error: TomcError, status: int, exit_code: int) -> None:
    report = report_error(error, "doing it")
    assert (report.http_status, report.exit_code) == (status, exit_code)
    assert (report.type, report.message) == (type(error).__name__, str(error))
    assert report.expected


def test_error_table_lists_subclasses_before_their_bases() -> None:
    types = [row[0] for row in ERROR_TABLE]
    for index, error_type in enumerate(types):
        assert not any(issubclass(later, error_type) for later in types[index + 1 :])


def test_unexpected_errors_name_the_type_and_the_step() -> None:
    error = OverflowError("int too large to convert to float\nsecond line")
    hidden = report_error(error, "compiling the history")
    assert hidden.message == (
        "unexpected OverflowError while compiling the history; this is a bug in TOMC"
    )
    assert (hidden.type, hidden.http_status, hidden.exit_code) == ("InternalError", 500, 4)
    assert not hidden.expected
    shown = report_error(error, "compiling the history", detail=True)
    assert "compiling the history: int too large to convert to float;" in shown.message
    assert "second line" not in shown.message


def test_explain_empty() -> None:
    assert explain_empty(tomc.compile_memory("a = 1", "a?")) is None
    zero = tomc.compile_memory("a = 1", "a?", budget_tokens=0)
    assert explain_empty(zero) == "the compiled memory is empty: the budget is 0 tokens"
    long_line = tomc.compile_memory("one two three four five", "one?", budget_tokens=2)
    assert "the smallest candidate needs 5" in (explain_empty(long_line) or "")
    records_only = tomc.compile_memory("just chatter", "what?", budget_tokens=9, strategy="tomc")
    assert "keeps typed records only" in (explain_empty(records_only) or "")
