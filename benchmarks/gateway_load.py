"""The gateway under load: concurrent streaming requests with large bodies, direct and through it.

    python -m benchmarks.gateway_load [--requests 200] [--tokens 100000] [--events 20]

A loopback upstream speaks Chat Completions streaming (``--events`` SSE chunks, a few
milliseconds apart, then ``data: [DONE]``). The same ``--requests`` concurrent requests, each a
different conversation with a body of about ``--tokens`` o200k tokens, are sent straight to it
and then through ``tomc gateway``'s app (uvicorn, on loopback). Every streamed body must arrive
complete and byte-identical to the direct run; the figures are whole-request latencies (p50,
p99), the latency the gateway adds, and throughput. Client, gateway and upstream share this
machine's two cores (each in its own process), so the figures are an upper bound on the
gateway's own cost.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from tomc._gateway.settings import GatewaySettings, save_settings
from tomc._http.server import AppServer

EVENT_GAP_S = 0.005
MODEL = os.environ.get("TOMC_BENCH_MODEL", "gpt-4o")


def upstream_app(events: int) -> Starlette:
    """A Chat Completions upstream that streams ``events`` chunks naming the request's user."""

    async def completions(request: Request) -> StreamingResponse:
        body = await request.json()
        user = body.get("user", "")

        async def stream():
            for index in range(events):
                chunk = {
                    "id": f"chatcmpl-{user}",
                    "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": {"content": f"{user}:{index} "}}],
                }
                yield f"data: {json.dumps(chunk)}\n\n".encode()
                await asyncio.sleep(EVENT_GAP_S)
            yield b"data: [DONE]\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def health(request: Request) -> Response:
        return Response("ok")

    return Starlette(
        routes=[
            Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/health", health),
        ]
    )


def request_body(number: int, tokens: int) -> bytes:
    """A coding-agent-like history of about ``tokens`` o200k tokens (one conversation each)."""
    line = "    value = compute(item, retries=3)  # module line {0} of the service\n"
    per_message = 40
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"Task {number}: fix the retry bug."},
    ]
    lines_needed = tokens // 21  # about 21 o200k tokens per line with its framing
    for start in range(0, lines_needed, per_message):
        text = "".join(line.format(k) for k in range(start, start + per_message))
        messages.append({"role": "assistant", "content": f"Reading part {start}."})
        messages.append({"role": "user", "content": text})
    body = {
        "model": MODEL,
        "messages": messages,
        "stream": True,
        "max_tokens": 4096,
        "user": f"conversation-{number}",
    }
    return json.dumps(body).encode()


async def fire(
    base_url: str, bodies: list[bytes], extra_headers: dict[str, str] | None = None
) -> tuple[list[float], list[bytes], float]:
    limits = httpx2.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx2.Timeout(600.0)
    async with httpx2.AsyncClient(limits=limits, timeout=timeout, trust_env=False) as client:

        async def one(body: bytes) -> tuple[float, bytes]:
            started = time.perf_counter()
            chunks = []
            headers = {"content-type": "application/json", "authorization": "Bearer sk-bench"}
            headers.update(extra_headers or {})
            async with client.stream(
                "POST", f"{base_url}/v1/chat/completions", content=body, headers=headers
            ) as response:
                response.raise_for_status()
                async for chunk in response.aiter_raw():
                    chunks.append(chunk)
            return time.perf_counter() - started, b"".join(chunks)

        started = time.perf_counter()
        results = await asyncio.gather(*(one(body) for body in bodies))
        elapsed = time.perf_counter() - started
    return [r[0] for r in results], [r[1] for r in results], elapsed


def _quantile(values: list[float], level: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(level * (len(ordered) - 1)))]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{url} exited with {process.returncode}")
        try:
            httpx2.get(url, trust_env=False, timeout=1.0)
            return
        except httpx2.TransportError:
            time.sleep(0.1)
    raise RuntimeError(f"{url} did not start")


@contextlib.contextmanager
def _process(args: list[str], url: str, env: dict[str, str] | None = None):
    process = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait(url, process)
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)


def measure(requests: int = 200, tokens: int = 100_000, events: int = 20) -> dict[str, Any]:
    """Upstream and gateway each run in their own process, as they would on a real machine."""
    bodies = [request_body(n, tokens) for n in range(requests)]
    up_port, gw_port = _free_port(), _free_port()
    base = f"http://127.0.0.1:{up_port}"
    upstream = [sys.executable, "-m", "benchmarks.gateway_load", "--serve-upstream", str(up_port)]
    upstream += ["--events", str(events)]
    with tempfile.TemporaryDirectory() as home, _process(upstream, f"{base}/health"):
        save_settings(GatewaySettings(port=gw_port, upstreams={"openai": f"{base}/v1"}), home)
        gateway = [sys.executable, "-m", "tomc", "gateway", "serve", "--home", home]
        gw_base = f"http://127.0.0.1:{gw_port}"
        with _process(gateway, f"{gw_base}/healthz", {**os.environ, "TOMC_HOME": home}):
            direct, direct_bodies, direct_s = asyncio.run(fire(base, bodies))
            proxied, proxied_bodies, proxied_s = asyncio.run(fire(gw_base, bodies))
            # One request at a time: the latency a single agent feels.
            alone = bodies[: min(20, len(bodies))]
            one_direct = [asyncio.run(fire(base, [body]))[0][0] for body in alone]
            one_proxied = [asyncio.run(fire(gw_base, [body]))[0][0] for body in alone]
    intact = sum(a == b for a, b in zip(direct_bodies, proxied_bodies, strict=True))
    complete = sum(body.endswith(b"data: [DONE]\n\n") for body in proxied_bodies)
    added = [p - d for p, d in zip(sorted(proxied), sorted(direct), strict=True)]
    added_alone = [p - d for p, d in zip(one_proxied, one_direct, strict=True)]
    return {
        "requests": requests,
        "body_bytes": statistics.mean(len(b) for b in bodies),
        "events": events,
        "complete": complete,
        "intact": intact,
        "direct_p50_s": _quantile(direct, 0.5),
        "direct_p99_s": _quantile(direct, 0.99),
        "gateway_p50_s": _quantile(proxied, 0.5),
        "gateway_p99_s": _quantile(proxied, 0.99),
        "added_p50_s": _quantile(added, 0.5),
        "added_p99_s": _quantile(added, 0.99),
        "alone_added_p50_s": _quantile(added_alone, 0.5),
        "alone_added_max_s": max(added_alone),
        "direct_rps": requests / direct_s,
        "gateway_rps": requests / proxied_s,
        "gateway_mb_s": requests * statistics.mean(len(b) for b in bodies) / proxied_s / 1e6,
    }


def to_markdown(row: dict[str, Any]) -> list[str]:
    return [
        f"{row['requests']} concurrent streaming requests, bodies of "
        f"{row['body_bytes'] / 1e3:,.0f} KB (about 100K o200k tokens), {row['events']} SSE "
        "events each: "
        f"{row['complete']} of {row['requests']} streams complete, {row['intact']} "
        "byte-identical to the direct run.",
        "",
        "| path | p50 | p99 | throughput |",
        "|---|--:|--:|--:|",
        f"| direct to the upstream | {row['direct_p50_s']:.2f} s | {row['direct_p99_s']:.2f} s "
        f"| {row['direct_rps']:.1f} req/s |",
        f"| through the gateway | {row['gateway_p50_s']:.2f} s | {row['gateway_p99_s']:.2f} s "
        f"| {row['gateway_rps']:.1f} req/s ({row['gateway_mb_s']:.1f} MB/s of request bodies) |",
        f"| added by the gateway | {row['added_p50_s']:.2f} s | {row['added_p99_s']:.2f} s | |",
        "",
        "One request at a time (what a single agent feels; the next request of a conversation the "
        "gateway already holds): "
        f"the gateway adds {row['alone_added_p50_s'] * 1000:.0f} ms at the median, "
        f"{row['alone_added_max_s'] * 1000:.0f} ms at most.",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--serve-upstream", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_upstream:
        # Providers keep an idle connection open far longer than uvicorn's 5 s default; with
        # 5 s a loaded machine races the gateway's reuse of it (ReadError, then a 502).
        AppServer(
            upstream_app(args.events), "127.0.0.1", args.serve_upstream, keep_alive_s=75
        ).run()
        return 0
    print("\n".join(to_markdown(measure(args.requests, args.tokens, args.events))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
