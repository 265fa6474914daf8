"""benchmarks.data: each data set verified by its checksum before it is put in place, copied
from a local folder or downloaded over real HTTP (a loopback server stands in for the mirror)."""

from __future__ import annotations

import functools
import hashlib
import http.server
import threading
from pathlib import Path

import pytest

from benchmarks import data


@pytest.fixture
def one_data_set(monkeypatch: pytest.MonkeyPatch) -> bytes:
    content = b'{"conversations": []}\n'
    fake = data.DataSet(
        "sample.json", hashlib.sha256(content).hexdigest(), "a test", "none", None, "tests"
    )
    monkeypatch.setattr(data, "DATA_SETS", (fake,))
    return content


def test_the_real_data_sets_name_their_source_licence_and_checksum() -> None:
    for entry in data.DATA_SETS:
        assert entry.source and entry.licence and len(entry.sha256) == 64
    assert {entry.name for entry in data.DATA_SETS} == {
        "locomo10.json",
        "agent_trajectories.jsonl.gz",
    }


def test_copy_verifies_then_puts_in_place(tmp_path: Path, one_data_set: bytes, capsys) -> None:
    source, target = tmp_path / "from", tmp_path / "data"
    source.mkdir()
    (source / "sample.json").write_bytes(one_data_set)
    assert data.main(["copy", str(source), "--folder", str(target)]) == 0
    assert (target / "sample.json").read_bytes() == one_data_set
    assert "sample.json: ok" in capsys.readouterr().out


def test_a_copy_that_differs_is_refused_and_nothing_is_written(
    tmp_path: Path, one_data_set: bytes, capsys
) -> None:
    source, target = tmp_path / "from", tmp_path / "data"
    source.mkdir()
    (source / "sample.json").write_bytes(one_data_set + b" ")
    assert data.main(["--folder", str(target), "copy", str(source)]) == 2
    assert "is not the sample.json the figures were measured on" in capsys.readouterr().err
    assert not target.exists() or not list(target.iterdir())


def test_fetch_downloads_from_a_mirror_and_verifies(tmp_path: Path, one_data_set: bytes) -> None:
    served = tmp_path / "mirror"
    served.mkdir()
    (served / "sample.json").write_bytes(one_data_set)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        mirror = f"http://127.0.0.1:{server.server_address[1]}/"
        target = tmp_path / "data"
        assert data.main(["fetch", "--mirror", mirror, "--folder", str(target)]) == 0
        assert (target / "sample.json").read_bytes() == one_data_set
        (served / "sample.json").write_bytes(b"tampered")
        with pytest.raises(data.DataError, match="sha256"):
            data.fetch(target, mirror)
        assert (target / "sample.json").read_bytes() == one_data_set  # the good copy stays
    finally:
        server.shutdown()
        server.server_close()


def test_a_missing_file_is_reported_not_raised(tmp_path: Path, one_data_set: bytes, capsys) -> None:
    assert data.main(["--folder", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "sample.json: missing" in out and "copy FOLDER" in out
