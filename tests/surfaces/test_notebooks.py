"""The notebook store: verbatim text, ordering, migrations and concurrent writers."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import stat
import subprocess
import sys
import textwrap
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from tomc._cli import main as cli_main
from tomc._core.errors import (
    InputTooLargeError,
    InvalidHistoryError,
    InvalidOptionError,
    NotebookStoreError,
    TomcError,
)
from tomc._notebooks import (
    DB_FILENAME,
    MIGRATIONS,
    SCHEMA_VERSION,
    CompiledMemoryRefusedError,
    NotebookNotFoundError,
    NotebookStore,
    default_home,
    join_entries,
)

FIXED = datetime(2025, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Never touch the real user data directory, even through default_home()."""
    home = tmp_path / "tomc-home"
    monkeypatch.setenv("TOMC_HOME", str(home))
    return home


@pytest.fixture
def store(tmp_path: Path) -> NotebookStore:
    return NotebookStore(tmp_path / "store")


def test_default_home_follows_tomc_home(_isolated_home: Path) -> None:
    assert default_home() == _isolated_home
    store = NotebookStore()
    store.append("n", "a = 1")
    assert (_isolated_home / DB_FILENAME).is_file()


def test_default_home_without_env_is_platform_user_data_dir(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import platformdirs

    monkeypatch.delenv("TOMC_HOME")
    assert default_home() == Path(platformdirs.user_data_dir("tomc", appauthor=False))


def test_database_is_wal_and_versioned(store: NotebookStore) -> None:
    store.append("n", "x")
    conn = sqlite3.connect(store.path)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        conn.close()
    assert store.schema_version() == SCHEMA_VERSION == len(MIGRATIONS)


TRICKY_TEXTS = [
    "plain line",
    "windows\r\nline endings\r\n",
    "old mac\rline\r",
    "  leading and trailing spaces  \n\n\n",
    "tabs\tand\u00a0nbsp and \u2028 line separator",
    "中文 history: 部署目标 = 上海\n",
    "emoji 🧪 and combining e\u0301",
    "no final newline",
]


@pytest.mark.parametrize("text", TRICKY_TEXTS)
def test_text_round_trips_byte_identically(store: NotebookStore, text: str) -> None:
    saved = store.append("nb", text)
    (entry,) = store.entries("nb")
    assert entry.text == text
    assert entry.text.encode("utf-8") == text.encode("utf-8")
    assert entry.chars == len(text) == saved.chars
    assert entry.size_bytes == len(text.encode("utf-8")) == saved.size_bytes
    assert store.text("nb") == text
    # A fresh store object (a restarted process) reads the same bytes.
    assert NotebookStore(store.home).text("nb") == text


def test_entries_keep_order_timestamps_and_sizes(tmp_path: Path) -> None:
    store = NotebookStore(tmp_path, clock=lambda: FIXED)
    first = store.append("log", "deploy_target = staging")
    second = store.append("log", "deploy_target = prod\n")
    third = store.append("log", "owner = 張")
    assert [first.seq, second.seq, third.seq] == [1, 2, 3]
    entries = store.entries("log")
    assert [e.text for e in entries] == [
        "deploy_target = staging",
        "deploy_target = prod\n",
        "owner = 張",
    ]
    assert all(e.created_at == "2025-01-02T03:04:05.678901+00:00" for e in entries)
    assert entries[2].size_bytes == len("owner = 張".encode()) == entries[2].chars + 2
    (info,) = store.list()
    assert info.name == "log"
    assert info.entries == 3
    assert info.chars == sum(e.chars for e in entries)
    assert info.size_bytes == sum(e.size_bytes for e in entries)
    assert info.created_at == info.updated_at == "2025-01-02T03:04:05.678901+00:00"


def test_join_inserts_newline_only_where_lines_would_fuse() -> None:
    assert join_entries(["a"]) == "a"
    assert join_entries(["a", "b"]) == "a\nb"
    assert join_entries(["a\n", "b"]) == "a\nb"
    assert join_entries(["a\n\n", "b\n"]) == "a\n\nb\n"
    assert join_entries([]) == ""


def test_replace_leaves_exactly_the_new_text(store: NotebookStore) -> None:
    store.append("nb", "old 1")
    store.append("nb", "old 2")
    entry = store.replace("nb", "new only\r\n")
    assert entry.seq == 1
    assert store.text("nb") == "new only\r\n"
    assert store.info("nb").entries == 1


def test_updated_at_moves_on_append(tmp_path: Path) -> None:
    times = iter([FIXED, FIXED.replace(year=2026)])
    store = NotebookStore(tmp_path, clock=lambda: next(times))
    store.append("nb", "a")
    store.append("nb", "b")
    info = store.info("nb")
    assert info.created_at.startswith("2025-")
    assert info.updated_at.startswith("2026-")


def test_list_is_sorted_and_delete_removes_everything(store: NotebookStore) -> None:
    store.append("zeta", "z")
    store.append("alpha", "a1")
    store.append("alpha", "a2")
    assert [i.name for i in store.list()] == ["alpha", "zeta"]
    assert store.delete("alpha") == 2
    assert [i.name for i in store.list()] == ["zeta"]
    with pytest.raises(NotebookNotFoundError, match="existing notebooks: 'zeta'"):
        store.entries("alpha")
    # Recreating the name starts a fresh sequence: nothing of the old notebook survives.
    assert store.append("alpha", "again").seq == 1
    assert store.text("alpha") == "again"


def test_unknown_name_says_what_exists(store: NotebookStore) -> None:
    with pytest.raises(NotebookNotFoundError, match="no notebooks yet"):
        store.text("missing")
    store.append("present", "x")
    with pytest.raises(NotebookNotFoundError, match=r"no notebook named 'missing'.*'present'"):
        store.delete("missing")
    assert issubclass(NotebookNotFoundError, TomcError)


@pytest.mark.parametrize("name", ["", " x", "a/b", "../etc", "x" * 65, "-lead", "a b"])
def test_bad_names_are_refused_with_the_rule(store: NotebookStore, name: str) -> None:
    with pytest.raises(InvalidOptionError, match="letters, digits"):
        store.append(name, "text")


@pytest.mark.parametrize("name", ["a", "Project-1", "notes_2025.v2", "x" * 64])
def test_good_names_are_accepted(store: NotebookStore, name: str) -> None:
    store.append(name, "text")
    assert store.text(name) == "text"


@pytest.mark.parametrize("text", ["", "   \n\t"])
def test_blank_text_is_refused(store: NotebookStore, text: str) -> None:
    with pytest.raises(InvalidHistoryError, match="nothing to save"):
        store.append("nb", text)
    assert store.list() == ()


def test_unpaired_surrogate_is_refused(store: NotebookStore) -> None:
    with pytest.raises(InvalidHistoryError, match="not valid Unicode"):
        store.append("nb", "bad \ud800 text")


def test_nul_bytes_are_refused_because_recall_could_never_compile_them(
    store: NotebookStore,
) -> None:
    with pytest.raises(InvalidHistoryError, match="NUL byte at character 4"):
        store.append("nb", "abc \x00 def")
    assert store.list() == ()


@pytest.mark.parametrize(
    ("entries", "fragment"),
    [
        (['[{"a": 1}]'], "no 'role'"),
        (['[{"role": "user", "content": [{"type": "image_url"}]}]'], "only text parts"),
        (['[{"role": "user", "content": "\\udc80"}]'], "unpaired surrogate"),
        (['[{"a":', "1}]"], "no 'role'"),  # each entry alone is text; together, a chat list
    ],
)
def test_text_that_could_not_be_recalled_is_refused(
    store: NotebookStore, entries: list[str], fragment: str
) -> None:
    for text in entries[:-1]:
        store.append("nb", text)
    with pytest.raises(InvalidHistoryError, match="could not be recalled") as refused:
        store.append("nb", entries[-1])
    assert fragment in str(refused.value)
    # Nothing of the refused write is left behind.
    kept = [e.text for e in store.entries("nb")] if len(entries) > 1 else []
    assert kept == entries[:-1]


def test_unknown_mode_is_refused(store: NotebookStore) -> None:
    with pytest.raises(InvalidOptionError, match="'append' or 'replace'"):
        store.save("nb", "text", mode="prepend")


def test_size_cap_counts_the_whole_notebook(tmp_path: Path) -> None:
    store = NotebookStore(tmp_path, max_chars=20)
    store.append("nb", "0123456789")  # 10
    store.append("nb", "012345678")  # 10 + separator + 9 = 20
    with pytest.raises(InputTooLargeError, match="new notebook"):
        store.append("nb", "x")
    assert store.info("nb").entries == 2  # the refused write left nothing behind
    store.replace("nb", "short")  # replace is measured without the old entries
    assert store.text("nb") == "short"


def test_default_cap_is_the_interactive_limit(store: NotebookStore) -> None:
    from tomc._core.sources import MAX_INTERACTIVE_CHARS

    assert store.max_chars == MAX_INTERACTIVE_CHARS
    with pytest.raises(InputTooLargeError):
        store.append("nb", "x" * (MAX_INTERACTIVE_CHARS + 1))


def test_compiled_memory_is_refused_as_source(store: NotebookStore) -> None:
    memory = "STATE deploy_target = prod [u3]\nsource u7: the archive moved"
    store.remember_compiled(memory)
    assert store.is_compiled(memory)
    assert store.is_compiled(f"\n  {memory}\n")
    with pytest.raises(CompiledMemoryRefusedError, match="original"):
        store.append("nb", memory + "\n")
    # The fingerprint is shared through the file: another process (store) refuses it too.
    with pytest.raises(CompiledMemoryRefusedError):
        NotebookStore(store.home).replace("nb", memory)
    # Original text that merely contains a line of the memory is still accepted.
    store.append("nb", "deploy_target = prod")
    assert store.text("nb") == "deploy_target = prod"
    # Only the hash is stored, never the memory text.
    raw = b"".join(path.read_bytes() for path in store.home.glob(DB_FILENAME + "*"))
    assert raw
    assert b"the archive moved" not in raw


def test_export_carries_every_entry(tmp_path: Path) -> None:
    store = NotebookStore(tmp_path, clock=lambda: FIXED)
    store.append("b", "two\r\n")
    store.append("a", "one")
    data = store.export()
    assert data["format"] == "tomc-notebooks"
    assert data["schema_version"] == SCHEMA_VERSION
    assert [n["name"] for n in data["notebooks"]] == ["a", "b"]
    assert data["notebooks"][1]["entries"][0]["text"] == "two\r\n"
    assert json.loads(json.dumps(data)) == data
    only_b = store.export(["b"])
    assert [n["name"] for n in only_b["notebooks"]] == ["b"]
    with pytest.raises(NotebookNotFoundError):
        store.export(["nope"])


def _make_v1_store(path: Path) -> None:
    """A database as the first schema version left it, with one entry written by hand."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in MIGRATIONS[0]:
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
    conn.execute("INSERT INTO notebooks VALUES (1, 'legacy', 't0', 't0')")
    body = b"kept = yes\n"
    conn.execute(
        "INSERT INTO entries VALUES (1, 1, 1, ?, 11, 11, 'h', 't0')",
        (body,),
    )
    conn.close()


def test_old_schema_is_migrated_in_place(tmp_path: Path) -> None:
    _make_v1_store(tmp_path / DB_FILENAME)
    store = NotebookStore(tmp_path)
    assert store.text("legacy") == "kept = yes\n"
    assert store.schema_version() == SCHEMA_VERSION
    store.remember_compiled("memory text")  # a table the first version did not have
    assert store.is_compiled("memory text")


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    (tmp_path / DB_FILENAME).parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(tmp_path / DB_FILENAME)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(TomcError, match="newer than"):
        NotebookStore(tmp_path).list()


WRITER = textwrap.dedent(
    """
    import sys
    from tomc._notebooks import NotebookStore

    home, writer, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = NotebookStore(home)
    # Start barrier: report ready, then wait for the parent's go, so the writers really overlap
    # (process start-up alone would otherwise serialise them).
    print("ready", flush=True)
    sys.stdin.readline()
    for index in range(count):
        store.append("shared", f"writer {writer} entry {index}")
    """
)


def test_concurrent_appends_from_several_processes_lose_nothing(tmp_path: Path) -> None:
    """N processes x M appends into one fresh store: all present, each writer's in order."""
    writers, appends = 4, 40
    home = tmp_path / "shared-home"
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(home), str(writer), str(appends)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for writer in range(writers)
    ]
    for process in processes:
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    for process in processes:
        _, stderr = process.communicate()
        assert process.returncode == 0, stderr

    entries = NotebookStore(home).entries("shared")
    assert len(entries) == writers * appends
    assert [e.seq for e in entries] == list(range(1, writers * appends + 1))
    texts = [e.text for e in entries]
    assert len(set(texts)) == len(texts)
    for writer in range(writers):
        mine = [t for t in texts if t.startswith(f"writer {writer} ")]
        assert mine == [f"writer {writer} entry {index}" for index in range(appends)]


# -- where the store lives -----------------------------------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_store_is_private_to_its_owner(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)  # the usual umask, which made the file world-readable
    try:
        home = tmp_path / "new" / "home"
        store = NotebookStore(home)
        store.append("transcript", "user: my password hint is ...")
        # While another connection reads, SQLite keeps its -wal and -shm files.
        reader = sqlite3.connect(store.path)
        try:
            reader.execute("SELECT COUNT(*) FROM entries").fetchone()
            store.append("transcript", "more")
            assert _mode(home) == 0o700
            assert _mode(store.path) == 0o600
            for end in ("-wal", "-shm"):
                assert _mode(Path(f"{store.path}{end}")) == 0o600, end
        finally:
            reader.close()
    finally:
        os.umask(old_umask)


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_a_store_left_readable_is_made_private(tmp_path: Path) -> None:
    NotebookStore(tmp_path).append("n", "x")
    os.chmod(tmp_path / DB_FILENAME, 0o644)
    assert NotebookStore(tmp_path).text("n") == "x"
    assert _mode(tmp_path / DB_FILENAME) == 0o600


def test_a_file_as_home_is_a_clear_error(tmp_path: Path) -> None:
    home = tmp_path / "a-file"
    home.write_text("not a folder")
    with pytest.raises(NotebookStoreError, match="it is a file, not a folder; set TOMC_HOME"):
        NotebookStore(home).list()
    below = home / "sub"
    with pytest.raises(
        NotebookStoreError, match=re.escape(f"cannot create the notebook store {below}")
    ):
        NotebookStore(below).append("n", "x")


def test_a_corrupt_store_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / DB_FILENAME).write_bytes(b"not SQLite at all " * 200)
    with pytest.raises(NotebookStoreError, match="is not a readable notebook database"):
        NotebookStore(tmp_path).append("n", "x")
    assert issubclass(NotebookStoreError, TomcError)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores file permissions")
def test_an_unwritable_home_is_a_clear_error(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(NotebookStoreError, match="Permission denied"):
        NotebookStore(locked / "home").list()


def test_cli_names_an_unusable_home_without_a_traceback(tmp_path: Path) -> None:
    home = tmp_path / "a-file"
    home.write_text("x")
    result = CliRunner().invoke(cli_main, ["notebook", "list"], env={"TOMC_HOME": str(home)})
    assert result.exit_code == 3  # the environment, not the request, is the problem
    assert f"cannot use {home} for notebooks" in result.output
    assert "Traceback" not in result.output
