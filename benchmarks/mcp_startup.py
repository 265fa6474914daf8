"""Time from a cold ``tomc mcp`` start to its ``initialize`` and ``tools/list`` replies.

``python -m benchmarks.mcp_startup [--runs 10] [-- COMMAND ...]`` starts the server (default:
``tomc mcp`` beside this interpreter) ``runs`` times, sends ``initialize``, ``initialized`` and
``tools/list`` at once, and prints the median seconds to each reply (Claude Code's ``claude -p``
waits at most 2 s for both before its first model request).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MESSAGES = [
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
]


def once(command: list[str], home: str) -> tuple[float, float]:
    started = time.perf_counter()
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TOMC_HOME": home},
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in MESSAGES))
    process.stdin.flush()
    times = {}
    while len(times) < 2:
        line = process.stdout.readline()
        if not line:
            raise RuntimeError("the server closed its output")
        times[json.loads(line)["id"]] = time.perf_counter() - started
    process.stdin.close()
    process.wait(timeout=30)
    return times[0], times[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("command", nargs="*")
    args = parser.parse_args()
    command = args.command or [str(Path(sys.executable).parent / "tomc"), "mcp"]
    with tempfile.TemporaryDirectory() as home:
        once(command, home)  # warm the disk cache
        runs = [once(command, home) for _ in range(args.runs)]
    init = statistics.median(r[0] for r in runs)
    tools = statistics.median(r[1] for r in runs)
    print(
        f"{' '.join(command)}: initialize {init:.3f} s, tools/list {tools:.3f} s "
        f"(median of {len(runs)})"
    )


if __name__ == "__main__":
    main()
