"""The real agent CLIs, direct and through ``tomc run``: what each run keeps and costs.

    python -m benchmarks.real_agents [--steps 64] [--output-chars 4000] [--agents claude,codex]

Claude Code and Codex (installed by ``npm ci`` at the repository root, or found through
``$TOMC_AGENTS_BIN`` / ``PATH``) run the same scripted long session against a loopback fake
provider (``tests/agent_upstream.py``: many shell steps printing large files, facts planted in
the first ones, each provider's prompt caching emulated), once straight to it and once through
``tomc run claude|codex`` with no TOMC options. The agents' own auto-compaction is shortened the
same way in both modes (``tests/real_agents.py``, ``DEFAULT_SETTINGS``) so that the direct run
compacts itself.

Columns: model requests (every POST to the model, rejected ones included), the agent's own
compactions, the largest and mean prompt (o200k tokens of what was sent), billed input
(Anthropic: input + 1.25 x cache writes + 0.1 x cache reads; OpenAI: uncached + 0.1 x cached)
and its ratio to the direct run, 4xx answers, and how many planted facts the final request
still carried. Not wired into ``benchmarks.run``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from agent_upstream import COUNTER_NAME, Script  # noqa: E402
from real_agents import AGENTS, DEFAULT_SETTINGS, RunResult, agent_binary, run_session  # noqa: E402


def table(results: list[RunResult]) -> str:
    direct = {r.agent: r.billed_input for r in results if r.mode == "direct"}
    lines = [
        "| agent | mode | finished | requests | own compactions | context target | largest prompt "
        "| mean prompt | billed input | vs direct | 4xx | evidence kept |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        base = direct.get(r.agent) or 0
        ratio = f"{r.billed_input / base:.2f}x" if base else "-"
        kept, facts = r.evidence_kept
        targets = [c.get("context_target") for c in r.conversations()] if r.status else []
        target = max((t for t in targets if isinstance(t, int)), default=None)
        lines.append(
            f"| {r.agent} | {r.mode} | {'yes' if r.finished else 'NO'} | {len(r.model_calls)} "
            f"| {r.compactions} | {f'{target:,}' if target else '-'} | {r.largest_prompt:,} "
            f"| {r.mean_prompt:,.0f} "
            f"| {r.billed_input:,.0f} | {ratio} | {len(r.client_errors)} | {kept}/{facts} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=64, help="tool steps in the session")
    parser.add_argument("--output-chars", type=int, default=4000, help="characters per output")
    parser.add_argument("--agents", default=",".join(AGENTS), help="claude,codex")
    parser.add_argument("--json", action="store_true", help="also print each run's summary")
    args = parser.parse_args(argv)
    script = Script(steps=args.steps, output_chars=args.output_chars)
    results: list[RunResult] = []
    missing = []
    for agent in [a.strip() for a in args.agents.split(",") if a.strip()]:
        if agent_binary(agent) is None:
            missing.append(agent)
            continue
        for mode in ("direct", "tomc"):
            print(f"running {agent} {mode} ...", file=sys.stderr, flush=True)
            results.append(run_session(agent, mode, script=script, timeout_s=600))
    print(
        f"## Real agents, direct and through `tomc run` ({args.steps} steps, "
        f"{args.output_chars:,} characters per output, tokens: {COUNTER_NAME})\n"
    )
    print(table(results))
    print()
    shown = " ".join(shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    print(f"Command: `python -m benchmarks.real_agents {shown}`".rstrip())
    print("\nAgent command lines ($RUN is the run's temporary folder):\n")
    for r in results:
        settings = json.dumps(dict(DEFAULT_SETTINGS[r.agent]))
        print(
            f"- {r.agent} {r.mode} (own compaction settings {settings}): "
            f"`{' '.join(shlex.quote(a) for a in r.command)}`"
        )
    for r in results:
        if r.status is not None:
            convs = r.summary().get("gateway", {}).get("conversations")
            print(f"\n{r.agent} through TOMC, /status.json conversations: `{json.dumps(convs)}`")
    if args.json:
        for r in results:
            print("\n```json\n" + json.dumps(r.summary(), indent=1) + "\n```")
    if missing:
        print(f"\nnot installed (npm ci at the repository root): {', '.join(missing)}")
    return 0 if all(r.finished for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
