"""What the TOMC hook adds to a LiteLLM proxy's latency: the same requests through LiteLLM alone
and through LiteLLM with ``callbacks: tomc.litellm.hook``.

    python -m benchmarks.litellm_hook [--requests 20] [--tokens 100000]

A loopback upstream answers Chat Completions at once (a fixed JSON answer with usage). Each
request is a new conversation whose body is about ``--tokens`` o200k tokens (a coding agent's
history of tool outputs), sent one at a time with the official ``openai`` SDK; the figures are
whole-request latencies (p50, p90) and the difference of the medians. Both proxies are the
pinned LiteLLM of ``.venv-litellm`` (``make .venv-litellm/.installed``), started the same way,
on this machine's two cores; the hook runs with its defaults (no context target is set, so a
100K-token request to ``gpt-4o``, whose window is 128K, is counted and sent as it is: the cost
of a request TOMC does not need to change, which is most of them).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import openai
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tomc import get_counter
from tomc._gateway.proxy.metering.traffic import read_traffic
from tomc._http.server import AppServer

ROOT = Path(__file__).resolve().parents[1]
MODEL = "gpt-4o"
KEY = "sk-bench-master"


def upstream_app() -> Starlette:
    async def completions(request: Request) -> JSONResponse:
        body = await request.json()
        return JSONResponse(
            {
                "id": "chatcmpl-bench",
                "object": "chat.completion",
                "created": 1,
                "model": body.get("model", MODEL),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "ok"},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 100_000, "completion_tokens": 1, "total_tokens": 1},
            }
        )

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])


def history(conversation: int, tokens: int) -> list[dict[str, Any]]:
    """About ``tokens`` o200k tokens of agent work, unique to ``conversation``."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": f"Conversation {conversation}: fix the failing test."},
    ]
    counter = get_counter("bpe:o200k_base")
    step = total = 0
    while total < tokens:
        lines = "\n".join(
            f"src/pkg/module_{conversation}_{step}.py:{n}: value_{n} = {n * step} # checked"
            for n in range(24)
        )
        note = f"Step {step}: reading module {step}."
        messages += [
            {"role": "assistant", "content": note},
            {"role": "user", "content": lines},
        ]
        total += counter.count(lines + note) + 8  # and each message's framing
        step += 1
    return messages


def litellm_binary() -> Path:
    scripts, exe = ("Scripts", "litellm.exe") if sys.platform == "win32" else ("bin", "litellm")
    found = Path(os.environ.get("TOMC_LITELLM_BIN") or ROOT / ".venv-litellm" / scripts / exe)
    if not found.exists():
        raise SystemExit(f"no LiteLLM proxy at {found}: make .venv-litellm/.installed")
    return found


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_proxy(
    folder: Path, upstream: str, hook: bool, target: int | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    folder.mkdir(parents=True, exist_ok=True)
    config = [
        "model_list:",
        f"  - model_name: {MODEL}",
        "    litellm_params:",
        f"      model: openai/{MODEL}",
        f"      api_base: {upstream}/v1",
        "      api_key: sk-upstream",
        "general_settings:",
        f"  master_key: {KEY}",
    ]
    if hook:
        config += ["litellm_settings:", "  callbacks: tomc.litellm.hook"]
    (folder / "config.yaml").write_text("\n".join(config) + "\n", encoding="utf-8")
    port = _free_port()
    env = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "TOMC_HOME": str(folder / "home"),
        **({"TOMC_CONTEXT_TARGET": str(target)} if target else {}),
    }
    args = [str(litellm_binary()), "--config", "config.yaml", "--host", "127.0.0.1"]
    log = (folder / "litellm.log").open("wb")
    process = subprocess.Popen(
        [*args, "--port", str(port)], cwd=folder, env=env, stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx2.get(f"{url}/health/liveliness", timeout=2).status_code == 200:
                return process, url
        except httpx2.HTTPError:
            time.sleep(0.25)
    process.kill()
    raise SystemExit(f"LiteLLM did not start; see {folder / 'litellm.log'}")


def timed(url: str, bodies: list[list[dict[str, Any]]]) -> list[float]:
    client = openai.OpenAI(api_key=KEY, base_url=f"{url}/v1", max_retries=0, timeout=120)
    client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "warm"}])
    times = []
    for messages in bodies:
        start = time.perf_counter()
        client.chat.completions.create(model=MODEL, messages=messages)
        times.append(time.perf_counter() - start)
    return times


#: The set-ups: name -> (hook on, context target).
SETUPS = {"alone": (False, None), "hook": (True, None), "hook_target": (True, 60_000)}


def measure(requests: int = 20, tokens: int = 100_000) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    with (
        tempfile.TemporaryDirectory() as folder,
        AppServer(upstream_app(), "127.0.0.1", 0, quiet=True) as upstream,
    ):
        for index, (name, (hook, target)) in enumerate(SETUPS.items()):
            bodies = [history(1000 * index + n, tokens) for n in range(requests)]
            root, place = upstream.url.rstrip("/"), Path(folder) / name
            process, url = start_proxy(place, root, hook, target)
            try:
                times = sorted(timed(url, bodies))
            finally:
                process.terminate()
                process.wait(timeout=30)
            traffic = read_traffic(place / "home") if hook else None
            totals = traffic["totals"] if traffic else {}
            rows[name] = {
                "p50_ms": round(statistics.median(times) * 1000, 1),
                "p90_ms": round(times[int(0.9 * (len(times) - 1))] * 1000, 1),
                "ledger_requests": totals.get("requests"),
                "rewritten": totals.get("rewritten"),
                "tokens_before": totals.get("tomc_tokens_before"),
                "tokens_after": totals.get("tomc_tokens_after"),
            }
    for name in ("hook", "hook_target"):
        rows[name]["added_p50_ms"] = round(rows[name]["p50_ms"] - rows["alone"]["p50_ms"], 1)
    rows["requests"], rows["tokens"] = requests, tokens
    return rows


def to_markdown(rows: dict[str, Any]) -> list[str]:
    names = {
        "alone": "LiteLLM alone",
        "hook": "LiteLLM + `tomc.litellm.hook` (no target: counted, sent as it is)",
        "hook_target": "LiteLLM + hook, `TOMC_CONTEXT_TARGET=60000` (every request compiled)",
    }
    lines = [
        "| set-up | p50 | p90 | added p50 | TOMC's tokens before -> after (all requests) |",
        "|---|--:|--:|--:|--:|",
    ]
    for name, label in names.items():
        row = rows[name]
        added = f"{row['added_p50_ms']} ms" if "added_p50_ms" in row else "-"
        tokens = (
            f"{row['tokens_before']:,} -> {row['tokens_after']:,}" if row["tokens_before"] else "-"
        )
        lines.append(f"| {label} | {row['p50_ms']} ms | {row['p90_ms']} ms | {added} | {tokens} |")
    lines += [
        "",
        f"{rows['requests']} requests of about {rows['tokens']:,} o200k tokens each, one at a"
        " time, each a new conversation.",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--tokens", type=int, default=100_000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = measure(args.requests, args.tokens)
    print(json.dumps(rows, indent=2) if args.json else "\n".join(to_markdown(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
