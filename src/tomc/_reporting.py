"""The command line's one error path, shared by ``tomc`` and its gateway commands.

An exception becomes a message on stderr and the exit code of the service's error table
(:data:`tomc._service.ERROR_TABLE`: 1 refused input, 3 environment, 4 a bug; 2 is click's usage
error), never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import click

from ._core.errors import InputTooLargeError
from ._service import report_error

__all__ = ["fail", "reported"]


def fail(exc: Exception, doing: str) -> NoReturn:
    """Raise ``exc`` as a click error carrying the error table's message and exit code."""
    report = report_error(exc, doing, detail=True)
    message = report.message
    if isinstance(exc, InputTooLargeError) and exc.what == "history":
        message += " (or pass --max-chars 0)"
    error = click.ClickException(message)
    error.exit_code = report.exit_code
    raise error from None


@contextmanager
def reported(doing: str) -> Iterator[None]:
    """Report any exception of the block as a message and an exit code, not a traceback."""
    try:
        yield
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except Exception as exc:
        fail(exc, doing)
