"""The gateway's usage ledger: what went through it, kept across restarts in a small SQLite file.

``<TOMC home>/gateway/usage.sqlite3`` (folder 0700, file 0600, WAL journal) holds figures only,
never message text, headers or credentials:

- ``conversations``: per conversation key, the requests that went through, how many TOMC
  rewrote (decision action ``compiled`` or ``reused``), TOMC's own token estimate before and
  after, the provider's reported usage (prompt tokens with cache reads and writes, output),
  billed input and its estimated direct counterpart (:mod:`.usage`), dropped
  thinking blocks, and what the direct estimate of the next request needs (the previous direct
  prompt and its time, whether the conversation used the cache at all);
- ``errors``: every upstream 4xx/5xx status, counted per conversation (``""`` for requests
  outside a conversation, such as ``count_tokens``);
- ``gateway_errors``: the gateway's own errors, counted per conversation (``""`` likewise) and
  kind: the gateway answered a request itself because the upstream could not be reached
  (``unreachable``), closed the connection (``closed``) or did not answer in time
  (``timeout``), or failed inside (``internal``); or TOMC failed preparing a request and sent
  it unchanged (``tomc_failed``). Shown as ``gateway_errors`` (their number) and
  ``gateway_error_kinds`` (by kind), in the totals and per conversation;
- ``minutes``: billed and direct input per minute, for the chart.

A request on a format's path that TOMC could not read (its body not JSON, or compressed) has no
conversation: its figures count in the totals (the ``conversations`` row keyed ``""``, which is
never listed or counted as a conversation).

The gateway must never fail or slow a request for it: :meth:`UsageLedger.record` only queues
the figures (a bounded queue; when full they are dropped), one writer thread stores them in a
short transaction per batch, and every failure is logged and swallowed. A file that cannot be
opened (unwritable folder, corrupt or newer file) leaves the ledger in memory for this run.
:func:`read_traffic` reads the file without a running gateway (``tomc gateway status``).

:class:`Ledger` is what the gateway asks of any ledger; this SQLite one is the default (one
machine). With a shared session store the gateway uses the store's own instead
(:mod:`tomc._gateway.proxy.store.redis_ledger`), so every process shows the team's figures;
both estimate with :func:`bill` and show the figures in the same shape.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import anyio

from .ledger_file import LEDGER_FILE, connect_file, connect_memory, ledger_path
from .traffic import read_traffic, traffic
from .usage import ProviderUsage, estimate_direct

# The file's name and location and the read-only reader are re-exported: the ledger is one
# thing to its users (the gateway app, ``tomc gateway status``).
__all__ = [
    "LEDGER_FILE",
    "TOMC_FAILED",
    "Billing",
    "Ledger",
    "LedgerEntry",
    "UsageLedger",
    "bill",
    "entry_sums",
    "ledger_path",
    "read_traffic",
]

logger = logging.getLogger("tomc.gateway")

_QUEUE_LIMIT = 10_000
_REWRITTEN = ("compiled", "reused")
#: The gateway error of a request TOMC failed to prepare (sent unchanged, answered upstream).
TOMC_FAILED = "tomc_failed"


@dataclass(frozen=True)
class LedgerEntry:
    """One finished request, as the ledger keeps it: figures only.

    ``api`` is the dialect (``messages``, ``responses``, ``chat``) or ``""`` for a path the
    gateway only forwards (those count only towards upstream and gateway errors);
    ``conversation`` is the conversation key (``""`` when TOMC could not read the request).
    ``action``, ``code`` and the token estimates come from the session's decision, when there
    was one. ``gateway_error`` is the kind of the gateway's own error on the request (``""``:
    none; see the module docstring); when the gateway answered the request itself, ``status``
    is its own answer's, not an upstream's.
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
    gateway_error: str = ""

    @property
    def rewritten(self) -> bool:
        return self.action in _REWRITTEN

    @property
    def upstream_error(self) -> bool:
        """Whether ``status`` is an error the upstream answered (not one of the gateway's)."""
        return self.status >= 400 and self.gateway_error in ("", TOMC_FAILED)

    @classmethod
    def of_request(
        cls, api: str, conversation: str, status: int, decision: Any, usage: ProviderUsage | None
    ) -> LedgerEntry:
        """A request finished now, with its session's ``decision`` (a
        :class:`~tomc.chat.Decision`, ``None`` when there was none). A request in a
        conversation without a decision is one TOMC failed to prepare (the session raised; the
        request went out unchanged): one of the gateway's errors, :data:`TOMC_FAILED`."""
        if decision is None:
            failed = TOMC_FAILED if api and conversation else ""
            return cls(time.time(), api, conversation, status, usage=usage, gateway_error=failed)
        return cls(
            at=time.time(),
            api=api,
            conversation=conversation,
            status=status,
            model=decision.model,
            action=decision.action,
            code=decision.code,
            tokens_before=decision.tokens_before,
            tokens_after=decision.tokens_after,
            usage=usage,
            context_target=decision.context_target,
        )

    @classmethod
    def of_gateway_error(
        cls, api: str, conversation: str, status: int, kind: str, model: str = ""
    ) -> LedgerEntry:
        """A request the gateway answered now with an error of its own (``kind``: why): it
        counts as a request of its conversation, with nothing sent or billed."""
        return cls(time.time(), api, conversation, status, model=model, gateway_error=kind)


class Ledger(Protocol):
    """What the gateway asks of a usage ledger: this module's SQLite file (one machine), or one
    kept in a shared session store (:mod:`tomc._gateway.proxy.store.redis_ledger`, every
    process of a team). None of its methods raises for the ledger's own failures."""

    def record(self, entry: LedgerEntry) -> None:
        """Take one finished request; never raises, never blocks (it is stored shortly)."""

    async def written(self, conversation: str) -> None:
        """Return once this process's entries of ``conversation`` are stored (or given up).

        The gateway awaits it before the conversation's lease is released, so the next
        request's direct estimate, wherever it is served, starts from this one."""

    async def read(self, limit: int) -> dict[str, Any] | None:
        """The figures :meth:`UsageLedger.traffic` returns (after a short wait for entries
        still being stored); ``None`` (and a log line) when they cannot be read now, which the
        status page says rather than showing zeros."""

    async def aclose(self) -> None:
        """Store what is pending and let go."""


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
                connection = connect_file(self.path)
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
        return connect_memory()

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
            self._connection = connect_file(self.path)
        return self._connection

    async def written(self, conversation: str) -> None:
        """Nothing to wait for: one writer thread stores entries in the order they came, and
        this file serves only this machine's requests."""
        return None

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self.close)

    # ---------------------------------------------------------------- reading

    async def read(self, limit: int) -> dict[str, Any] | None:
        return await anyio.to_thread.run_sync(self.settled_traffic, limit)

    def settled_traffic(self, limit: int) -> dict[str, Any] | None:
        """:meth:`traffic` once what is queued is stored (waiting up to a second); ``None``
        (and a log line) when the figures cannot be read."""
        try:
            self.flush(1.0)
            return self.traffic(limit=limit)
        except Exception as exc:  # the status page still shows the live figures
            logger.warning("usage ledger not read (%s: %s)", type(exc).__name__, exc)
            return None

    def traffic(self, *, limit: int = 20) -> dict[str, Any]:
        """Totals, the ``limit`` most recent conversations and the chart's series."""
        with self._lock:
            data = traffic(self._connected(), limit)
        data["ledger"] = str(self.path) if self.persistent else None
        data["persistent"] = self.persistent
        data["dropped"] = self.dropped
        if self.problem:
            data["problem"] = self.problem
        return data


def _store(connection: sqlite3.Connection, entry: LedgerEntry) -> None:
    if entry.upstream_error:
        connection.execute(
            "INSERT INTO errors (conversation, status, count) VALUES (?, ?, 1) "
            "ON CONFLICT (conversation, status) DO UPDATE SET count = count + 1",
            (entry.conversation, entry.status),
        )
    if entry.gateway_error:
        connection.execute(
            "INSERT INTO gateway_errors (conversation, kind, count) VALUES (?, ?, 1) "
            "ON CONFLICT (conversation, kind) DO UPDATE SET count = count + 1",
            (entry.conversation, entry.gateway_error),
        )
    if not entry.api:
        return
    billing = _billing(connection, entry)
    connection.execute(
        _ADD_TO_CONVERSATION,
        (
            entry.conversation,
            entry.api,
            entry.model,
            entry.at,
            entry.at,
            *entry_sums(entry, billing),
            billing.previous_prompt,
            billing.previous_at,
            int(billing.caching_seen),
            entry.context_target,
        ),
    )
    if entry.usage is not None:
        connection.execute(
            "INSERT INTO minutes (minute, requests, billed_input, direct_input) "
            "VALUES (?, 1, ?, ?) ON CONFLICT (minute) DO UPDATE SET "
            "requests = requests + 1, billed_input = billed_input + excluded.billed_input, "
            "direct_input = direct_input + excluded.direct_input",
            (int(entry.at // 60), billing.billed, billing.direct),
        )


_ADD_TO_CONVERSATION = """
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
"""


@dataclass(frozen=True)
class Billing:
    """One request's billed input and its direct estimate, and what the next estimate needs
    (the conversation's latest direct prompt and its time, whether it used the cache)."""

    billed: float
    direct: float
    direct_prompt: float
    previous_prompt: float | None
    previous_at: float | None
    caching_seen: bool


def entry_sums(entry: LedgerEntry, billing: Billing) -> tuple[int | float, ...]:
    """What one entry adds to its conversation's sums: rewritten, tokens before and after,
    with usage, prompt, cache read, cache write and output tokens, billed and direct input,
    the direct prompt, dropped thinking blocks (both ledger kinds store them in this order)."""
    usage = entry.usage
    return (
        int(entry.rewritten),
        entry.tokens_before,
        entry.tokens_after,
        int(usage is not None),
        usage.prompt_tokens if usage else 0,
        usage.cache_read_tokens if usage else 0,
        usage.cache_write_tokens if usage else 0,
        (usage.output_tokens or 0) if usage else 0,
        billing.billed,
        billing.direct,
        billing.direct_prompt,
        (usage.thinking_dropped or 0) if usage else 0,
    )


def _billing(connection: sqlite3.Connection, entry: LedgerEntry) -> Billing:
    if not entry.conversation:  # requests outside any conversation: no previous one to follow
        return bill(entry, None, None, False)
    row = connection.execute(
        "SELECT last_direct_prompt, last_direct_at, caching_seen FROM conversations WHERE key = ?",
        (entry.conversation,),
    ).fetchone()
    if row is None:
        return bill(entry, None, None, False)
    return bill(entry, row["last_direct_prompt"], row["last_direct_at"], bool(row["caching_seen"]))


def bill(
    entry: LedgerEntry,
    previous_prompt: float | None,
    previous_at: float | None,
    caching_seen: bool,
) -> Billing:
    """``entry``'s billing, given what its conversation's previous request left (its direct
    prompt and time, whether the cache was used): the same for every kind of ledger."""
    usage = entry.usage
    if usage is None:
        return Billing(0.0, 0.0, 0.0, previous_prompt, previous_at, caching_seen)
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
    return Billing(
        usage.billed_input,
        estimate.billed_input,
        estimate.prompt_tokens,
        estimate.prompt_tokens,
        entry.at,
        caching_seen,
    )
