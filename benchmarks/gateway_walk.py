"""The walk of one request through the gateway: which TOMC modules it enters, in order.

    python -m benchmarks.gateway_walk [--api messages|responses|chat] [--json]

A conversation of a few agent steps goes through the gateway's app in this process (its
upstream is a small fake provider in the request's format, answering with usage); the last
request, which TOMC rewrites, is traced. Every call from the framework or from the gateway's
side (``tomc._gateway``, ``tomc.web``, ``tomc._http``) into a module of the gateway's side counts
as entering that module, and a call into the session as entering it once; what the session and
the dialects do is not followed (they are the library the gateway uses). Calls on other threads
than the event loop's and the session's worker (the usage ledger's writer) are left out. A
module's *entries* are the runs of consecutive calls into it; *re-entries* are the entries into
a module already left. The calls ``Gateway.proxy`` makes itself are listed too: the request's
steps as the hub wires them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

import httpx2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import tomc

PATHS = {"messages": "/v1/messages", "responses": "/v1/responses", "chat": "/v1/chat/completions"}
MODELS = {"messages": "claude-opus-4-8", "responses": "gpt-6.2-sol", "chat": "gpt-4o"}
_ROOT = str(Path(tomc.__file__).resolve().parent)
_GATEWAY_SIDE = ("tomc._gateway", "tomc.web", "tomc._http")


def _answer(api: str) -> dict[str, Any]:
    if api == "messages":
        return {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": MODELS[api],
            "content": [{"type": "text", "text": "ok"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 900, "output_tokens": 2, "cache_read_input_tokens": 100},
        }
    if api == "responses":
        return {
            "id": "resp_1",
            "object": "response",
            "status": "completed",
            "output": [],
            "usage": {"input_tokens": 1000, "output_tokens": 2},
        }
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 2},
    }


def _upstream(api: str) -> Starlette:
    async def answer(request: Request) -> JSONResponse:
        await request.body()
        return JSONResponse(_answer(api))

    return Starlette(routes=[Route("/{path:path}", answer, methods=["POST"])])


def _body(api: str, steps: int) -> dict[str, Any]:
    history: list[dict[str, Any]] = [{"role": "user", "content": "Fix the retry bug."}]
    for k in range(steps):
        output = "".join(f"line {i}: retries = {k} in src/mod_{k}.py\n" for i in range(60))
        history += [
            {"role": "assistant", "content": f"Reading part {k}."},
            {"role": "user", "content": output},
        ]
    key = {"messages": "messages", "chat": "messages", "responses": "input"}[api]
    body: dict[str, Any] = {"model": MODELS[api], key: history}
    if api == "messages":
        body["max_tokens"] = 64
    return body


class _Tracer:
    """Records the TOMC modules entered from the gateway's side, in order."""

    def __init__(self) -> None:
        self.entered: list[str] = []
        #: What ``Gateway.proxy`` calls itself, in order: the request's steps.
        self.from_hub: list[str] = []
        self.on = False
        self.loop = threading.current_thread()
        self._seen: set[FrameType] = set()

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.on or event != "call" or frame in self._seen:  # a resumed coroutine
            return
        if not frame.f_code.co_filename.startswith(_ROOT):
            return
        if threading.current_thread() is not self.loop and not _is_worker():
            return
        module = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "") if frame.f_back else ""
        if caller.startswith("tomc") and not caller.startswith(_GATEWAY_SIDE):
            return  # inside the session or a dialect: not followed
        if module.startswith(_GATEWAY_SIDE) or frame.f_code.co_name == "prepare_request":
            self._seen.add(frame)  # held, so that no later frame reuses its identity
            self.entered.append(module)
            back = frame.f_back
            if back is not None and back.f_code.co_qualname == "Gateway.proxy":
                self.from_hub.append(f"{module}.{frame.f_code.co_name}")


def _is_worker() -> bool:
    return "AnyIO worker" in threading.current_thread().name


def walk(entered: list[str], from_hub: list[str] | None = None) -> dict[str, Any]:
    """Entries per module (runs of consecutive calls), packages and re-entries; ``from_hub``
    (what ``Gateway.proxy`` calls) as the request's steps."""
    runs = [m for i, m in enumerate(entered) if i == 0 or entered[i - 1] != m]
    entries = Counter(runs)
    packages = {m.rpartition(".")[0] for m in entries}
    return {
        "modules": len(entries),
        "packages": len(packages),
        "entries": len(runs),
        "re_entries": len(runs) - len(entries),
        "per_module": dict(entries.most_common()),
        "order": runs,
        "steps": from_hub or [],
    }


async def _run(api: str, steps: int) -> _Tracer:
    from tomc._gateway.proxy.app import Gateway, create_gateway_app
    from tomc._gateway.settings import GatewaySettings

    upstreams = {"anthropic": "http://upstream", "openai": "http://upstream/v1"}
    settings = GatewaySettings(upstreams=upstreams)
    gateway = Gateway(settings, transport=httpx2.ASGITransport(app=_upstream(api)))
    app = create_gateway_app(settings, gateway=gateway)
    tracer = _Tracer()
    # As `tomc run` sends them: the agent's target (small here, so the last request is rewritten).
    headers = {"x-tomc-context-target": "3000; source=agent", "x-api-key": "k"}
    path = PATHS[api] + ("?beta=true" if api == "messages" else "")
    async with gateway.lifespan(app):
        transport = httpx2.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            for step in range(1, steps + 1):
                if step == steps:
                    await asyncio.sleep(0.2)  # the previous request's bookkeeping is done
                tracer.on = step == steps
                sys.setprofile(tracer)
                threading.setprofile(tracer)
                try:
                    answer = await client.post(
                        path, content=json.dumps(_body(api, step)), headers=headers
                    )
                finally:
                    sys.setprofile(None)
                    threading.setprofile(None)  # type: ignore[arg-type]
                answer.raise_for_status()
            await asyncio.sleep(0.05)  # the hand-back runs after the answer
    return tracer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--api", choices=sorted(PATHS), default="messages")
    parser.add_argument("--steps", type=int, default=6, help="requests in the conversation")
    parser.add_argument("--json", action="store_true", help="the whole walk as JSON")
    args = parser.parse_args(argv)
    tracer = asyncio.run(_run(args.api, args.steps))
    figures = walk(tracer.entered, tracer.from_hub)
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(
        f"POST {PATHS[args.api]}: {figures['modules']} modules in {figures['packages']} packages,"
        f" {figures['entries']} entries, {figures['re_entries']} re-entries"
    )
    for module, count in figures["per_module"].items():
        print(f"  {count:3d}  {module}")
    print("Gateway.proxy calls, in order: " + ", ".join(figures["steps"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
