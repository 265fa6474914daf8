"""The TOMC MCP server: explicit context preparation for external history, plus notebooks.

This is the only module that imports the ``mcp`` SDK (the optional ``mcp`` extra). Build a
server with :func:`create_server` (tests connect to it in-process); ``tomc mcp`` runs it over
stdio with :func:`run_stdio`.

The server is a tool provider, not a request interceptor: the host keeps its own chat and its
own context management, and asks TOMC to compile history it holds outside that chat. Every
tool goes through :mod:`tomc._service` (one request schema, limits and chat detection) and
reports every exception through its error table as a tool error (``is_error``) whose message
names the problem; an unexpected exception names its type and the step, and its traceback goes
to the server log. Nothing a client sends can crash the server.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError, WithJsonSchema

from .._core.budget import default_budget
from .._core.compiler import compile_memory
from .._core.errors import CompiledMemoryRefusedError
from .._core.inspector import render_inspection
from .._core.result import CompileResult, LedgerRow
from .._core.sources import MAX_INTERACTIVE_CHARS, MAX_TASK_CHARS
from .._notebooks import NotebookInfo, NotebookStore
from .._service import (
    MAX_BUDGET_TOKENS,
    TOOL_STRATEGY,
    CompileFunction,
    CompileRequest,
    compile_notebook,
    compile_request,
    explain_empty,
    report_error,
)

__all__ = [
    "HOST_RESULT_LIMITS",
    "INSTRUCTIONS",
    "MCP_BUDGET_CAP",
    "SERVER_NAME",
    "create_server",
    "run_stdio",
]

SERVER_NAME = "tomc"

#: What the MCP hosts pass to the model whole, per tool result (measured and read in the
#: pinned CLIs, package.json; tests/test_mcp_hosts.py runs both):
#:
#: - Claude Code 2.1.197: ``MAX_MCP_OUTPUT_TOKENS``, default 25,000 tokens (the bundled CLI's
#:   limit function reads the variable, then a remote setting, then ``25000``). It sends the
#:   result's structured content to the model as JSON text; a result whose length / 4 is over
#:   half the limit is counted with the provider's count_tokens, and one over the limit is
#:   saved to a file and the model gets only the path ("exceeds maximum allowed tokens").
#: - Codex 0.171: MCP tools run inside its code-mode ``exec`` tool, whose output is cut in the
#:   middle at ``max_output_tokens``, default 10,000 tokens (the ``exec`` tool description:
#:   "Defaults to 10000 tokens"), counted as UTF-8 bytes / 4: 40,000 bytes. A model that
#:   prints the whole result object prints the memory twice (the text content and the
#:   structured content).
#:
#: So a tool's default memory budget is capped at :data:`MCP_BUDGET_CAP` tokens: a result
#: printed whole twice, JSON escapes included, stays under Codex's 40,000 bytes.
HOST_RESULT_LIMITS = {"claude_code_tokens": 25_000, "codex_exec_tokens": 10_000}
MCP_BUDGET_CAP = 4_000

INSTRUCTIONS = f"""\
TOMC compiles a long external or archived history (logs, transcripts, documents, exported \
chats, earlier sessions) into a compact memory for one task: exact typed records (A = 3, \
B copies A, relations, counts) plus the most relevant original lines, packed into a token \
budget, every line linked to its source ids (u0, u1, ...). It runs on the CPU and makes no \
model calls.

Policy:
- The host keeps its own chat. Do not route the live conversation through these tools; they \
prepare history you were given or that was saved earlier. TOMC does not intercept requests.
- prepare_context: call it when the user supplies a long history from outside this chat and \
you need only what bears on one task. inspect_sources: call it to check what was kept, what \
was left out and why, before relying on an answer built from a memory.
- Notebooks keep original source text across sessions and processes. notebook_save stores \
text exactly as given; notebook_recall compiles the stored original for the current task, \
every time.
- Never save compiled memory (the output of prepare_context or notebook_recall) to a notebook \
as if it were the source: a memory built for one task can omit evidence a later task needs. \
Keep and save the original history instead; the server refuses memories it recognises.
- A history is limited to {MAX_INTERACTIVE_CHARS:,} characters of text per call and a task to \
{MAX_TASK_CHARS:,}; a notebook holds at most {MAX_INTERACTIVE_CHARS:,} characters, so it can \
always be recalled.
"""

_STRATEGY_HELP = (
    "'auto' (default) returns a history that already fits the budget unchanged and otherwise "
    "picks 'tomc_raw' or 'rag'; 'tomc' is typed records only; 'tomc_raw' is records plus "
    "BM25-selected source lines; 'rag' is source lines only."
)
_KEEP_ORIGINAL = (
    "This memory is for this task only. Keep the original history; compile again for a new "
    "task, and never save this memory as if it were the source."
)
# Kept and omitted rows can each number in the thousands for a long history (hundreds of KB of
# JSON); the inspector lists the most useful ones and the totals so the response stays readable.
DEFAULT_MAX_ROWS = 40
# The rendered report lists every source unit (two lines each); past this size it is cut and
# the structured fields carry the detail.
MAX_REPORT_CHARS = 20_000

Strategy = Literal["auto", "tomc", "tomc_raw", "rag"]
Counter = Literal["lexical", "bpe:o200k_base", "bpe:cl100k_base"]


class ChatMessage(BaseModel):
    """A chat message: a role and text content (a string or a list of text parts)."""

    model_config = ConfigDict(extra="allow")

    role: Annotated[str, Field(description="user, assistant, system, tool, ...")]
    content: Annotated[
        str | list[dict[str, Any]] | None,
        Field(description="the message text, or a list of {'type': 'text', 'text': ...} parts"),
    ] = None


def _history_text(value: Any) -> Any:
    """A history given as a list becomes its JSON text, read back as chat by the service.

    The parameter is declared as ``str`` so that the SDK passes a string through untouched
    (it would otherwise parse any JSON-looking string itself, and refuse a JSON document that
    is not a chat list); the service's one chat detector then reads both forms alike.
    """
    if isinstance(value, list):
        if not all(isinstance(item, dict) for item in value):
            raise ValueError("a history given as a list must hold chat message objects")
        return json.dumps(value, ensure_ascii=False)
    return value


_HISTORY_DESCRIPTION = (
    "The history to compile: plain text (one source line per nonempty line) or a list of chat "
    "messages with role and content (also as JSON text)."
)
HistoryArg = Annotated[
    str,
    BeforeValidator(_history_text),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": ChatMessage.model_json_schema()},
            ],
            "description": _HISTORY_DESCRIPTION,
            "title": "History",
        }
    ),
    Field(description=_HISTORY_DESCRIPTION),
]
TaskArg = Annotated[
    str,
    Field(description="What the memory is for: the question or next step, in your own words."),
]
BudgetArg = Annotated[
    int | None,
    Field(
        ge=0,
        le=MAX_BUDGET_TOKENS,
        description="Memory size in tokens of the chosen counter. Default: 80% of the history "
        "up to about 10,000 tokens, sliding to 60% at a million, at least 1,024, and at most "
        f"{MCP_BUDGET_CAP:,} so that the result reaches the model whole (budget_note says when "
        "it was capped). A larger explicit budget is honoured, but hosts may cut the result.",
    ),
]
StrategyArg = Annotated[Strategy, Field(description=_STRATEGY_HELP)]
CounterArg = Annotated[
    Counter,
    Field(
        description="How tokens are counted: 'lexical' (a fast estimate) or an exact OpenAI BPE "
        "encoding. Neither is what a provider bills."
    ),
]
NameArg = Annotated[
    str,
    Field(
        description="Notebook name: 1-64 letters, digits, '.', '_' or '-', starting with a "
        "letter or digit."
    ),
]


class KindSummary(BaseModel):
    """Ledger figures for one kind of row (state, relation, count or source)."""

    candidates: int = Field(description="rows considered")
    included: int = Field(description="rows packed into the memory")
    included_tokens: int = Field(description="tokens those rows take in the memory")


class PreparedContext(BaseModel):
    """A compiled memory for one task, with its route, token figures and a ledger summary."""

    budget_note: str = Field(
        default="",
        description="set when the default budget was capped so the result reaches the model "
        "whole, or when an explicit budget makes a result some hosts cut or refuse",
    )
    compiled_memory: str = Field(description="the text to give the model for this task")
    route: str = Field(description="state, relation, count or raw: what the task asks for")
    route_reason: str
    strategy: str = Field(description="the strategy asked for")
    applied_strategy: str = Field(description="what ran: tomc, tomc_raw, rag or unchanged")
    counter: str
    budget_tokens: int
    memory_tokens: int
    input_tokens: int
    tokens_by_kind: dict[str, int]
    caps_exceeded: dict[str, bool]
    source_units: int = Field(description="nonempty source lines in the history (u0, u1, ...)")
    ledger_summary: dict[str, KindSummary]
    note: str = _KEEP_ORIGINAL


class NotebookSummary(BaseModel):
    """One notebook: how many entries it holds, their total size and write times (UTC)."""

    name: str
    entries: int
    chars: int
    size_bytes: int
    created_at: str
    updated_at: str


class RecalledContext(PreparedContext):
    """A memory compiled from a notebook's stored original text for this task."""

    notebook: NotebookSummary


class Row(BaseModel):
    """One ledger row: a candidate record or source line and what packing decided."""

    kind: str
    key: str
    value: str
    text: str
    source_ids: list[str]
    tokens: int
    reason: str


class Source(BaseModel):
    """An original source line as submitted, with its role and position."""

    id: str
    text: str
    role: str | None
    message_index: int
    line_index: int


class InspectedSources(BaseModel):
    """The inspector's view: what was kept and why, and what was left out."""

    route: str
    route_reason: str
    applied_strategy: str
    counter: str
    budget_tokens: int
    memory_tokens: int
    input_tokens: int
    inspection: str = Field(
        description=f"the human-readable inspector report (cut at {MAX_REPORT_CHARS:,} chars)"
    )
    kept: list[Row] = Field(
        description="rows packed into the memory: typed records first, then source lines"
    )
    kept_total: int = Field(description="how many rows were packed in all")
    omitted: list[Row] = Field(
        description="rows left out, each with its reason: records first, then the source "
        "lines that came closest (highest BM25 score)"
    )
    omitted_total: int = Field(description="how many rows were left out in all")
    cited_sources: list[Source] = Field(
        description="the original lines that the kept typed records cite, in source order"
    )
    cited_total: int


class SavedEntry(BaseModel):
    """What notebook_save stored."""

    name: str
    mode: str
    seq: int = Field(description="position of this entry in the notebook, from 1")
    chars: int
    size_bytes: int
    sha256: str = Field(description="SHA-256 of the stored UTF-8 bytes")
    created_at: str
    notebook: NotebookSummary


class NotebookList(BaseModel):
    """Every notebook in the store, sorted by name."""

    store: str = Field(description="path of the SQLite file")
    notebooks: list[NotebookSummary]


class DeletedNotebook(BaseModel):
    """What notebook_delete removed."""

    name: str
    entries_removed: int


def _summary(info: NotebookInfo) -> NotebookSummary:
    return NotebookSummary(**info.to_dict())


def _ledger_summary(ledger: tuple[LedgerRow, ...]) -> dict[str, KindSummary]:
    summary: dict[str, KindSummary] = {}
    for row in ledger:
        item = summary.setdefault(
            row.kind, KindSummary(candidates=0, included=0, included_tokens=0)
        )
        item.candidates += 1
        if row.included:
            item.included += 1
            item.included_tokens += row.tokens
    return summary


def _budget_note(result: CompileResult, asked: int | None) -> str:
    """Say when the default budget was capped, or when an explicit budget is over the cap."""
    if asked is None:
        default = default_budget(result.input_tokens)
        if default <= MCP_BUDGET_CAP or result.applied_strategy == "unchanged":
            return ""
        return (
            f"Budget capped at {MCP_BUDGET_CAP:,} tokens (the default for this history would be "
            f"{default:,}) so that the whole result reaches the model: MCP hosts cut or refuse "
            "larger tool results. If evidence you need is missing, call again with an explicit "
            "budget_tokens (a larger memory may be cut or saved to a file by the host), "
            "narrow the task, or call inspect_sources to see what was left out."
        )
    if asked > MCP_BUDGET_CAP and result.memory_tokens > MCP_BUDGET_CAP:
        return (
            f"budget_tokens={asked:,} is above {MCP_BUDGET_CAP:,}, the largest memory every MCP "
            f"host passes whole: this memory has {result.memory_tokens:,} tokens. Claude Code "
            f"saves a result over {HOST_RESULT_LIMITS['claude_code_tokens']:,} tokens "
            "(MAX_MCP_OUTPUT_TOKENS) to a file instead, and Codex cuts exec output at "
            f"{HOST_RESULT_LIMITS['codex_exec_tokens']:,} tokens unless the exec call raises "
            "max_output_tokens. Check that you received all of it."
        )
    return ""


def _prepared_fields(result: CompileResult, asked: int | None = None) -> dict[str, Any]:
    empty = explain_empty(result)
    return {
        "budget_note": _budget_note(result, asked),
        "note": f"{empty[0].upper()}{empty[1:]}. {_KEEP_ORIGINAL}" if empty else _KEEP_ORIGINAL,
        "compiled_memory": result.compiled_memory,
        "route": result.route,
        "route_reason": result.route_reason,
        "strategy": result.strategy,
        "applied_strategy": result.applied_strategy,
        "counter": result.counter,
        "budget_tokens": result.budget_tokens,
        "memory_tokens": result.memory_tokens,
        "input_tokens": result.input_tokens,
        "tokens_by_kind": dict(result.tokens_by_kind),
        "caps_exceeded": dict(result.caps_exceeded),
        "source_units": len(result.sources),
        "ledger_summary": _ledger_summary(result.ledger),
    }


def _row(row: LedgerRow) -> Row:
    return Row(
        kind=row.kind,
        key=row.key,
        value=row.value,
        text=row.text,
        source_ids=list(row.source_ids),
        tokens=row.tokens,
        reason=row.reason,
    )


def _clip_report(report: str) -> str:
    if len(report) <= MAX_REPORT_CHARS:
        return report
    cut = report.rfind("\n", 0, MAX_REPORT_CHARS) + 1 or MAX_REPORT_CHARS
    return (
        report[:cut] + f"… report cut here: {len(report) - cut:,} more characters; the kept, "
        "omitted and cited_sources fields hold the details\n"
    )


_log = logging.getLogger("tomc.mcp")


def _show_input(value: Any) -> str:
    if isinstance(value, str):
        return repr(value) if len(value) <= 60 else repr(value[:57] + "...")
    if value is None or isinstance(value, bool | int | float):
        return json.dumps(value)
    return f"a value of type {type(value).__name__}"


def _argument_problems(tool: str, error: ValidationError) -> str:
    """A validation error in TOMC's words: each argument, what is wrong and what is allowed."""
    problems = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        kind, message = item["type"], str(item["msg"])
        if kind == "missing":
            problems.append(f"'{where}' is required")
            continue
        if kind == "literal_error":
            expected = (item.get("ctx") or {}).get("expected", "")
            text = f"'{where}' must be one of {expected}"
        else:
            message = message.removeprefix("Value error, ")
            message = message.replace("Input should be", "must be", 1)
            message = message.replace("Input should have", "must have", 1)
            text = f"'{where}' {message[0].lower()}{message[1:]}" if message else f"'{where}'"
        if kind != "value_error":
            text += f", not {_show_input(item.get('input'))}"
        problems.append(text)
    return f"invalid arguments for {tool}: " + "; ".join(problems)


class _TomcServer(MCPServer):
    """The SDK's server, with argument errors reported in TOMC's words (no pydantic dump)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(_argument_problems(name, exc.__cause__)) from None
            raise


@contextmanager
def _tool_errors(doing: str) -> Iterator[None]:
    """Report every exception to the model as a tool error that names the problem.

    Deliberate TOMC errors keep their message; anything else names its type and ``doing``
    (the SDK alone would say only "Error executing tool"), with the traceback in the log.
    """
    try:
        yield
    except ToolError:
        raise
    except Exception as exc:
        report = report_error(exc, doing, detail=True)
        if not report.expected:
            _log.error("%s", report.message, exc_info=exc)
        raise ToolError(report.message) from exc


class _CompiledMemories:
    """Fingerprints of memories this process handed out, so they cannot be saved as source.

    prepare_context stays in memory (it must not create files for a user who never uses
    notebooks); notebook_recall also records its memories in the store, where every process
    sharing the store sees them.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[str, None] = {}

    def add(self, memory: str) -> None:
        key = memory.strip()
        if not key:
            return
        with self._lock:
            self._seen[key] = None
            if len(self._seen) > 1_000:
                del self._seen[next(iter(self._seen))]

    def __contains__(self, text: str) -> bool:
        with self._lock:
            return text.strip() in self._seen


def _version() -> str:
    try:
        return metadata.version("tomc")
    except metadata.PackageNotFoundError:  # running from a source tree without installing
        return "0+unknown"


def create_server(
    store: NotebookStore | None = None, *, compile_fn: CompileFunction = compile_memory
) -> MCPServer:
    """Build the TOMC MCP server.

    ``store`` is the notebook store to use; by default the one at ``$TOMC_HOME`` or the user
    data directory (see :func:`tomc._home.default_home`). The store file is created only
    when a notebook tool first needs it. ``compile_fn`` replaces the compiler (tests).
    """
    notebooks = store if store is not None else NotebookStore()
    compiled = _CompiledMemories()
    server = _TomcServer(
        SERVER_NAME,
        title="TOMC context compiler",
        instructions=INSTRUCTIONS,
        version=_version(),
        # Tool errors are expected traffic (bad names, oversized input); keep stderr quiet.
        log_level="WARNING",
    )
    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    # The default budget is capped so that results reach the model whole (HOST_RESULT_LIMITS).
    capped_compile = functools.partial(compile_fn, default_budget_cap=MCP_BUDGET_CAP)

    def tool(**options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a tool whose description is its docstring without the code's indentation."""

        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            description = inspect.cleandoc(function.__doc__ or "")
            return server.tool(description=description, **options)(function)

        return register

    def compile_history(
        history: str, task: str, budget_tokens: int | None, strategy: str, counter: str
    ) -> CompileResult:
        request = CompileRequest(
            history=history,
            task=task,
            budget_tokens=budget_tokens,
            strategy=strategy,
            counter=counter,
        )
        # The SDK encodes replies as UTF-8, so unpaired surrogates are refused up front.
        return compile_request(request, compile_fn=capped_compile, unicode_only=True).result

    def remember(result: CompileResult, *, persist: bool) -> None:
        # An "unchanged" result is the original history itself; saving that is legitimate.
        if result.applied_strategy == "unchanged":
            return
        compiled.add(result.compiled_memory)
        if persist:
            notebooks.remember_compiled(result.compiled_memory)

    @tool(annotations=read_only)
    def prepare_context(
        history: HistoryArg,
        task: TaskArg,
        budget_tokens: BudgetArg = None,
        strategy: StrategyArg = TOOL_STRATEGY,
        counter: CounterArg = "lexical",
    ) -> PreparedContext:
        """Compile a long external or archived history into a compact memory for one task.

        Use it when the user hands you a long log, transcript, document or exported chat from
        outside this conversation and you need only what bears on a specific question: it
        returns exact typed records (current values, copies, relation paths, counts) and the
        most relevant original lines, within a token budget, with source ids. Do not pass
        this chat's own messages; the host manages its own context. The memory is for this
        task only: keep the original and compile again for the next task.
        """
        with _tool_errors("compiling the history"):
            result = compile_history(history, task, budget_tokens, strategy, counter)
            remember(result, persist=False)
            return PreparedContext(**_prepared_fields(result, budget_tokens))

    @tool(annotations=read_only)
    def inspect_sources(
        history: HistoryArg,
        task: TaskArg,
        budget_tokens: BudgetArg = None,
        strategy: StrategyArg = TOOL_STRATEGY,
        counter: CounterArg = "lexical",
        max_rows: Annotated[
            int,
            Field(
                ge=0,
                le=1_000,
                description="list at most this many kept rows, omitted rows and cited sources "
                "each (the totals are always given)",
            ),
        ] = DEFAULT_MAX_ROWS,
    ) -> InspectedSources:
        """Show what a compilation kept, what it left out and why, with the cited source lines.

        Use it with the same arguments as prepare_context when you need to check a memory
        before relying on it: whether an important update was kept, which original lines
        support a record, or why a line was dropped (over budget, low BM25 rank, not asked
        for). If evidence you need was omitted, raise budget_tokens or rephrase the task.
        """
        with _tool_errors("compiling the history"):
            result = compile_history(history, task, budget_tokens, strategy, counter)
            kept = [row for row in result.ledger if row.included]
            omitted = [row for row in result.ledger if not row.included]
            # Nearest misses first: an omitted line with a high BM25 score is the likeliest
            # place for evidence the task needed. sorted() is stable, so records keep their
            # packing order and equal scores keep source order.
            omitted.sort(key=lambda row: -float(row.value) if row.kind == "source" else -math.inf)
            cited_ids = {sid for row in kept if row.kind != "source" for sid in row.source_ids}
            cited = [unit for unit in result.sources if unit.id in cited_ids]
            return InspectedSources(
                route=result.route,
                route_reason=result.route_reason,
                applied_strategy=result.applied_strategy,
                counter=result.counter,
                budget_tokens=result.budget_tokens,
                memory_tokens=result.memory_tokens,
                input_tokens=result.input_tokens,
                inspection=_clip_report(render_inspection(result, include_memory=False)),
                kept=[_row(row) for row in kept[:max_rows]],
                kept_total=len(kept),
                omitted=[_row(row) for row in omitted[:max_rows]],
                omitted_total=len(omitted),
                cited_sources=[Source(**unit.to_dict()) for unit in cited[:max_rows]],
                cited_total=len(cited),
            )

    @tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    def notebook_save(
        name: NameArg,
        text: Annotated[
            str,
            Field(
                description="Original source text (log, transcript, document), stored exactly "
                "as given. Never a compiled memory."
            ),
        ],
        mode: Annotated[
            Literal["append", "replace"],
            Field(description="'append' adds an entry (default); 'replace' makes it the only one"),
        ] = "append",
    ) -> SavedEntry:
        """Save original history text to a named notebook that survives restarts.

        Use it to keep external or archived source material (a log, a transcript, notes the
        user asks you to remember) so a later session can recall it for a new task with
        notebook_recall. The text is stored byte for byte. Save originals only: never save
        the output of prepare_context or notebook_recall, because a memory compiled for one
        task can omit evidence a later task needs; such memories are refused.
        """
        with _tool_errors(f"saving to notebook {name!r}"):
            if text in compiled:
                raise CompiledMemoryRefusedError(
                    "this text is a memory compiled by TOMC, not original history; save the "
                    "original messages or documents instead and recall them for each task"
                )
            entry = notebooks.save(name, text, mode)
            return SavedEntry(
                name=name,
                mode=mode,
                seq=entry.seq,
                chars=entry.chars,
                size_bytes=entry.size_bytes,
                sha256=entry.sha256,
                created_at=entry.created_at,
                notebook=_summary(notebooks.info(name)),
            )

    @tool(annotations=read_only)
    def notebook_recall(
        name: NameArg,
        task: TaskArg,
        budget_tokens: BudgetArg = None,
        strategy: StrategyArg = TOOL_STRATEGY,
        counter: CounterArg = "lexical",
    ) -> RecalledContext:
        """Compile a saved notebook's original text into a memory for the current task.

        Use it when a task needs material saved earlier with notebook_save (check the names
        with notebook_list). The stored original is compiled again for every call, so a new
        task can recover evidence that an earlier task's memory left out. The result is for
        this task only; do not save it back to a notebook.
        """
        with _tool_errors(f"recalling notebook {name!r}"):
            result = compile_notebook(
                notebooks,
                name,
                task,
                compile_fn=capped_compile,
                budget_tokens=budget_tokens,
                strategy=strategy,
                counter=counter,
            ).result
            info = notebooks.info(name)
            remember(result, persist=True)
            return RecalledContext(
                **_prepared_fields(result, budget_tokens), notebook=_summary(info)
            )

    @tool(annotations=read_only)
    def notebook_list() -> NotebookList:
        """List the saved notebooks with their entry counts, sizes and last write times.

        Use it to find the name to pass to notebook_recall or notebook_delete.
        """
        with _tool_errors("listing notebooks"):
            return NotebookList(
                store=str(notebooks.path),
                notebooks=[_summary(info) for info in notebooks.list()],
            )

    @tool(
        annotations=ToolAnnotations(
            destructive_hint=True, idempotent_hint=True, open_world_hint=False
        )
    )
    def notebook_delete(name: NameArg) -> DeletedNotebook:
        """Delete a notebook and every entry in it, permanently.

        Use it only when the user asks to forget the saved material; it cannot be undone.
        """
        with _tool_errors(f"deleting notebook {name!r}"):
            removed = notebooks.delete(name)
            return DeletedNotebook(name=name, entries_removed=removed)

    return server


def run_stdio(store: NotebookStore | None = None) -> None:
    """Serve over stdin/stdout until the client closes the connection."""
    create_server(store).run("stdio")
