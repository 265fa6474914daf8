"""The usage ledger's figures: totals, the recent conversations and the chart's series.

Read from the gateway's own connection (:meth:`~.ledger.UsageLedger.traffic`) or, without a
running gateway, from the file in read-only mode (:func:`read_traffic`, for
``tomc gateway status``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable
from typing import Any

from .ledger_file import SCHEMA_VERSION, ledger_path

__all__ = [
    "SUMS",
    "empty_figures",
    "errors_of",
    "figures",
    "gateway_errors_of",
    "read_traffic",
    "series_of",
    "traffic",
]

_CHART_POINTS = 240

SUMS = (
    "requests",
    "rewritten",
    "tokens_before",
    "tokens_after",
    "with_usage",
    "prompt_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "output_tokens",
    "billed_input",
    "direct_input",
    "thinking_dropped",
)


def empty_figures() -> dict[str, Any]:
    """The figures of nothing (the shape of ``totals`` and of each conversation's figures)."""
    return figures(dict.fromkeys(SUMS, 0), {})


def figures(
    row: Any, errors: dict[str, int], gateway_errors: dict[str, int] | None = None
) -> dict[str, Any]:
    """One row of summed figures (``SUMS``, by name), its upstream errors and the gateway's own
    errors (by kind), as shown.

    The account of savings is ``billed_input`` against ``direct_input`` (an estimate) and their
    difference (:mod:`.savings`); ``tomc_tokens_before`` / ``tomc_tokens_after`` are TOMC's own
    count, not a bill, so no "saved" figure is derived from them."""
    gateway_errors = gateway_errors or {}
    billed = float(row["billed_input"] or 0.0)
    direct = float(row["direct_input"] or 0.0)
    before, after = int(row["tokens_before"] or 0), int(row["tokens_after"] or 0)
    return {
        "requests": int(row["requests"] or 0),
        "rewritten": int(row["rewritten"] or 0),
        "requests_with_usage": int(row["with_usage"] or 0),
        "tomc_tokens_before": before,
        "tomc_tokens_after": after,
        "prompt_tokens": int(row["prompt_tokens"] or 0),
        "cache_read_tokens": int(row["cache_read_tokens"] or 0),
        "cache_write_tokens": int(row["cache_write_tokens"] or 0),
        "output_tokens": int(row["output_tokens"] or 0),
        "billed_input": round(billed, 1),
        "direct_input": round(direct, 1),
        "billed_saved": round(direct - billed, 1),
        "billed_saved_share": round((direct - billed) / direct, 4) if direct > 0 else 0.0,
        "thinking_dropped": int(row["thinking_dropped"] or 0),
        "upstream_errors": errors,
        "upstream_error_count": sum(errors.values()),
        "gateway_errors": sum(gateway_errors.values()),
        "gateway_error_kinds": gateway_errors,
    }


def errors_of(rows: Iterable[Any]) -> dict[str, int]:
    """Upstream error counts from ``(status, count)`` rows, by status in order (as shown)."""
    return {str(status): int(count) for status, count in sorted(tuple(row) for row in rows)}


def gateway_errors_of(rows: Iterable[Any]) -> dict[str, int]:
    """The gateway's own error counts from ``(kind, count)`` rows, by kind in order."""
    return {str(kind): int(count) for kind, count in sorted(tuple(row) for row in rows)}


def _gateway_errors(connection: sqlite3.Connection) -> dict[str | None, dict[str, int]]:
    """The gateway's own errors by conversation (``None``: all of them), by kind; none in a
    file made before they were kept (read without writing, it has no such table)."""
    kept = connection.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'gateway_errors'"
    ).fetchone()
    if not kept:
        return {}
    rows = connection.execute("SELECT conversation, kind, count FROM gateway_errors").fetchall()
    found: dict[str | None, dict[str, int]] = {None: {}}
    for conversation, kind, count in sorted(tuple(row) for row in rows):
        found.setdefault(conversation, {})[kind] = int(count)
        found[None][kind] = found[None].get(kind, 0) + int(count)
    return found


_STEPS_MIN = (1, 5, 15, 60, 180, 360, 1440, 10080)


def _series(connection: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = connection.execute(
        "SELECT minute, requests, billed_input, direct_input FROM minutes ORDER BY minute"
    ).fetchall()
    return series_of(tuple(row) for row in rows)


def series_of(
    minutes: Iterable[tuple[int, int, float, float]],
    base: tuple[int, float, float] = (0, 0.0, 0.0),
) -> list[dict[str, Any]]:
    """Cumulative billed and direct input over time, at most about 240 points, from
    ``(minute, requests, billed, direct)`` rows in minute order; ``base`` is what came before
    the first of them (a ledger that folds its oldest minutes away)."""
    rows = list(minutes)
    if not rows:
        return []
    first, last = rows[0][0], rows[-1][0]
    step = next((s for s in _STEPS_MIN if (last - first) / s <= _CHART_POINTS), _STEPS_MIN[-1])
    requests, billed, direct = base
    series = [
        {"t": first * 60, "requests": requests, "billed_input": round(billed, 1),
         "direct_input": round(direct, 1)}
    ]  # fmt: skip
    index = 0
    while index < len(rows):
        bucket = rows[index][0] // step
        while index < len(rows) and rows[index][0] // step == bucket:
            requests += rows[index][1]
            billed += rows[index][2]
            direct += rows[index][3]
            index += 1
        end = min((bucket + 1) * step, last + 1) * 60
        series.append(
            {
                "t": end,
                "requests": requests,
                "billed_input": round(billed, 1),
                "direct_input": round(direct, 1),
            }
        )
    return series


def traffic(connection: sqlite3.Connection, limit: int) -> dict[str, Any]:
    sums = ", ".join(f"SUM({name}) AS {name}" for name in SUMS)
    totals_row = connection.execute(
        f"SELECT {sums}, MIN(first_at) AS since, MAX(last_at) AS last FROM conversations"
    ).fetchone()
    all_errors = errors_of(
        connection.execute("SELECT status, SUM(count) FROM errors GROUP BY status").fetchall()
    )
    gateway_errors = _gateway_errors(connection)
    totals = figures(totals_row, all_errors, gateway_errors.get(None))
    # The row keyed "" sums requests outside any conversation: in the totals, never listed.
    totals["conversations"] = connection.execute(
        "SELECT COUNT(*) FROM conversations WHERE key != ''"
    ).fetchone()[0]
    rows = connection.execute(
        "SELECT * FROM conversations WHERE key != '' ORDER BY last_at DESC LIMIT ?",
        (max(0, limit),),
    ).fetchall()
    conversations = []
    for row in rows:
        errors = errors_of(
            connection.execute(
                "SELECT status, count FROM errors WHERE conversation = ?", (row["key"],)
            ).fetchall()
        )
        conversations.append(
            {
                "conversation": row["key"],
                "api": row["api"],
                "model": row["model"],
                "first_at": row["first_at"],
                "last_at": row["last_at"],
                **figures(row, errors, gateway_errors.get(row["key"])),
                "context_target": row["context_target"],
            }
        )
    return {
        "since": totals_row["since"],
        "last": totals_row["last"],
        "totals": totals,
        "conversations": conversations,
        "series": _series(connection),
    }


def read_traffic(
    home: str | os.PathLike[str] | None = None, *, limit: int = 10
) -> dict[str, Any] | None:
    """The ledger's figures read from ``<home>/gateway/usage.sqlite3`` without writing to it
    (``None`` when there is no file yet). Raises ``sqlite3.Error`` or ``OSError`` on a file that
    cannot be read."""
    path = ledger_path(home)
    if not path.exists():
        return None
    connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=2.0)
    try:
        connection.row_factory = sqlite3.Row
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version == 0:  # created, never written
            return None
        if version > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"written by a newer TOMC (schema {version})")
        data = traffic(connection, limit)
    finally:
        connection.close()
    data["ledger"] = str(path)
    return data
