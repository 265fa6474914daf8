"""Every failure of an MCP tool as a tool error in TOMC's words, never a crash.

Argument errors name each argument, what is wrong and what is allowed (not a pydantic dump);
any other exception goes through the service's error table, and an unexpected one also logs
its traceback.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import ValidationError

from .._service import report_error

__all__ = ["TomcServer", "tool_errors"]

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


class TomcServer(MCPServer):
    """The SDK's server, with argument errors reported in TOMC's words (no pydantic dump)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                raise ToolError(_argument_problems(name, exc.__cause__)) from None
            raise


@contextmanager
def tool_errors(doing: str) -> Iterator[None]:
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
