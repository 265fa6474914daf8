"""What the MCP tools take and return: argument types, reply models and their size limits.

The SDK builds each tool's input and output JSON schema from these (the names of the models
are the schema titles hosts see), so a change here changes ``manifest.json``.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from .._service import MAX_BUDGET_TOKENS

__all__ = [
    "DEFAULT_MAX_ROWS",
    "HOST_RESULT_LIMITS",
    "KEEP_ORIGINAL",
    "MAX_REPORT_CHARS",
    "MCP_BUDGET_CAP",
    "BudgetArg",
    "ChatMessage",
    "CounterArg",
    "DeletedNotebook",
    "HistoryArg",
    "InspectedSources",
    "KindSummary",
    "NameArg",
    "NotebookList",
    "NotebookSummary",
    "PreparedContext",
    "RecalledContext",
    "Row",
    "SavedEntry",
    "Source",
    "StrategyArg",
    "TaskArg",
]

#: What the MCP hosts pass to the model whole, per tool result (measured and read in the
#: pinned CLIs, package.json; tests/mcp_server/test_hosts.py runs both):
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

_STRATEGY_HELP = (
    "'auto' (default) returns a history that already fits the budget unchanged and otherwise "
    "picks 'tomc_raw' or 'rag'; 'tomc' is typed records only; 'tomc_raw' is records plus "
    "BM25-selected source lines; 'rag' is source lines only."
)
KEEP_ORIGINAL = (
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
    note: str = KEEP_ORIGINAL


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
