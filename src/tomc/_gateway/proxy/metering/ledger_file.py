"""The usage ledger's SQLite file: where it lives, its schema, and opening it.

``<TOMC home>/gateway/usage.sqlite3``: folder 0700, file 0600, WAL journal. A file written by a
newer TOMC (a higher ``user_version``) is refused rather than misread. A table added since a
file was made (``gateway_errors``) is created when the gateway opens it; older TOMCs leave it
alone, so the schema version stays.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from pathlib import Path

__all__ = ["LEDGER_FILE", "SCHEMA_VERSION", "connect_file", "connect_memory", "ledger_path"]

LEDGER_FILE = "usage.sqlite3"
SCHEMA_VERSION = 1

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
CREATE TABLE IF NOT EXISTS gateway_errors (
    conversation TEXT NOT NULL,
    kind TEXT NOT NULL,
    count INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (conversation, kind)
);
CREATE TABLE IF NOT EXISTS minutes (
    minute INTEGER PRIMARY KEY,
    requests INTEGER NOT NULL DEFAULT 0,
    billed_input REAL NOT NULL DEFAULT 0,
    direct_input REAL NOT NULL DEFAULT 0
);
"""


def ledger_path(home: str | os.PathLike[str] | None = None) -> Path:
    """``<home>/gateway/usage.sqlite3``."""
    from ...settings import gateway_dir  # settings imports nothing from here; keep it that way

    return gateway_dir(home) / LEDGER_FILE


def connect_file(path: Path) -> sqlite3.Connection:
    """Open (creating it private if need be) the ledger file at ``path``, schema ready."""
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
        if version > SCHEMA_VERSION:
            raise sqlite3.DatabaseError(f"written by a newer TOMC (schema {version})")
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.executescript(_SCHEMA)
        connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    except BaseException:
        connection.close()
        raise
    return connection


def connect_memory() -> sqlite3.Connection:
    """A ledger kept in memory, for a run whose file cannot be opened."""
    connection = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    connection.row_factory = sqlite3.Row
    connection.executescript(_SCHEMA)
    return connection
