"""The TOMC MCP server: explicit context preparation for external history, plus notebooks.

Only this package imports the ``mcp`` SDK (the optional ``mcp`` extra). Build a server with
:func:`create_server` (tests connect to it in-process); ``tomc mcp`` runs it over stdio with
:func:`run_stdio`. The tools are in :mod:`.tools`, what they take and return in :mod:`.models`.

The server is a tool provider, not a request interceptor: the host keeps its own chat and its
own context management, and asks TOMC to compile history it holds outside that chat. Every
tool goes through :mod:`tomc._service` (one request schema, limits and chat detection) and
reports every exception through its error table as a tool error (``is_error``) whose message
names the problem; an unexpected exception names its type and the step, and its traceback goes
to the server log. Nothing a client sends can crash the server.
"""

from __future__ import annotations

import functools
from importlib import metadata

from mcp.server.mcpserver import MCPServer

from .._core.compiler import compile_memory
from .._core.sources import MAX_INTERACTIVE_CHARS, MAX_TASK_CHARS
from .._notebooks import NotebookStore
from .._service import CompileFunction
from .models import HOST_RESULT_LIMITS, MAX_REPORT_CHARS, MCP_BUDGET_CAP
from .tool_errors import TomcServer
from .tools import TOOLS, Toolkit

__all__ = [
    "HOST_RESULT_LIMITS",
    "INSTRUCTIONS",
    "MAX_REPORT_CHARS",
    "MCP_BUDGET_CAP",
    "SERVER_NAME",
    "create_server",
    "run_stdio",
]

SERVER_NAME = "tomc"

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
    server = TomcServer(
        SERVER_NAME,
        title="TOMC context compiler",
        instructions=INSTRUCTIONS,
        version=_version(),
        # Tool errors are expected traffic (bad names, oversized input); keep stderr quiet.
        log_level="WARNING",
    )
    kit = Toolkit(
        server,
        store if store is not None else NotebookStore(),
        # The default budget is capped so that results reach the model whole
        # (HOST_RESULT_LIMITS).
        functools.partial(compile_fn, default_budget_cap=MCP_BUDGET_CAP),
    )
    for add in TOOLS:
        add(kit)
    return server


def run_stdio(store: NotebookStore | None = None) -> None:
    """Serve over stdin/stdout until the client closes the connection."""
    create_server(store).run("stdio")
