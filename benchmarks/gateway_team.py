"""A gateway for a team under load: the in-memory store against Redis, one process against three.

    python -m benchmarks.gateway_team [--conversations 200] [--tokens 100000] [--events 20]

Starts its own ``redis-server`` (Debian's package; no persistence) and the streaming upstream of
:mod:`benchmarks.gateway_load` on loopback, and ``tomc gateway serve`` processes for four
set-ups: one process with the in-memory store; one on Redis; three on Redis with each request of
a conversation sent to another process than its previous one (round robin: the state always
comes from Redis, never from a process's cache); three on Redis with a conversation kept on one
process (what hashing on the conversation header at a load balancer gives).

Under load, ``--conversations`` concurrent conversations of about ``--tokens`` o200k tokens
each send their first request (nothing stored yet), then their next, a turn longer. Latency is
the whole request (every stream read to its end); added latency is the gateway's over the same
requests sent straight to the upstream, quantile against quantile, as in
:mod:`benchmarks.gateway_load`.

One at a time (what a single agent feels): conversations under a context target, so that each
state carries a frozen memory, send their next requests one after another; every set-up and the
direct path get the same request in turn, all running at once, so that the comparison with the
in-memory store is request against request and a busy moment of the machine hits all alike.

Client, upstream, Redis and gateways share this machine's two cores, so the figures bound the
gateway's own cost from above, and three processes cannot show more throughput than two cores
give.

The store's health under load is reported too: after the burst, each set-up's requests that
went out unchanged because the store did not answer (``passed_through_while_down``, summed over
its processes), and, at the end, the gateways' warnings about the store (their logs are kept in
the run's folder while it runs): a pool too small for the burst says so there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2

from benchmarks.gateway_load import _free_port, _process, _quantile, _wait, request_body
from tomc._gateway.settings import GatewaySettings, save_settings

#: (name, store, processes, sticky)
SETUPS = (
    ("memory, 1 process", "memory", 1, True),
    ("Redis, 1 process", "redis", 1, True),
    ("Redis, 3 processes, round robin", "redis", 3, False),
    ("Redis, 3 processes, sticky", "redis", 3, True),
)
#: Conversations timed one request at a time, their timed requests each, and the context target
#: that gives each a frozen memory on its first request.
ALONE, ROUNDS, ALONE_TARGET = 24, 6, 60_000
#: Pause before each timed request: the previous one's saving is done by then, as it is
#: before an agent sends its next request.
PAUSE_S = 0.05
_HEADERS = {"content-type": "application/json", "authorization": "Bearer sk-bench"}


class RedisMissing(RuntimeError):
    """No ``redis-server`` (or ``valkey-server``) to start."""


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
        raise RedisMissing("needs redis-server on PATH (Debian: apt-get install redis-server)")
    port = _free_port()
    args = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly"]
    process = subprocess.Popen(
        [*args, "no", "--dir", folder], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        url = f"redis://127.0.0.1:{port}/0"
        deadline = time.monotonic() + 15
        while not _answers(port):
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)


def _answers(port: int) -> bool:
    import socket

    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


#: What the gateways log when the session store is short of connections or does not answer
#: (the client's own words, and the gateway's for an outage of the store).
STORE_WARNINGS = {
    "too_many_connections": re.compile(r"Too many connections"),
    "no_connection_available": re.compile(r"No connection available|no free connection"),
    "store_unavailable": re.compile(r"session store \S+ unavailable"),
}


@contextlib.contextmanager
def _logged_process(
    args: list[str], url: str, env: dict[str, str], log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """A process whose stderr (the gateway's warnings) goes to ``log``, up once ``url`` answers."""
    with log.open("wb") as sink:
        process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=sink)
    try:
        _wait(url, process)
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


@contextlib.contextmanager
def gateways(
    upstream: str, store: str, count: int, folder: str, logs: list[Path] | None = None
) -> Iterator[list[str]]:
    """``count`` gateway processes on ``store`` (each its own home); yields their URLs. Each
    process's log file is added to ``logs``."""
    with contextlib.ExitStack() as stack:
        urls = []
        for n in range(count):
            home = tempfile.mkdtemp(prefix=f"gateway-{n}-", dir=folder)
            port = _free_port()
            save_settings(GatewaySettings(port=port, upstreams={"openai": f"{upstream}/v1"}), home)
            args = [sys.executable, "-m", "tomc", "gateway", "serve", "--home", home]
            url = f"http://127.0.0.1:{port}"
            env = {**os.environ, "TOMC_HOME": home}
            log = Path(home) / "gateway.log"
            args += ["--session-store", store]
            stack.enter_context(_logged_process(args, f"{url}/healthz", env, log))
            if logs is not None:
                logs.append(log)
            urls.append(url)
        yield urls


def store_figures(urls: list[str]) -> dict[str, int]:
    """What the set-up's store did under load, summed over its processes: outages and the
    requests that went out unchanged because the store did not answer (0 for memory)."""
    figures = {"outages": 0, "passed_through_while_down": 0, "ledger_dropped": 0}
    with httpx2.Client(trust_env=False, timeout=60.0) as http:
        for url in urls:
            status = http.get(f"{url}/status.json").json()
            store = status.get("session_store") or {}
            figures["outages"] += int(store.get("outages", 0))
            figures["passed_through_while_down"] += int(store.get("passed_through_while_down", 0))
            figures["ledger_dropped"] += int((status.get("traffic") or {}).get("dropped", 0))
    return figures


def log_warnings(logs: list[Path]) -> dict[str, int]:
    """Lines of the gateways' logs that say each of :data:`STORE_WARNINGS`."""
    counts = dict.fromkeys(STORE_WARNINGS, 0)
    for log in logs:
        for line in log.read_text("utf-8", "replace").splitlines():
            for name, pattern in STORE_WARNINGS.items():
                counts[name] += pattern.search(line) is not None
    return counts


async def send_all(
    pairs: list[tuple[str, bytes]], headers: dict[str, str] | None = None
) -> tuple[list[float], list[bytes], float]:
    """Send every ``(base URL, body)`` at once; each latency, streamed body, and the wall time."""
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx2.AsyncClient(limits=limits, timeout=600.0, trust_env=False) as client:

        async def one(base: str, body: bytes) -> tuple[float, bytes]:
            started = time.perf_counter()
            chunks = []
            async with client.stream(
                "POST",
                f"{base}/v1/chat/completions",
                content=body,
                headers={**_HEADERS, **(headers or {})},
            ) as response:
                response.raise_for_status()
                async for chunk in response.aiter_raw():
                    chunks.append(chunk)
            return time.perf_counter() - started, b"".join(chunks)

        started = time.perf_counter()
        results = await asyncio.gather(*(one(base, body) for base, body in pairs))
        elapsed = time.perf_counter() - started
    return [r[0] for r in results], [r[1] for r in results], elapsed


def _route(urls: list[str], sticky: bool, conversation: int, request: int) -> str:
    """The process a conversation's request goes to: always the same one (sticky), or the
    next one for each request (round robin within the conversation)."""
    return urls[(conversation + (0 if sticky else request)) % len(urls)]


def under_load(
    setups: dict[str, list[str]], bodies: list[bytes], seconds: list[bytes]
) -> dict[str, dict[str, Any]]:
    """Each set-up in turn: every conversation's first request at once, then every next one;
    then what its store did meanwhile (:func:`store_figures`)."""
    out = {}
    for name, _, _, sticky in SETUPS:
        urls = setups[name]
        first = [(_route(urls, sticky, n, 0), body) for n, body in enumerate(bodies)]
        second = [(_route(urls, sticky, n, 1), body) for n, body in enumerate(seconds)]
        lat1, out1, s1 = asyncio.run(send_all(first))
        lat2, out2, s2 = asyncio.run(send_all(second))
        out[name] = {
            "latency": lat1 + lat2,
            "outputs": out1 + out2,
            "wall_s": s1 + s2,
            "store": store_figures(urls),
        }
    return out


def one_at_a_time(upstream: str, setups: dict[str, list[str]], tokens: int) -> dict[str, list]:
    """Latencies of each set-up and of the direct path, request against request (see the
    module docstring), each over a kept-alive connection as an agent's client keeps it; the
    first request of each conversation, which builds its memory, is not timed."""
    headers = {**_HEADERS, "x-tomc-context-target": str(ALONE_TARGET)}
    names = [name for name, *_ in SETUPS]
    sticky = {name: flag for name, _, _, flag in SETUPS}
    timed: dict[str, list[float]] = {name: [] for name in ["direct", *names]}
    shuffle = random.Random(7).shuffle

    def post(http: httpx2.Client, base: str, body: bytes) -> float:
        started = time.perf_counter()
        with http.stream("POST", f"{base}/v1/chat/completions", content=body) as response:
            response.raise_for_status()
            for _ in response.iter_raw():
                pass
        return time.perf_counter() - started

    with httpx2.Client(trust_env=False, timeout=600.0, headers=headers) as http:
        for n in range(ALONE):
            body = request_body(10_000 + n, tokens)
            for name in names:
                post(http, _route(setups[name], sticky[name], n, 0), body)
            for request in range(1, ROUNDS + 1):
                body = next_body(body, 10_000 + n)
                order = ["direct", *names]
                shuffle(order)  # who goes after whom changes each time
                for name in order:
                    time.sleep(PAUSE_S)  # what one request leaves to do, done before the next
                    route = _route(setups.get(name, [upstream]), sticky.get(name, True), n, request)
                    timed[name].append(post(http, route, body))
    return timed


def measure(conversations: int = 200, tokens: int = 100_000, events: int = 20) -> dict[str, Any]:
    bodies = [request_body(n, tokens) for n in range(conversations)]
    seconds = [next_body(body, n) for n, body in enumerate(bodies)]
    up_port = _free_port()
    upstream = f"http://127.0.0.1:{up_port}"
    serve_upstream = [sys.executable, "-m", "benchmarks.gateway_load", "--serve-upstream"]
    serve_upstream += [str(up_port), "--events", str(events)]
    with (
        tempfile.TemporaryDirectory() as folder,
        redis_server(folder) as redis_url,
        _process(serve_upstream, f"{upstream}/health"),
        contextlib.ExitStack() as stack,
    ):
        direct, direct_out, direct_s = asyncio.run(
            send_all([(upstream, body) for body in bodies + seconds])
        )
        # Each set-up its own keys: they send the same conversations.
        logs: dict[str, list[Path]] = {name: [] for name, *_ in SETUPS}
        setups = {
            name: stack.enter_context(
                gateways(
                    upstream,
                    f"{redis_url}?prefix=setup{n}:" if store == "redis" else store,
                    count,
                    folder,
                    logs[name],
                )
            )
            for n, (name, store, count, _) in enumerate(SETUPS)
        }
        loaded = under_load(setups, bodies, seconds)
        alone = one_at_a_time(upstream, setups, tokens)
        warnings = {name: log_warnings(files) for name, files in logs.items()}
    rows = []
    for name, _, count, sticky in SETUPS:
        run = loaded[name]
        added = [p - d for p, d in zip(sorted(run["latency"]), sorted(direct), strict=True)]
        pairs = zip(direct_out, run["outputs"], strict=True)
        rows.append(
            {
                "name": name,
                "processes": count,
                "intact": sum(a == b for a, b in pairs),
                "p50_s": _quantile(run["latency"], 0.5),
                "p99_s": _quantile(run["latency"], 0.99),
                "added_p50_s": _quantile(added, 0.5),
                "added_p99_s": _quantile(added, 0.99),
                "rps": 2 * conversations / run["wall_s"],
                "alone_added": [t - d for t, d in zip(alone[name], alone["direct"], strict=True)],
                "alone_over_memory": [
                    t - m for t, m in zip(alone[name], alone[SETUPS[0][0]], strict=True)
                ],
                "store": run["store"],
                "warnings": warnings[name],
            }
        )
        over = rows[-1]["alone_over_memory"]
        # Timed request k is request k % ROUNDS + 1 of its conversation; round robin brings a
        # conversation back to a process from its request `count` on (request 0 was untimed).
        seen = [sticky or k % ROUNDS + 1 >= count for k in range(len(over))]
        rows[-1]["alone_over_memory_first"] = [t for t, s in zip(over, seen, strict=True) if not s]
        rows[-1]["alone_over_memory_again"] = [t for t, s in zip(over, seen, strict=True) if s]
    return {
        "conversations": conversations,
        "tokens": tokens,
        "requests": 2 * conversations,
        "body_kb": sum(len(b) for b in bodies) / len(bodies) / 1e3,
        "direct_p50_s": _quantile(direct, 0.5),
        "direct_rps": 2 * conversations / direct_s,
        "alone_direct_p50_s": statistics.median(alone["direct"]),
        "rows": rows,
    }


def to_markdown(result: dict[str, Any]) -> list[str]:
    lines = [
        f"{result['conversations']} concurrent conversations, bodies of "
        f"{result['body_kb']:,.0f} KB (about {result['tokens'] / 1000:.0f}K o200k tokens), each "
        f"sending its first request and then its next ({result['requests']} streamed requests); "
        f"direct to the upstream: p50 {result['direct_p50_s']:.2f} s, "
        f"{result['direct_rps']:.1f} req/s.",
        "",
        "| set-up | streams intact | p50 | p99 | added p50 | added p99 | throughput "
        "| one at a time: added p50 / p99 | over the in-memory store (p50) |",
        "|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in result["rows"]:
        added = r["alone_added"]
        over = statistics.median(r["alone_over_memory"]) * 1000
        lines.append(
            f"| {r['name']} | {r['intact']}/{result['requests']} "
            f"| {r['p50_s']:.2f} s | {r['p99_s']:.2f} s | {r['added_p50_s']:.2f} s "
            f"| {r['added_p99_s']:.2f} s | {r['rps']:.1f} req/s "
            f"| {_quantile(added, 0.5) * 1000:.1f} / {_quantile(added, 0.99) * 1000:.1f} ms "
            f"| {'-' if r is result['rows'][0] else f'{over:+.1f} ms'} |"
        )
    lines += [
        "",
        f"One at a time: {ALONE} conversations under a {ALONE_TARGET:,}-token context target "
        f"(so each state carries a frozen memory), {ROUNDS} timed requests each after the one "
        "that built the memory; every set-up and the direct path got each request in turn, in "
        f"a shuffled order {PAUSE_S * 1000:.0f} ms apart, all running at once (direct p50 "
        f"{result['alone_direct_p50_s'] * 1000:.1f} ms). The "
        "last column is the median, request against request, of the difference with the "
        "in-memory store. Round robin sends each request of a conversation to another process "
        "than the one that saved its state, so that process loads it from Redis and counts the "
        "history again (the per-item counts are a cache, not part of the saved state) when it "
        "has not served the conversation before, and only what was added since when it has "
        "(its older session keeps its counts and takes the newer state); sticky is what hashing "
        "on the conversation header at the load balancer gives.",
    ]
    for r in result["rows"]:
        first, again = r["alone_over_memory_first"], r["alone_over_memory_again"]
        if first and again:
            lines[-1] += (
                f" {r['name']}: a process's first request of a conversation "
                f"{statistics.median(first) * 1000:+.1f} ms, its later ones "
                f"{statistics.median(again) * 1000:+.1f} ms over the in-memory store (p50)."
            )
    health = [r for r in result["rows"] if "store" in r and "warnings" in r]
    if health:
        lines += [
            "",
            "The store under load (after the burst: outages and requests sent unchanged because "
            "the store did not answer, summed over the set-up's processes; over the whole run: "
            "log lines of the gateways):",
            "",
            "| set-up | store outages | sent unchanged (store down) | ledger entries dropped "
            '| "Too many connections" | no free connection | "session store ... unavailable" |',
            "|---|--:|--:|--:|--:|--:|--:|",
        ]
        for r in health:
            store, said = r["store"], r["warnings"]
            lines.append(
                f"| {r['name']} | {store['outages']} | {store['passed_through_while_down']} "
                f"| {store['ledger_dropped']} | {said['too_many_connections']} "
                f"| {said['no_connection_available']} | {said['store_unavailable']} |"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=20)
    args = parser.parse_args(argv)
    try:
        result = measure(args.conversations, args.tokens, args.events)
    except RedisMissing as exc:
        print(f"benchmarks.gateway_team: {exc}", file=sys.stderr)
        return 2
    print("\n".join(to_markdown(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
