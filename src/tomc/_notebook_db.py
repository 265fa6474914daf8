"""The notebook store's SQLite file: its location, permissions, schema and transactions.

Notebooks hold transcripts, so on POSIX the folder is created private (0700) and the database
file (0600) before SQLite opens it; SQLite gives its -wal and -shm files the database's mode.
An unusable location (a file where the folder should be, no permission, a file that is not a
database) is a :class:`~tomc._core.errors.NotebookStoreError` naming the path and what to do.

Several processes (for example two MCP servers started by different hosts) may share one store.
The database runs in WAL mode and every write takes SQLite's write lock up front
(``BEGIN IMMEDIATE``), so concurrent writes are serialised instead of lost.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from ._core.errors import NotebookStoreError
from ._home import HOME_ENV

__all__ = ["DB_FILENAME", "MIGRATIONS", "SCHEMA_VERSION", "NotebookDatabase"]

DB_FILENAME = "notebooks.sqlite3"

# Each migration moves the schema from version (index) to version (index + 1). Append only:
# an existing store replays exactly the steps it has not seen, inside one write transaction.
MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (
        """CREATE TABLE notebooks (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        )""",
        """CREATE TABLE entries (
            id INTEGER PRIMARY KEY,
            notebook_id INTEGER NOT NULL REFERENCES notebooks(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            body BLOB NOT NULL,
            chars INTEGER NOT NULL,
            size_bytes INTEGER NOT NULL,
            sha256 TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (notebook_id, seq)
        )""",
    ),
    (
        # Fingerprints (hashes only, never the text) of memories compiled by TOMC, so a memory
        # pasted back into notebook_save is refused even by another process or after a restart.
        """CREATE TABLE compiled_fingerprints (
            sha256 TEXT PRIMARY KEY,
            created_at TEXT NOT NULL
        )""",
    ),
)
SCHEMA_VERSION = len(MIGRATIONS)


class NotebookDatabase:
    """The SQLite file ``home / notebooks.sqlite3``, created and migrated on first use.

    Every :meth:`connect` opens its own connection, so one object is safe to use from several
    threads and several objects may share a file.
    """

    def __init__(self, home: Path, *, busy_timeout_s: float = 60.0) -> None:
        self.home = home
        self.path = home / DB_FILENAME
        self._busy_timeout_s = busy_timeout_s
        self._schema_ready = False
        self._schema_lock = threading.Lock()
        self._location_ready = False

    def _prepare_location(self) -> None:
        """Create the folder (0700) and the database file (0600) before SQLite opens it.

        SQLite creates the -wal and -shm files with the database file's mode, so they are
        private too. A store left readable by an older version is made private on first use.
        """
        if self._location_ready:
            return
        home = self.home
        if home.exists() and not home.is_dir():
            raise NotebookStoreError(
                f"cannot use {home} for notebooks: it is a file, not a folder; set {HOME_ENV} "
                "(or --home) to a folder"
            )
        try:
            if not home.is_dir():
                home.mkdir(mode=0o700, parents=True, exist_ok=True)
                if os.name == "posix":
                    os.chmod(home, 0o700)  # the umask can only take bits away; be exact
            if os.name == "posix":
                # Another process may create it first; then SQLite opens that one.
                with suppress(FileExistsError):
                    os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
                owner = os.getuid()
                for path in (self.path, *(Path(f"{self.path}{end}") for end in ("-wal", "-shm"))):
                    if path.exists():
                        info = path.stat()
                        if info.st_uid == owner and info.st_mode & 0o077:
                            os.chmod(path, 0o600)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise NotebookStoreError(
                f"cannot create the notebook store {self.path}: {reason}; set {HOME_ENV} "
                "(or --home) to a folder you can write"
            ) from exc
        self._location_ready = True

    def _store_error(self, exc: sqlite3.Error) -> NotebookStoreError:
        text = str(exc)
        if "not a database" in text or "malformed" in text:
            problem = f"is not a readable notebook database ({text})"
            advice = f"move the file aside, or set {HOME_ENV} (or --home) to another folder"
        elif "unable to open" in text or "readonly" in text or "read-only" in text:
            problem = f"cannot be opened for writing ({text})"
            advice = f"check the permissions of {self.home}, or set {HOME_ENV} to another folder"
        elif "locked" in text or "busy" in text:
            problem = f"stayed locked by another process ({text})"
            advice = "try again when the other TOMC process has finished writing"
        else:
            problem = f"failed ({text})"
            advice = f"check the file, or set {HOME_ENV} (or --home) to another folder"
        return NotebookStoreError(f"the notebook store {self.path} {problem}; {advice}")

    def _open(self) -> sqlite3.Connection:
        self._prepare_location()
        # Autocommit mode: transactions are opened explicitly with BEGIN IMMEDIATE below.
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout_s, isolation_level=None)
        try:
            conn.execute("PRAGMA foreign_keys = ON")
            self._enable_wal(conn)
            # FULL makes each committed append durable across power loss, not just crashes.
            conn.execute("PRAGMA synchronous = FULL")
        except BaseException:
            conn.close()
            raise
        return conn

    def _enable_wal(self, conn: sqlite3.Connection) -> None:
        # Switching a brand-new file to WAL needs a brief exclusive lock; when several processes
        # open a fresh store at once the switch can report "locked" even with a busy timeout.
        for attempt in range(50):
            try:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                time.sleep(0.02 * (attempt + 1))
                continue
            if str(mode).lower() == "wal":
                return
            time.sleep(0.02 * (attempt + 1))
        raise NotebookStoreError(
            f"could not switch the notebook store {self.path} to WAL mode; "
            f"check that the directory is writable and on a local file system"
        )

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        # Every SQLite failure, opening or in a statement, becomes a NotebookStoreError that
        # names the file: a corrupt or unreadable store must not surface as a traceback.
        try:
            conn = self._open()
        except sqlite3.Error as exc:
            raise self._store_error(exc) from exc
        try:
            if not self._schema_ready:
                with self._schema_lock:
                    if not self._schema_ready:
                        self._migrate(conn)
                        self._schema_ready = True
            yield conn
        except sqlite3.Error as exc:
            raise self._store_error(exc) from exc
        finally:
            conn.close()

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds SQLite's write lock from its first statement."""
        with self.connect() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _migrate(self, conn: sqlite3.Connection) -> None:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if version == SCHEMA_VERSION:
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Re-read under the lock: another process may have migrated in the meantime.
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise NotebookStoreError(
                    f"the notebook store {self.path} has schema version {version}, newer than "
                    f"this TOMC understands ({SCHEMA_VERSION}); upgrade tomc or set "
                    f"{HOME_ENV} to another directory"
                )
            for steps in MIGRATIONS[version:]:
                for statement in steps:
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def schema_version(self) -> int:
        """The schema version of the database file (after any migration this store ran)."""
        with self.connect() as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])
