"""The notebook store: submitted source text kept verbatim in SQLite, shared by every surface.

A notebook is an ordered list of entries. Each entry is one piece of text exactly as it was
submitted (stored as its UTF-8 bytes, so recall is byte-identical), with its size and a UTC
timestamp. The store never holds compiled memory as a source: callers compile the stored
original text again for every task, and the store refuses text that is a memory it was told it
produced (see :meth:`NotebookStore.remember_compiled`), because a budgeted memory for one task
can omit evidence a later task needs.

Location: ``$TOMC_HOME/notebooks.sqlite3`` if ``TOMC_HOME`` is set, else
``notebooks.sqlite3`` in the platform's user data directory for ``tomc``. The file itself
(permissions, WAL, schema migrations) is :mod:`tomc._notebook_db`.

Several processes (for example two MCP servers started by different hosts) may share one store:
every write takes SQLite's write lock up front, so concurrent appends are serialised instead of
lost, and the per-notebook sequence number is assigned inside that lock.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ._core.errors import (
    CompiledMemoryRefusedError,
    InputTooLargeError,
    InvalidHistoryError,
    InvalidOptionError,
    NotebookNotFoundError,
    NotebookStoreError,
)
from ._core.sources import MAX_INTERACTIVE_CHARS
from ._home import default_home
from ._notebook_db import DB_FILENAME, MIGRATIONS, SCHEMA_VERSION, NotebookDatabase
from ._service import check_recallable

__all__ = [
    "DB_FILENAME",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "CompiledMemoryRefusedError",
    "NotebookEntry",
    "NotebookInfo",
    "NotebookNotFoundError",
    "NotebookStore",
    "NotebookStoreError",
    "default_home",
    "join_entries",
]

NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
NAME_RULE = "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
SaveMode = Literal["append", "replace"]
SAVE_MODES: tuple[str, ...] = ("append", "replace")
# Enough to recognise any memory a recent session could paste back, small enough to stay cheap.
MAX_FINGERPRINTS = 10_000


@dataclass(frozen=True, slots=True)
class NotebookEntry:
    """One saved piece of text, exactly as submitted.

    ``seq`` counts from 1 within the notebook in the order the store accepted the writes;
    ``chars`` and ``size_bytes`` are the length in code points and in UTF-8 bytes.
    """

    notebook: str
    seq: int
    text: str
    chars: int
    size_bytes: int
    sha256: str
    created_at: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "text": self.text,
            "chars": self.chars,
            "size_bytes": self.size_bytes,
            "sha256": self.sha256,
            "created_at": self.created_at,
        }


@dataclass(frozen=True, slots=True)
class NotebookInfo:
    """Summary of one notebook: entry count, total size and first/last write times."""

    name: str
    entries: int
    chars: int
    size_bytes: int
    created_at: str
    updated_at: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "entries": self.entries,
            "chars": self.chars,
            "size_bytes": self.size_bytes,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


def join_entries(texts: Sequence[str]) -> str:
    """The notebook's history: entries in order, a newline between two entries unless the
    earlier one already ends with one.

    The separator keeps the last line of one entry and the first line of the next from fusing
    into a single source line; an entry that already ends with a newline is left untouched, so
    a notebook holding one entry is exactly that entry.
    """
    parts: list[str] = []
    for index, text in enumerate(texts):
        if index and not parts[-1].endswith("\n"):
            parts.append("\n")
        parts.append(text)
    return "".join(parts)


def _fingerprint(text: str) -> str:
    # Whitespace at the ends is what copy-paste changes most often; the body must match exactly.
    return hashlib.sha256(text.strip().encode("utf-8", "surrogatepass")).hexdigest()


def _utc_iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


class NotebookStore:
    """SQLite-backed notebooks at ``home / notebooks.sqlite3`` (see :func:`default_home`).

    ``max_chars`` caps a notebook's total size (the interactive input limit by default) so that
    recalling it through MCP or the web never hits that limit; ``None`` means no cap. ``clock``
    returns the current time (tests pass a fixed one). Every call opens its own connection, so
    one store object is safe to use from several threads and several stores may share a file.
    """

    def __init__(
        self,
        home: str | os.PathLike[str] | None = None,
        *,
        max_chars: int | None = MAX_INTERACTIVE_CHARS,
        clock: Callable[[], datetime] | None = None,
        busy_timeout_s: float = 60.0,
    ) -> None:
        self.home = Path(home).expanduser() if home is not None else default_home()
        self._db = NotebookDatabase(self.home, busy_timeout_s=busy_timeout_s)
        self.path = self._db.path
        self.max_chars = max_chars
        self._clock = clock or (lambda: datetime.now(UTC))

    def __repr__(self) -> str:
        return f"NotebookStore({str(self.path)!r})"

    def schema_version(self) -> int:
        """The schema version of the database file (after any migration this store ran)."""
        return self._db.schema_version()

    # -- validation ------------------------------------------------------------------------

    @staticmethod
    def check_name(name: str) -> str:
        """Return ``name`` if it is a valid notebook name, else raise InvalidOptionError."""
        if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
            raise InvalidOptionError(f"notebook name {name!r} is not allowed: {NAME_RULE}")
        return name

    def _encode(self, text: str) -> bytes:
        if not isinstance(text, str):
            raise InvalidHistoryError(f"text must be a string, not {type(text).__name__}")
        if not text.strip():
            raise InvalidHistoryError("text is empty or only whitespace: there is nothing to save")
        nul = text.find("\x00")
        if nul >= 0:
            # The compiler refuses NUL as binary data, so such a notebook could never be recalled.
            raise InvalidHistoryError(
                f"text contains a NUL byte at character {nul}; notebooks keep text histories, "
                "so remove the NUL bytes (binary data cannot be compiled)"
            )
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidHistoryError(
                f"text is not valid Unicode (unpaired surrogate at character {exc.start}); "
                "send the text as proper UTF-8"
            ) from exc

    # -- writes ----------------------------------------------------------------------------

    def save(self, name: str, text: str, mode: str = "append") -> NotebookEntry:
        """Append ``text`` as a new entry, or (``mode="replace"``) make it the only entry."""
        if mode not in SAVE_MODES:
            raise InvalidOptionError(f"unknown save mode {mode!r}; use 'append' or 'replace'")
        self.check_name(name)
        body = self._encode(text)
        digest = hashlib.sha256(body).hexdigest()
        chars = len(text)
        now = _utc_iso(self._clock())
        with self._db.write() as conn:
            if conn.execute(
                "SELECT 1 FROM compiled_fingerprints WHERE sha256 = ?", (_fingerprint(text),)
            ).fetchone():
                raise CompiledMemoryRefusedError(
                    "this text is a memory compiled by TOMC, not original history; save the "
                    "original messages or documents instead and recall them for each task"
                )
            row = conn.execute("SELECT id FROM notebooks WHERE name = ?", (name,)).fetchone()
            if row is None:
                notebook_id = conn.execute(
                    "INSERT INTO notebooks (name, created_at, updated_at) VALUES (?, ?, ?)",
                    (name, now, now),
                ).lastrowid
            else:
                notebook_id = row[0]
                if mode == "replace":
                    conn.execute("DELETE FROM entries WHERE notebook_id = ?", (notebook_id,))
            earlier = [
                bytes(body).decode("utf-8")
                for (body,) in conn.execute(
                    "SELECT body FROM entries WHERE notebook_id = ? ORDER BY seq", (notebook_id,)
                )
            ]
            # Recall reads exactly this text, so the checks that recall makes are made here:
            # a notebook that was saved can always be recalled.
            history = join_entries([*earlier, text])
            if self.max_chars is not None and len(history) > self.max_chars:
                raise InputTooLargeError(
                    len(history),
                    self.max_chars,
                    f"notebook {name!r} would exceed it; save into a new notebook, or use "
                    "mode='replace' with a shorter text",
                    what="notebook",
                )
            try:
                check_recallable(history)
            except InvalidHistoryError as exc:
                raise InvalidHistoryError(
                    f"notebook {name!r} could not be recalled with this text: {exc}"
                ) from exc
            last_seq = conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM entries WHERE notebook_id = ?", (notebook_id,)
            ).fetchone()[0]
            seq = last_seq + 1
            conn.execute(
                "INSERT INTO entries (notebook_id, seq, body, chars, size_bytes, sha256, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (notebook_id, seq, body, chars, len(body), digest, now),
            )
            conn.execute("UPDATE notebooks SET updated_at = ? WHERE id = ?", (now, notebook_id))
        return NotebookEntry(name, seq, text, chars, len(body), digest, now)

    def append(self, name: str, text: str) -> NotebookEntry:
        """Add ``text`` as the next entry of notebook ``name`` (created if missing)."""
        return self.save(name, text, "append")

    def replace(self, name: str, text: str) -> NotebookEntry:
        """Make ``text`` the only entry of notebook ``name`` (created if missing)."""
        return self.save(name, text, "replace")

    def delete(self, name: str) -> int:
        """Delete notebook ``name`` and all its entries; return how many entries it had."""
        self.check_name(name)
        with self._db.write() as conn:
            row = conn.execute("SELECT id FROM notebooks WHERE name = ?", (name,)).fetchone()
            if row is None:
                raise self._not_found(conn, name)
            removed = conn.execute(
                "SELECT COUNT(*) FROM entries WHERE notebook_id = ?", (row[0],)
            ).fetchone()[0]
            conn.execute("DELETE FROM entries WHERE notebook_id = ?", (row[0],))
            conn.execute("DELETE FROM notebooks WHERE id = ?", (row[0],))
        return int(removed)

    def remember_compiled(self, memory: str) -> None:
        """Record that ``memory`` is compiled output, so that saving it later is refused.

        Only a hash is kept. A blank memory is ignored: refusing blank text is already the rule.
        """
        if not memory.strip():
            return
        now = _utc_iso(self._clock())
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO compiled_fingerprints (sha256, created_at) VALUES (?, ?) "
                "ON CONFLICT (sha256) DO UPDATE SET created_at = excluded.created_at",
                (_fingerprint(memory), now),
            )
            conn.execute(
                "DELETE FROM compiled_fingerprints WHERE rowid NOT IN (SELECT rowid FROM "
                "compiled_fingerprints ORDER BY created_at DESC, rowid DESC LIMIT ?)",
                (MAX_FINGERPRINTS,),
            )

    def is_compiled(self, text: str) -> bool:
        """Whether ``text`` (ignoring surrounding whitespace) was recorded as compiled memory."""
        with self._db.connect() as conn:
            return (
                conn.execute(
                    "SELECT 1 FROM compiled_fingerprints WHERE sha256 = ?", (_fingerprint(text),)
                ).fetchone()
                is not None
            )

    # -- reads -----------------------------------------------------------------------------

    def _not_found(self, conn: sqlite3.Connection, name: str) -> NotebookNotFoundError:
        names = [r[0] for r in conn.execute("SELECT name FROM notebooks ORDER BY name LIMIT 11")]
        if not names:
            known = (
                "the store has no notebooks yet; save some text first "
                "(tomc notebook save NAME FILE, or the MCP tool notebook_save)"
            )
        else:
            shown = ", ".join(map(repr, names[:10])) + (", ..." if len(names) > 10 else "")
            known = f"existing notebooks: {shown}"
        return NotebookNotFoundError(f"no notebook named {name!r}; {known}")

    def entries(self, name: str) -> tuple[NotebookEntry, ...]:
        """All entries of notebook ``name`` in order, each byte-identical to what was saved."""
        self.check_name(name)
        with self._db.connect() as conn:
            # One read transaction: the entries all come from the same committed snapshot.
            conn.execute("BEGIN")
            try:
                row = conn.execute("SELECT id FROM notebooks WHERE name = ?", (name,)).fetchone()
                if row is None:
                    raise self._not_found(conn, name)
                rows = conn.execute(
                    "SELECT seq, body, chars, size_bytes, sha256, created_at FROM entries "
                    "WHERE notebook_id = ? ORDER BY seq",
                    (row[0],),
                ).fetchall()
            finally:
                conn.execute("COMMIT")
        return tuple(
            NotebookEntry(name, seq, bytes(body).decode("utf-8"), chars, size, digest, created)
            for seq, body, chars, size, digest, created in rows
        )

    def text(self, name: str) -> str:
        """The notebook's history as one string (see :func:`join_entries`)."""
        return join_entries([entry.text for entry in self.entries(name)])

    def list(self) -> tuple[NotebookInfo, ...]:
        """Every notebook, sorted by name."""
        with self._db.connect() as conn:
            rows = conn.execute(
                "SELECT n.name, COUNT(e.id), COALESCE(SUM(e.chars), 0), "
                "COALESCE(SUM(e.size_bytes), 0), n.created_at, n.updated_at "
                "FROM notebooks n LEFT JOIN entries e ON e.notebook_id = n.id "
                "GROUP BY n.id ORDER BY n.name"
            ).fetchall()
        return tuple(NotebookInfo(*row) for row in rows)

    def info(self, name: str) -> NotebookInfo:
        """Summary of notebook ``name``."""
        self.check_name(name)
        for item in self.list():
            if item.name == name:
                return item
        with self._db.connect() as conn:
            raise self._not_found(conn, name)

    def export(self, names: Sequence[str] | None = None) -> dict[str, Any]:
        """A JSON-serialisable copy of the named notebooks (all if ``names`` is None)."""
        selected = [info.name for info in self.list()] if names is None else list(names)
        notebooks = []
        for name in selected:
            info = self.info(name)
            # "entries" is the list itself here, not the count that NotebookInfo carries.
            record = {**info.to_dict(), "entries": [e.to_dict() for e in self.entries(name)]}
            notebooks.append(record)
        return {
            "format": "tomc-notebooks",
            "schema_version": SCHEMA_VERSION,
            "notebooks": notebooks,
        }
