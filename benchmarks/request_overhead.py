"""What a request that reuses the frozen memory costs, beside one ``json.dumps`` of its messages.

    python -m benchmarks.request_overhead [--tokens 100000,400000,1000000] [--repeat 7]

An agent makes hundreds of requests per task; each one that reuses the frozen memory must cost
about its new messages, not the whole history. This builds a coding-agent history of the given
size (o200k tokens), compiles it once, then appends one tool call and its output at a time and
times ``AutomaticChatSession.prepare`` (a reused request) against ``json.dumps`` of the same
messages (what any client does to send them anyway). Best of ``repeat`` requests each.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any

from tomc import AutomaticChatSession

SYSTEM = {"role": "system", "content": "You are a coding agent. Use the bash tool."}
TASK = {"role": "user", "content": "Fix the retry bug in src/service: compute() ignores retries."}


def agent_step(step: int, lines: int = 40) -> list[dict[str, Any]]:
    """One tool call and its ``lines``-line output, as a coding agent produces them."""
    call_id = f"call_{step}"
    command = f"sed -n '{step * 40},{step * 40 + 39}p' src/service/module_{step % 7}.py"
    output = "\n".join(
        f"{step * 40 + k}: value_{step}_{k} = compute(item_{k}, retries={k % 5})  # step {step}"
        for k in range(lines)
    )
    return [
        {
            "role": "assistant",
            "content": f"Step {step}: reading module_{step % 7}.py.",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "bash", "arguments": json.dumps({"command": command})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": output},
    ]


def measure(tokens: int = 1_000_000, repeat: int = 7) -> dict[str, Any]:
    """Build a history of about ``tokens`` o200k tokens; time reused requests and json.dumps."""
    session = AutomaticChatSession(deployment_context_limit=tokens // 5)
    history: list[dict[str, Any]] = [SYSTEM, TASK]
    step = 0
    decision = None
    while decision is None or decision.tokens_before < tokens:
        for _ in range(200):
            step += 1
            history += agent_step(step)
        _, decision = session.prepare(model="gpt-4o", messages=history)
    fresh = AutomaticChatSession(deployment_context_limit=tokens // 5)
    started = time.perf_counter()
    fresh.prepare(model="gpt-4o", messages=history)
    first = time.perf_counter() - started
    # The same history where it fits: every request passes through unchanged.
    roomy = AutomaticChatSession(
        model_profiles={"gpt-4o": {"context_window": tokens * 4, "encoding": "o200k_base"}},
        compile_floor=tokens * 4,
    )
    roomy.prepare(model="gpt-4o", messages=history)
    prepare_s, passed_s, dumps_s, codes = [], [], [], []
    appended_s: list[float] = []
    for _ in range(repeat * 4):  # until ``repeat`` reused requests (a few rebuild between)
        if len(prepare_s) >= repeat:
            break
        step += 1
        history = history + agent_step(step)
        started = time.perf_counter()
        _, decision = session.prepare(model="gpt-4o", messages=history)
        took = time.perf_counter() - started
        if decision.code == "compiled":
            appended_s.append(took)
        else:
            prepare_s.append(took)
        codes.append(decision.code)
        started = time.perf_counter()
        _, passed = roomy.prepare(model="gpt-4o", messages=history)
        passed_s.append(time.perf_counter() - started)
        codes.append(passed.code)
        started = time.perf_counter()
        json.dumps(history)
        dumps_s.append(time.perf_counter() - started)
    # Go on until the reused view no longer fits and a block is appended (and time it).
    rebuilds: dict[str, float] = {}
    if appended_s:
        rebuilds["append"] = max(appended_s)
    for _ in range(600):
        if "append" in rebuilds:
            break
        step += 1
        history = history + agent_step(step)
        started = time.perf_counter()
        _, rebuilt = session.prepare(model="gpt-4o", messages=history)
        if rebuilt.code == "compiled":
            rebuilds.setdefault(rebuilt.rebuild or "build", time.perf_counter() - started)
            codes.append(rebuilt.code)
    return {
        "messages": len(history),
        "tokens": decision.tokens_before,
        "counter": decision.counter,
        "compile_s": first,
        "reused_s": min(prepare_s),
        "appended_s": rebuilds.get("append"),
        "merged_s": rebuilds.get("merge"),
        "passthrough_s": min(passed_s),
        "json_dumps_s": min(dumps_s),
        "codes": sorted(set(codes)),
    }


_FIRST_REQUEST = """
import sys, time
from tomc._gateway.proxy.options import new_session, warm_up
if sys.argv[1] == "warm":
    warm_up()
turns = [{"role": "assistant" if i % 2 == 0 else "user", "content": "x " * 2000 + str(i)}
         for i in range(60)]
body = {"model": "claude-opus-4-8", "max_tokens": 32000, "system": "You are a coding agent.",
        "messages": [{"role": "user", "content": "Fix the retry bug"}, *turns,
                     {"role": "user", "content": "next"}]}
started = time.perf_counter()
new_session().prepare_request(body, api="messages", context_target=392000)
print((time.perf_counter() - started) * 1000)
"""


def first_request_ms() -> dict[str, float]:
    """A gateway process's first request (a 240,000-character Claude Code body), in a fresh
    interpreter: ``cold`` as it comes, ``warm`` after :func:`warm_up` (what the gateway runs
    in a thread as it starts)."""
    out = {}
    for mode in ("cold", "warm"):
        run = subprocess.run(
            [sys.executable, "-c", _FIRST_REQUEST, mode],
            capture_output=True,
            text=True,
            check=True,
        )
        out[mode] = float(run.stdout.strip().splitlines()[-1])
    return out


def first_request_line() -> str:
    """:func:`first_request_ms` as a sentence of the report."""
    first = first_request_ms()
    return (
        "A gateway process's first request (a 240,000-character Claude Code body, a fresh "
        f"interpreter): {first['cold']:.0f} ms cold, {first['warm']:.0f} ms after the warm-up "
        "the gateway runs as it starts."
    )


def to_markdown(rows: list[dict[str, Any]]) -> list[str]:
    lines = [
        "| history | messages | pass-through | reused memory | rebuild (one more block) "
        "| whole build (a new session) | json.dumps of the messages |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        appended, merged = row["appended_s"], row["merged_s"]
        shown = f"{appended * 1000:.0f} ms" if appended is not None else "-"
        if merged is not None:
            shown += f" (a merge: {merged * 1000:.0f} ms)"
        lines.append(
            f"| {row['tokens']:,} tokens ({row['counter']}) | {row['messages']:,} "
            f"| {row['passthrough_s'] * 1000:.1f} ms | {row['reused_s'] * 1000:.1f} ms "
            f"| {shown} | {row['compile_s']:.2f} s | {row['json_dumps_s'] * 1000:.1f} ms |"
        )
    codes = sorted({code for row in rows for code in row["codes"]})
    lines += [
        "",
        f"Decisions of the timed requests: {', '.join(codes)}. Best of several requests each "
        "(a rebuild: the slowest seen), in-process (`prepare`, after the first request of the "
        "session read the history). The "
        "whole build is the first request of a new session on the same history: reading every "
        "message and compiling it.",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--tokens", default="100000,400000,1000000", help="history sizes, comma-separated"
    )
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.tokens.split(",") if size.strip()]
    print("\n".join(to_markdown([measure(size, args.repeat) for size in sizes])))
    print("\n" + first_request_line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
