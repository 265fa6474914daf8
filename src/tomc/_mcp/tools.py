"""The six MCP tools, each registered by its own function on one :class:`Toolkit`.

The toolkit holds what the tools share: the server they register on, the notebook store, the
memories this process handed out and the (budget-capped) compiler. The docstring of each tool
function is the description the model reads.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from .._core.errors import CompiledMemoryRefusedError
from .._core.result import CompileResult
from .._notebooks import NotebookStore
from .._service import (
    TOOL_STRATEGY,
    CompileFunction,
    CompileRequest,
    compile_notebook,
    compile_request,
)
from .models import (
    DEFAULT_MAX_ROWS,
    BudgetArg,
    CounterArg,
    DeletedNotebook,
    HistoryArg,
    InspectedSources,
    NameArg,
    NotebookList,
    PreparedContext,
    RecalledContext,
    SavedEntry,
    StrategyArg,
    TaskArg,
)
from .replies import inspected_sources, notebook_summary, prepared_fields, saved_entry
from .tool_errors import tool_errors

__all__ = ["TOOLS", "CompiledMemories", "Toolkit"]

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


class CompiledMemories:
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


@dataclass(frozen=True)
class Toolkit:
    """What the tools share; ``compile_fn`` is the compiler with the MCP budget cap applied."""

    server: MCPServer
    notebooks: NotebookStore
    compile_fn: CompileFunction
    compiled: CompiledMemories = field(default_factory=CompiledMemories)

    def tool(self, **options: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Register a tool whose description is its docstring without the code's indentation."""

        def register(function: Callable[..., Any]) -> Callable[..., Any]:
            description = inspect.cleandoc(function.__doc__ or "")
            return self.server.tool(description=description, **options)(function)

        return register

    def compile_history(
        self, history: str, task: str, budget_tokens: int | None, strategy: str, counter: str
    ) -> CompileResult:
        request = CompileRequest(
            history=history,
            task=task,
            budget_tokens=budget_tokens,
            strategy=strategy,
            counter=counter,
        )
        # The SDK encodes replies as UTF-8, so unpaired surrogates are refused up front.
        return compile_request(request, compile_fn=self.compile_fn, unicode_only=True).result

    def remember(self, result: CompileResult, *, persist: bool) -> None:
        # An "unchanged" result is the original history itself; saving that is legitimate.
        if result.applied_strategy == "unchanged":
            return
        self.compiled.add(result.compiled_memory)
        if persist:
            self.notebooks.remember_compiled(result.compiled_memory)


def add_prepare_context(kit: Toolkit) -> None:
    @kit.tool(annotations=_READ_ONLY)
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
        with tool_errors("compiling the history"):
            result = kit.compile_history(history, task, budget_tokens, strategy, counter)
            kit.remember(result, persist=False)
            return PreparedContext(**prepared_fields(result, budget_tokens))


def add_inspect_sources(kit: Toolkit) -> None:
    @kit.tool(annotations=_READ_ONLY)
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
        with tool_errors("compiling the history"):
            result = kit.compile_history(history, task, budget_tokens, strategy, counter)
            return inspected_sources(result, max_rows)


def add_notebook_save(kit: Toolkit) -> None:
    @kit.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
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
        with tool_errors(f"saving to notebook {name!r}"):
            if text in kit.compiled:
                raise CompiledMemoryRefusedError(
                    "this text is a memory compiled by TOMC, not original history; save the "
                    "original messages or documents instead and recall them for each task"
                )
            entry = kit.notebooks.save(name, text, mode)
            return saved_entry(entry, mode, kit.notebooks.info(name))


def add_notebook_recall(kit: Toolkit) -> None:
    @kit.tool(annotations=_READ_ONLY)
    def notebook_recall(
        name: NameArg,
        task: TaskArg,
        budget_tokens: BudgetArg = None,
        strategy: StrategyArg = TOOL_STRATEGY,
        counter: CounterArg = "lexical",
    ) -> RecalledContext:
        """Recall a saved notebook: compile its original text into a memory for the current task.

        Use it when a task needs material saved earlier with notebook_save (check the names
        with notebook_list). The stored original is compiled again for every call, so a new
        task can recover evidence that an earlier task's memory left out. The result is for
        this task only; do not save it back to a notebook.
        """
        with tool_errors(f"recalling notebook {name!r}"):
            result = compile_notebook(
                kit.notebooks,
                name,
                task,
                compile_fn=kit.compile_fn,
                budget_tokens=budget_tokens,
                strategy=strategy,
                counter=counter,
            ).result
            info = kit.notebooks.info(name)
            kit.remember(result, persist=True)
            return RecalledContext(
                **prepared_fields(result, budget_tokens), notebook=notebook_summary(info)
            )


def add_notebook_list(kit: Toolkit) -> None:
    @kit.tool(annotations=_READ_ONLY)
    def notebook_list() -> NotebookList:
        """List the saved notebooks with their entry counts, sizes and last write times.

        Use it to find the name to pass to notebook_recall or notebook_delete.
        """
        with tool_errors("listing notebooks"):
            return NotebookList(
                store=str(kit.notebooks.path),
                notebooks=[notebook_summary(info) for info in kit.notebooks.list()],
            )


def add_notebook_delete(kit: Toolkit) -> None:
    @kit.tool(
        annotations=ToolAnnotations(
            destructive_hint=True, idempotent_hint=True, open_world_hint=False
        )
    )
    def notebook_delete(name: NameArg) -> DeletedNotebook:
        """Delete a notebook and every entry in it, permanently.

        Use it only when the user asks to forget the saved material; it cannot be undone.
        """
        with tool_errors(f"deleting notebook {name!r}"):
            removed = kit.notebooks.delete(name)
            return DeletedNotebook(name=name, entries_removed=removed)


#: Every tool, in the order hosts list them.
TOOLS: tuple[Callable[[Toolkit], None], ...] = (
    add_prepare_context,
    add_inspect_sources,
    add_notebook_save,
    add_notebook_recall,
    add_notebook_list,
    add_notebook_delete,
)
