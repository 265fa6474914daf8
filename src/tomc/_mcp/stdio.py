"""``tomc mcp`` over stdio, answering the handshake before the ``mcp`` SDK is loaded.

Hosts give a starting server little time: ``claude -p`` (Claude Code 2.1.197) waits at most
2 seconds (its headless MCP pre-wait) for ``initialize`` *and* ``tools/list`` before its first
model request, and Codex 0.171's code mode offers whatever tools are ready when the model calls
them. Importing the SDK alone takes about half a second (several seconds on a loaded machine),
so this front answers ``initialize``, ``ping`` and ``tools/list`` itself from
``manifest.json`` (the SDK server's own answers, written by :func:`write_manifest` and
checked against the live server by the tests), while a background thread imports the SDK and
builds the server. The first other message hands the connection over: the SDK server is
replayed the ``initialize`` request (its reply is dropped: the host already has ours) and the
``initialized`` notification, then reads everything else from stdin itself.

Nothing here imports the SDK, pydantic or the compiler at module level.
"""

from __future__ import annotations

import json
import sys
import threading
from importlib import resources
from pathlib import Path
from typing import IO, Any

__all__ = ["MANIFEST", "build_manifest", "serve", "write_manifest"]

MANIFEST = "manifest.json"
_FAST = ("initialize", "ping", "tools/list")


def _load_manifest() -> dict[str, Any] | None:
    try:
        return json.loads(resources.files(__package__).joinpath(MANIFEST).read_text("utf-8"))
    except (OSError, ValueError):
        return None


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("tomc")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class _Replay:
    """The SDK server's stdin: the replayed handshake first, then the real stream."""

    def __init__(self, first: list[bytes], stream: IO[bytes]) -> None:
        self._first = list(first)
        self._stream = stream

    def readline(self) -> str:
        line = self._first.pop(0) if self._first else self._stream.readline()
        return line.decode("utf-8", "replace")


class _Out:
    """The SDK server's stdout: drops its reply to the replayed ``initialize``."""

    def __init__(self, stream: IO[bytes], lock: threading.Lock, drop_id: Any) -> None:
        self._stream, self._lock, self._drop = stream, lock, drop_id
        self._buffer = ""

    def write(self, text: str) -> int:
        self._buffer += text
        while "\n" in self._buffer:
            line, self._buffer = self._buffer.split("\n", 1)
            if self._drop is not None and _reply_id(line) == self._drop:
                self._drop = None
                continue
            with self._lock:
                self._stream.write(line.encode("utf-8") + b"\n")
                self._stream.flush()
        return len(text)

    def flush(self) -> None:
        pass


def _reply_id(line: str) -> Any:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if isinstance(message, dict) and "method" not in message:
        return message.get("id")
    return None


class _Loader:
    """Imports the SDK and builds the server in a background thread."""

    def __init__(self, home: str | None) -> None:
        self.server: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._load, args=(home,), daemon=True)
        self._thread.start()

    def _load(self, home: str | None) -> None:
        try:
            from .._notebooks import NotebookStore
            from .server import create_server

            self.server = create_server(NotebookStore(home))
        except BaseException as exc:  # reported when the server is needed
            self.error = exc

    def get(self) -> Any:
        self._thread.join()
        if self.error is not None:
            raise self.error
        return self.server


def _answer(manifest: dict[str, Any], message: dict[str, Any]) -> dict[str, Any] | None:
    """Our reply to a handshake message, or ``None`` when the SDK must answer it."""
    method = message.get("method")
    if method == "ping":
        return {"jsonrpc": "2.0", "id": message.get("id"), "result": {}}
    versions = manifest["versions"]
    if method == "initialize":
        asked = (message.get("params") or {}).get("protocolVersion")
        version = asked if asked in versions else manifest["fallback"]
        result = json.loads(json.dumps(versions[version]["initialize"]))
        result["protocolVersion"] = version
        result.setdefault("serverInfo", {})["version"] = _version()
        return {"jsonrpc": "2.0", "id": message.get("id"), "result": result}
    if method == "tools/list" and not (message.get("params") or {}).get("cursor"):
        return None  # answered by the caller, which knows the negotiated version
    return None


def serve(home: str | None = None) -> None:
    """Serve MCP over stdin/stdout until the client closes the connection."""
    manifest = _load_manifest()
    if manifest is None:  # a source tree without the manifest: the SDK answers everything
        from .._notebooks import NotebookStore
        from .server import run_stdio

        run_stdio(NotebookStore(home))
        return
    loader = _Loader(home)
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    lock = threading.Lock()
    replay: list[bytes] = []
    init_id: Any = None
    version = manifest["fallback"]
    pending: bytes | None = None
    while True:
        line = stdin.readline()
        if not line:
            return
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        method = message.get("method") if isinstance(message, dict) else None
        reply: dict[str, Any] | None = None
        if method == "tools/list" and init_id is not None:
            if not (message.get("params") or {}).get("cursor"):
                reply = {
                    "jsonrpc": "2.0",
                    "id": message.get("id"),
                    "result": manifest["versions"][version]["tools/list"],
                }
        elif method in _FAST and (method != "initialize" or init_id is None):
            reply = _answer(manifest, message)
            if method == "initialize" and reply is not None:
                init_id, version = message.get("id"), reply["result"]["protocolVersion"]
                replay.append(line)
        elif method == "notifications/initialized" and init_id is not None:
            replay.append(line)
            continue
        elif isinstance(method, str) and method.startswith("notifications/"):
            continue
        if reply is None:
            pending = line
            break
        with lock:
            stdout.write(
                json.dumps(reply, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
            )
            stdout.flush()
    _hand_over(loader.get(), [*replay, pending], stdin, stdout, lock, init_id)


def _hand_over(
    server: Any,
    first: list[bytes],
    stdin: IO[bytes],
    stdout: IO[bytes],
    lock: threading.Lock,
    init_id: Any,
) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    reader = anyio.wrap_file(_Replay(first, stdin))  # type: ignore[arg-type]
    writer = anyio.wrap_file(_Out(stdout, lock, init_id if first else None))  # type: ignore[arg-type]
    lowlevel = server._lowlevel_server

    async def main() -> None:
        async with stdio_server(stdin=reader, stdout=writer) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    anyio.run(main)


# ---------------------------------------------------------------------- the manifest


def build_manifest() -> dict[str, Any]:
    """The SDK server's own replies to ``initialize`` and ``tools/list``, per protocol version
    the handshake accepts, and the version it answers an unknown one with."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    from .._notebooks import NotebookStore
    from .server import create_server

    def exchange(protocol: str) -> list[dict[str, Any]]:
        lines = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": protocol,
                    "capabilities": {},
                    "clientInfo": {"name": "manifest", "version": "1"},
                },
            },
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        ]
        feed = [json.dumps(m).encode() + b"\n" for m in lines]
        out: list[str] = []

        class Sink:
            def write(self, text: str) -> int:
                out.append(text)
                return len(text)

            def flush(self) -> None:
                pass

        class Source:
            def readline(self) -> str:
                while len("".join(out).splitlines()) < 2 and not feed:
                    import time

                    time.sleep(0.01)
                return feed.pop(0).decode() if feed else ""

        server = create_server(NotebookStore(Path("/nonexistent-tomc-manifest")))
        lowlevel = server._lowlevel_server

        async def main() -> None:
            async with stdio_server(
                stdin=anyio.wrap_file(Source()),  # type: ignore[arg-type]
                stdout=anyio.wrap_file(Sink()),  # type: ignore[arg-type]
            ) as (read_stream, write_stream):
                await lowlevel.run(
                    read_stream, write_stream, lowlevel.create_initialization_options()
                )

        anyio.run(main)
        return [json.loads(line) for line in "".join(out).splitlines()]

    versions: dict[str, Any] = {}
    for protocol in HANDSHAKE_PROTOCOL_VERSIONS:
        init, tools = exchange(protocol)
        result = init["result"]
        result["serverInfo"].pop("version", None)
        versions[result["protocolVersion"]] = {"initialize": result, "tools/list": tools["result"]}
    fallback = exchange("1900-01-01")[0]["result"]["protocolVersion"]
    return {"fallback": fallback, "versions": versions}


def write_manifest(path: str | Path | None = None) -> Path:
    """Write :func:`build_manifest` to the package (``python -m tomc._mcp.stdio``)."""
    target = Path(path) if path else Path(__file__).with_name(MANIFEST)
    target.write_text(json.dumps(build_manifest(), indent=1, ensure_ascii=False) + "\n", "utf-8")
    return target


if __name__ == "__main__":
    print(write_manifest())
