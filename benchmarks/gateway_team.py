"""A gateway for a team under load: the in-memory store against Redis, one process against three.

    python -m benchmarks.gateway_team [--conversations 200] [--tokens 100000] [--events 20]

Starts its own ``redis-server`` (Debian's package; no persistence) and the streaming upstream of
:mod:`benchmarks.gateway_load` on loopback, then, for each set-up (one ``tomc gateway serve``
process with the in-memory store; one on Redis; ``--workers 3`` on Redis), sends
``--conversations`` concurrent conversations of about ``--tokens`` o200k tokens each, twice: a
first request (nothing stored yet) and the next one, a turn longer (the conversation is leased
and its state loaded; with three processes it lands on another process than its first request
two times in three, so the state comes from Redis rather than the process's cache). Latency
is the whole request (every stream read to its end); added latency is the gateway's over the
same requests sent straight to the upstream, quantile against quantile, as in
:mod:`benchmarks.gateway_load`. Then 20 conversations one request at a time, under a context
target so their state carries a frozen memory (the next request reuses it): the latency a
single agent feels, and what Redis adds to it over the in-memory store.

Client, upstream, Redis and gateways share this machine's two cores, so the figures bound the
gateway's own cost from above, and three processes cannot show more throughput than two cores
give.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from benchmarks.gateway_load import _free_port, _process, _quantile, fire, request_body
from tomc._gateway.settings import GatewaySettings, save_settings

SETUPS = (("memory", 1), ("redis", 1), ("redis", 3))
#: Conversations timed one request at a time, and the context target that gives each a frozen
#: memory on its first request.
ALONE, ALONE_TARGET = 20, 60_000


def next_body(body: bytes, number: int) -> bytes:
    """The conversation's next request: one more exchange at the end."""
    data = json.loads(body)
    data["messages"] += [
        {"role": "assistant", "content": f"Part {number} read; running the tests."},
        {"role": "user", "content": f"tests for conversation {number}: 3 passed, 1 failed"},
    ]
    return json.dumps(data).encode()


@contextlib.contextmanager
def redis_server(folder: str) -> Iterator[str]:
    binary = shutil.which("redis-server") or shutil.which("valkey-server")
    if binary is None:
        raise SystemExit(
            "benchmarks.gateway_team needs redis-server (apt-get install redis-server)"
        )
    port = _free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    args += ["no", "--dir", folder]
    process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while (
            subprocess.run(
                ["redis-cli", "-p", str(port), "ping"], capture_output=True, text=True
            ).stdout.strip()
            != "PONG"
        ):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=30)


def _setup(
    upstream: str, store: str, workers: int, bodies: list[bytes], seconds: list[bytes], alone
) -> dict[str, Any]:
    port = _free_port()
    with tempfile.TemporaryDirectory() as home:
        save_settings(GatewaySettings(port=port, upstreams={"openai": f"{upstream}/v1"}), home)
        args = [sys.executable, "-m", "tomc", "gateway", "serve", "--home", home]
        args += ["--session-store", store, "--workers", str(workers)]
        base = f"http://127.0.0.1:{port}"
        with _process(args, f"{base}/healthz", {**os.environ, "TOMC_HOME": home}):
            first, first_out, first_s = asyncio.run(fire(base, bodies))
            second, second_out, second_s = asyncio.run(fire(base, seconds))
            target = {"x-tomc-context-target": str(ALONE_TARGET)}
            for body in alone[0]:  # each conversation's first request builds its memory
                asyncio.run(fire(base, [body], target))
            one = [asyncio.run(fire(base, [body], target))[0][0] for body in alone[1]]
    return {
        "first": first,
        "second": second,
        "first_s": first_s,
        "second_s": second_s,
        "outputs": first_out + second_out,
        "alone": one,
    }


def measure(conversations: int = 200, tokens: int = 100_000, events: int = 20) -> dict[str, Any]:
    bodies = [request_body(n, tokens) for n in range(conversations)]
    seconds = [next_body(body, n) for n, body in enumerate(bodies)]
    alone_first = [request_body(10_000 + n, tokens) for n in range(ALONE)]
    alone = (alone_first, [next_body(b, 10_000 + n) for n, b in enumerate(alone_first)])
    up_port = _free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    serve_upstream = [sys.executable, "-m", "benchmarks.gateway_load", "--serve-upstream"]
    serve_upstream += [str(up_port), "--events", str(events)]
    rows = []
    with (
        tempfile.TemporaryDirectory() as folder,
        redis_server(folder) as redis_url,
        _process(serve_upstream, f"{upstream}/health"),
    ):
        direct, direct_out, direct_s = asyncio.run(fire(upstream, bodies + seconds))
        direct_alone = [asyncio.run(fire(upstream, [body]))[0][0] for body in alone[1]]
        for kind, workers in SETUPS:
            store = "memory" if kind == "memory" else redis_url
            result = _setup(upstream, store, workers, bodies, seconds, alone)
            both = result["first"] + result["second"]
            added = [p - d for p, d in zip(sorted(both), sorted(direct), strict=True)]
            added_alone = [p - d for p, d in zip(result["alone"], direct_alone, strict=True)]
            pairs = zip(direct_out, result["outputs"], strict=True)
            rows.append(
                {
                    "store": kind,
                    "workers": workers,
                    "intact": sum(a == b for a, b in pairs),
                    "first_p50_s": _quantile(result["first"], 0.5),
                    "second_p50_s": _quantile(result["second"], 0.5),
                    "p50_s": _quantile(both, 0.5),
                    "p99_s": _quantile(both, 0.99),
                    "added_p50_s": _quantile(added, 0.5),
                    "added_p99_s": _quantile(added, 0.99),
                    "rps": 2 * conversations / (result["first_s"] + result["second_s"]),
                    "alone_p50_s": _quantile(result["alone"], 0.5),
                    "alone_added_p50_s": _quantile(added_alone, 0.5),
                    "alone_added_p99_s": _quantile(added_alone, 0.99),
                }
            )
    return {
        "conversations": conversations,
        "tokens": tokens,
        "requests": 2 * conversations,
        "body_kb": sum(len(b) for b in bodies) / len(bodies) / 1e3,
        "direct_p50_s": _quantile(direct, 0.5),
        "direct_rps": 2 * conversations / direct_s,
        "rows": rows,
    }


def to_markdown(result: dict[str, Any]) -> list[str]:
    rows = result["rows"]
    memory = next(r for r in rows if r["store"] == "memory")
    lines = [
        f"{result['conversations']} concurrent conversations, bodies of "
        f"{result['body_kb']:,.0f} KB (about {result['tokens'] / 1000:.0f}K o200k tokens), each "
        f"sending its first request and then its next ({result['requests']} streamed requests); "
        f"direct to the upstream: p50 {result['direct_p50_s']:.2f} s, "
        f"{result['direct_rps']:.1f} req/s.",
        "",
        "| store | processes | streams intact | p50 | p99 | added p50 | added p99 | throughput "
        "| one at a time: added p50 | Redis over memory (p50) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        over = (r["alone_p50_s"] - memory["alone_p50_s"]) * 1000
        lines.append(
            f"| {r['store']} | {r['workers']} | {r['intact']}/{result['requests']} "
            f"| {r['p50_s']:.2f} s | {r['p99_s']:.2f} s | {r['added_p50_s']:.2f} s "
            f"| {r['added_p99_s']:.2f} s | {r['rps']:.1f} req/s "
            f"| {r['alone_added_p50_s'] * 1000:.1f} ms "
            f"| {'-' if r is memory else f'{over:+.1f} ms'} |"
        )
    lines += [
        "",
        f"One at a time: {ALONE} conversations under a {ALONE_TARGET:,}-token context target, "
        "each timed on its second request (its frozen memory reused), against the same request "
        "sent straight to the upstream; the last column is the median against the in-memory "
        "store's.",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=20)
    args = parser.parse_args(argv)
    print("\n".join(to_markdown(measure(args.conversations, args.tokens, args.events))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
