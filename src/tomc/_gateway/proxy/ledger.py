"""The gateway's usage ledger: what went through it, kept across restarts in a small SQLite file.

``<TOMC home>/gateway/usage.sqlite3`` (folder 0700, file 0600, WAL journal) holds figures only,
never message text, headers or credentials:

- ``conversations``: per conversation key, the requests that went through, how many TOMC
  rewrote (decision action ``compiled`` or ``reused``), TOMC's own token estimate before and
  after, the provider's reported usage (prompt tokens with cache reads and writes, output),
  billed input and its estimated direct counterpart (:mod:`tomc._gateway.proxy.usage`), dropped
  thinking blocks, and what the direct estimate of the next request needs (the previous direct
  prompt and its time, whether the conversation used the cache at all);
- ``errors``: every upstream 4xx/5xx status, counted per conversation (``""`` for requests
  outside a conversation, such as ``count_tokens``);
- ``minutes``: billed and direct input per minute, for the chart.

The gateway must never fail or slow a request for it: :meth:`UsageLedger.record` only queues
the figures (a bounded queue; when full they are dropped), one writer thread stores them in a
short transaction per batch, and every failure is logged and swallowed. A file that cannot be
opened (unwritable folder, corrupt or newer file) leaves the ledger in memory for this run.
:func:`read_traffic` reads the file without a running gateway (``tomc gateway status``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .usage import ProviderUsage, estimate_direct

__all__ = [
    "LEDGER_FILE",
    "LedgerEntry",
    "UsageLedger",
    "empty_figures",
    "ledger_path",
    "read_traffic",
]

logger = logging.getLogger("tomc.gateway")

LEDGER_FILE = "usage.sqlite3"
_SCHEMA_VERSION = 1
_QUEUE_LIMIT = 10_000
_CHART_POINTS = 240
_REWRITTEN = ("compiled", "reused")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    key TEXT PRIMARY KEY,
    api TEXT NOT NULL,
    model TEXT NOT NULL DEFAULT '',
    first_at REAL NOT NULL,
    last_at REAL NOT NULL,
    requests INTEGER NOT NULL DEFAULT 0,
    rewritten INTEGER NOT NULL DEFAULT 0,
    tokens_before INTEGER NOT NULL DEFAULT 0,
    tokens_after INTEGER NOT NULL DEFAULT 0,
    with_usage INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    billed_input REAL NOT NULL DEFAULT 0,
    direct_input REAL NOT NULL DEFAULT 0,
    direct_prompt REAL NOT NULL DEFAULT 0,
    thinking_dropped INTEGER NOT NULL DEFAULT 0,
    last_direct_prompt REAL,
    last_direct_at REAL,
    caching_seen INTEGER NOT NULL DEFAULT 0,
    context_target INTEGER
);
CREATE INDEX IF NOT EXISTS conversations_last_at ON conversations (last_at);
CREATE TABLE IF NOT EXISTS errors (
    conversation TEXT NOT NULL,
    status INTEGER NOT NULL,
    count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (conversation, status)
);
CREATE TABLE IF NOT EXISTS minutes (
    minute INTEGER PRIMARY KEY,
    requests INTEGER NOT NULL DEFAULT 0,
    billed_input REAL NOT NULL DEFAULT 0,
    direct_input REAL NOT NULL DEFAULT 0
);
"""

_SUMS = (
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


def ledger_path(home: str | os.PathLike[str] | None = None) -> Path:
    """``<home>/gateway/usage.sqlite3``."""
    from ..settings import gateway_dir  # settings imports nothing from here; keep it that way

    return gateway_dir(home) / LEDGER_FILE


@dataclass(frozen=True)
class LedgerEntry:
    """One finished request, as the ledger keeps it: figures only.

    ``api`` is the dialect (``messages``, ``responses``, ``chat``) or ``""`` for a path the
    gateway only forwards (those count only towards upstream errors); ``conversation`` is the
    conversation key (``""`` when TOMC could not read the request). ``action``, ``code`` and the
    token estimates come from the session's decision, when there was one.
    """

    at: float
    api: str
    conversation: str
    status: int
    model: str = ""
    action: str | None = None
    code: str | None = None
    tokens_before: int = 0
    tokens_after: int = 0
    usage: ProviderUsage | None = None
    context_target: int | None = None

    @property
    def rewritten(self) -> bool:
        return self.action in _REWRITTEN


def empty_figures() -> dict[str, Any]:
    """The figures of nothing (the shape of ``totals`` and of each conversation's figures)."""
    return _figures(dict.fromkeys(_SUMS, 0), {})


def _figures(row: Any, errors: dict[str, int]) -> dict[str, Any]:
    billed = float(row["billed_input"] or 0.0)
    direct = float(row["direct_input"] or 0.0)
    before, after = int(row["tokens_before"] or 0), int(row["tokens_after"] or 0)
    return {
        "requests": int(row["requests"] or 0),
        "rewritten": int(row["rewritten"] or 0),
        "requests_with_usage": int(row["with_usage"] or 0),
        "tomc_tokens_before": before,
        "tomc_tokens_after": after,
        "tomc_tokens_saved": before - after,
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
    }


def _errors(rows: Iterable[Any]) -> dict[str, int]:
    return {str(status): int(count) for status, count in sorted(tuple(row) for row in rows)}


class UsageLedger:
    """The ledger (see the module docstring). ``path=None`` keeps it in memory only."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.persistent = False
        self.dropped = 0  # entries lost: a full queue, or a failed write
        self.problem: str | None = None
        self._lock = threading.Lock()
        self._queue: queue.Queue[LedgerEntry | None] = queue.Queue(maxsize=_QUEUE_LIMIT)
        self._thread: threading.Thread | None = None
        self._thread_lock = threading.Lock()
        self._connection: sqlite3.Connection | None = self._open()

    # ---------------------------------------------------------------- storage

    def _open(self) -> sqlite3.Connection:
        if self.path is not None:
            try:
                connection = _connect_file(self.path)
            except (OSError, sqlite3.Error) as exc:
                self.problem = f"{type(exc).__name__}: {exc}"
                logger.warning(
                    "usage ledger %s unavailable (%s); figures are kept in memory for this run",
                    self.path,
                    self.problem,
                )
            else:
                self.persistent = True
                return connection
        connection = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        connection.row_factory = sqlite3.Row
        connection.executescript(_SCHEMA)
        return connection

    # ---------------------------------------------------------------- writing

    def record(self, entry: LedgerEntry) -> None:
        """Queue one finished request; never raises, never blocks."""
        try:
            self._queue.put_nowait(entry)
        except queue.Full:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                logger.warning("usage ledger queue full: %d entries dropped", self.dropped)
            return
        self._ensure_writer()

    def _ensure_writer(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        with self._thread_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._run, name="tomc-usage-ledger", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            entry = self._queue.get()
            batch = [entry]
            while entry is not None and len(batch) < 256:
                try:
                    entry = self._queue.get_nowait()
                except queue.Empty:
                    break
                batch.append(entry)
            entries = [e for e in batch if e is not None]
            try:
                if entries:
                    self._write(entries)
            except Exception as exc:  # fail open: the figures are lost, the gateway goes on
                self.dropped += len(entries)
                logger.warning(
                    "usage ledger: %d entries not stored (%s: %s)",
                    len(entries),
                    type(exc).__name__,
                    exc,
                )
            finally:
                for _ in batch:
                    self._queue.task_done()
            if batch[-1] is None and self._queue.empty():
                return

    def _write(self, entries: list[LedgerEntry]) -> None:
        with self._lock:
            connection = self._connected()
            connection.execute("BEGIN IMMEDIATE")
            try:
                for entry in entries:
                    _store(connection, entry)
            except BaseException:
                connection.execute("ROLLBACK")
                raise
            connection.execute("COMMIT")

    def flush(self, timeout_s: float = 2.0) -> bool:
        """Wait (up to ``timeout_s``) until every queued entry is stored; whether it was."""
        deadline = time.monotonic() + timeout_s
        with self._queue.all_tasks_done:
            while self._queue.unfinished_tasks:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._queue.all_tasks_done.wait(remaining)
        return True

    def close(self, timeout_s: float = 5.0) -> None:
        """Store what is queued and stop the writer. Reads still work afterwards."""
        thread = self._thread
        if thread is not None and thread.is_alive():
            with contextlib.suppress(queue.Full):
                self._queue.put(None, timeout=timeout_s)
            thread.join(timeout_s)
        if self.persistent:
            with self._lock:
                connection, self._connection = self._connection, None
                if connection is not None:
                    with contextlib.suppress(sqlite3.Error):
                        connection.close()  # the last connection out checkpoints the WAL

    def _connected(self) -> sqlite3.Connection:
        """The connection, opened again after :meth:`close` (file ledgers only)."""
        if self._connection is None:
            assert self.path is not None
            self._connection = _connect_file(self.path)
        return self._connection

    # ---------------------------------------------------------------- reading

    def traffic(self, *, limit: int = 20) -> dict[str, Any]:
        """Totals, the ``limit`` most recent conversations and the chart's series."""
        with self._lock:
            data = _traffic(self._connected(), limit)
        data["ledger"] = str(self.path) if self.persistent else None
        data["persistent"] = self.persistent
        data["dropped"] = self.dropped
        if self.problem:
            data["problem"] = self.problem
        return data


def _connect_file(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    with contextlib.suppress(OSError):
        os.chmod(path, 0o600)
    connection = sqlite3.connect(
        str(path), timeout=0.5, check_same_thread=False, isolation_level=None
    )
    try:
        connection.row_factory = sqlite3.Row
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        if version > _SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"written by a newer TOMC (schema {version})")
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.executescript(_SCHEMA)
        connection.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")
    except BaseException:
        connection.close()
        raise
    return connection


def _store(connection: sqlite3.Connection, entry: LedgerEntry) -> None:
    if entry.status >= 400:
        connection.execute(
            "INSERT INTO errors (conversation, status, count) VALUES (?, ?, 1) "
            "ON CONFLICT (conversation, status) DO UPDATE SET count = count + 1",
            (entry.conversation, entry.status),
        )
    if not entry.api:
        return
    row = connection.execute(
        "SELECT last_direct_prompt, last_direct_at, caching_seen FROM conversations WHERE key = ?",
        (entry.conversation,),
    ).fetchone()
    previous_prompt = row["last_direct_prompt"] if row is not None else None
    previous_at = row["last_direct_at"] if row is not None else None
    caching_seen = bool(row["caching_seen"]) if row is not None else False
    usage = entry.usage
    billed = direct = direct_prompt = 0.0
    if usage is not None:
        caching_seen = caching_seen or usage.used_cache
        estimate = estimate_direct(
            usage,
            rewritten=entry.rewritten,
            tokens_before=entry.tokens_before,
            tokens_after=entry.tokens_after,
            previous_prompt=previous_prompt,
            seconds_since_previous=entry.at - previous_at if previous_at is not None else None,
            caching_seen=caching_seen,
        )
        billed, direct = usage.billed_input, estimate.billed_input
        direct_prompt = estimate.prompt_tokens
        previous_prompt, previous_at = estimate.prompt_tokens, entry.at
    with_usage = usage is not None
    connection.execute(
        """
        INSERT INTO conversations (
            key, api, model, first_at, last_at, requests, rewritten, tokens_before,
            tokens_after, with_usage, prompt_tokens, cache_read_tokens, cache_write_tokens,
            output_tokens, billed_input, direct_input, direct_prompt, thinking_dropped,
            last_direct_prompt, last_direct_at, caching_seen, context_target
        ) VALUES (?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        ON CONFLICT (key) DO UPDATE SET
            model = CASE WHEN excluded.model != '' THEN excluded.model ELSE model END,
            last_at = MAX(last_at, excluded.last_at),
            requests = requests + 1,
            rewritten = rewritten + excluded.rewritten,
            tokens_before = tokens_before + excluded.tokens_before,
            tokens_after = tokens_after + excluded.tokens_after,
            with_usage = with_usage + excluded.with_usage,
            prompt_tokens = prompt_tokens + excluded.prompt_tokens,
            cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
            cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
            output_tokens = output_tokens + excluded.output_tokens,
            billed_input = billed_input + excluded.billed_input,
            direct_input = direct_input + excluded.direct_input,
            direct_prompt = direct_prompt + excluded.direct_prompt,
            thinking_dropped = thinking_dropped + excluded.thinking_dropped,
            last_direct_prompt = excluded.last_direct_prompt,
            last_direct_at = excluded.last_direct_at,
            caching_seen = excluded.caching_seen,
            context_target = COALESCE(excluded.context_target, context_target)
        """,
        (
            entry.conversation,
            entry.api,
            entry.model,
            entry.at,
            entry.at,
            int(entry.rewritten),
            entry.tokens_before,
            entry.tokens_after,
            int(with_usage),
            usage.prompt_tokens if usage else 0,
            usage.cache_read_tokens if usage else 0,
            usage.cache_write_tokens if usage else 0,
            (usage.output_tokens or 0) if usage else 0,
            billed,
            direct,
            direct_prompt,
            (usage.thinking_dropped or 0) if usage else 0,
            previous_prompt,
            previous_at,
            int(caching_seen),
            entry.context_target,
        ),
    )
    if with_usage:
        connection.execute(
            "INSERT INTO minutes (minute, requests, billed_input, direct_input) "
            "VALUES (?, 1, ?, ?) ON CONFLICT (minute) DO UPDATE SET "
            "requests = requests + 1, billed_input = billed_input + excluded.billed_input, "
            "direct_input = direct_input + excluded.direct_input",
            (int(entry.at // 60), billed, direct),
        )


_STEPS_MIN = (1, 5, 15, 60, 180, 360, 1440, 10080)


def _series(connection: sqlite3.Connection) -> list[dict[str, Any]]:
    """Cumulative billed and direct input over time, at most about 240 points."""
    span = connection.execute("SELECT MIN(minute), MAX(minute) FROM minutes").fetchone()
    if span[0] is None:
        return []
    first, last = span
    step = next((s for s in _STEPS_MIN if (last - first) / s <= _CHART_POINTS), _STEPS_MIN[-1])
    rows = connection.execute(
        "SELECT minute / ? AS bucket, SUM(requests), SUM(billed_input), SUM(direct_input) "
        "FROM minutes GROUP BY bucket ORDER BY bucket",
        (step,),
    ).fetchall()
    series = [{"t": first * 60, "requests": 0, "billed_input": 0.0, "direct_input": 0.0}]
    requests, billed, direct = 0, 0.0, 0.0
    for bucket, count, bucket_billed, bucket_direct in rows:
        requests += count
        billed += bucket_billed
        direct += bucket_direct
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


def _traffic(connection: sqlite3.Connection, limit: int) -> dict[str, Any]:
    sums = ", ".join(f"SUM({name}) AS {name}" for name in _SUMS)
    totals_row = connection.execute(
        f"SELECT {sums}, MIN(first_at) AS since, MAX(last_at) AS last FROM conversations"
    ).fetchone()
    all_errors = _errors(
        connection.execute("SELECT status, SUM(count) FROM errors GROUP BY status").fetchall()
    )
    totals = _figures(totals_row, all_errors)
    totals["conversations"] = connection.execute("SELECT COUNT(*) FROM conversations").fetchone()[0]
    rows = connection.execute(
        "SELECT * FROM conversations ORDER BY last_at DESC LIMIT ?", (max(0, limit),)
    ).fetchall()
    conversations = []
    for row in rows:
        errors = _errors(
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
                **_figures(row, errors),
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
        if version > _SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"written by a newer TOMC (schema {version})")
        data = _traffic(connection, limit)
    finally:
        connection.close()
    data["ledger"] = str(path)
    return data
