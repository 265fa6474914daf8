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
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from agent_upstream import COUNTER_NAME, Script, probe_script  # noqa: E402
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


#: The defaults matrix: (agent, steps, characters per output, pause after step or None).
#: Claude Code's default target is 392K (Opus 4.8, 1M window), Codex's 180K (gpt-6.2-sol); the
#: priced policy may rewrite well before them.
DEFAULT_CELLS: tuple[tuple[str, int, int, int | None], ...] = (
    ("claude", 24, 28_000, None),  # below the 392K default target, past the first rewrite
    ("claude", 42, 28_000, None),  # just past the 392K default target direct
    ("claude", 42, 28_000, 20),  # the same with a pause longer than the cache lifetime
    ("claude", 93, 28_000, None),  # near the 1M window
    ("claude", 150, 12_000, None),  # a long session of smaller outputs
    ("codex", 30, 12_000, None),  # ends below the 180K default target
    ("codex", 56, 12_000, None),  # just past it
    ("codex", 56, 12_000, 28),  # with a pause
    ("codex", 104, 12_000, None),  # direct compacts itself once
)
#: The pause in the matrix: the cache lives ``TTL_S`` seconds, the pause lasts ``PAUSE_S``.
PAUSE_S, TTL_S = 10.0, 6.0


@dataclass(frozen=True)
class DefaultsRow:
    """One cell of the defaults matrix: what TOMC billed against direct, at the end, at its
    worst step and on the first request after a pause, and what the final requests kept
    (direct / TOMC / observation masking of direct's final request)."""

    agent: str
    steps: int
    chars: int
    pause: int | None
    direct_largest: int
    tomc_largest: int
    direct_compactions: int
    tomc_compactions: int
    end: float
    worst: float
    after_pause: float | None
    errors: int
    current: tuple[int, int, int]
    edits: tuple[int, int, int]
    facts: int
    edited: int
    finished: bool

    @classmethod
    def of(cls, direct: RunResult, tomc: RunResult) -> DefaultsRow:
        paused = direct.after_pause(), tomc.after_pause()
        after = None
        if paused[0] is not None and paused[1] is not None and paused[0].billed_input:
            after = paused[1].billed_input / paused[0].billed_input
        masked = direct.masked_kept()
        script = tomc.script
        return cls(
            agent=tomc.agent,
            steps=script.steps,
            chars=script.output_chars,
            pause=script.pause_after_step,
            direct_largest=direct.largest_prompt,
            tomc_largest=tomc.largest_prompt,
            direct_compactions=direct.compactions,
            tomc_compactions=tomc.compactions,
            end=tomc.billed_input / direct.billed_input,
            worst=tomc.worst_ratio(direct),
            after_pause=after,
            errors=len(tomc.client_errors),
            current=(direct.current_kept[0], tomc.current_kept[0], masked[0]),
            edits=(direct.edits_kept[0], tomc.edits_kept[0], masked[1]),
            facts=len(script.facts),
            edited=len(script.edits),
            finished=direct.finished and tomc.finished,
        )


def cell_script(steps: int, chars: int, pause: int | None) -> Script:
    """The fidelity probe of one defaults cell, with its pause (the cache shortened alike)."""
    if pause is None:
        return probe_script(steps, chars)
    return probe_script(steps, chars, pause_after_step=pause, pause_s=PAUSE_S, cache_ttl_s=TTL_S)


def defaults_table(rows: list[DefaultsRow]) -> str:
    lines = [
        "| agent | session | direct: largest prompt (own compactions) | `tomc run`: largest prompt "
        "(own compactions) | billed vs direct | worst step | first request after the pause "
        "| 4xx | current values kept (direct / TOMC / masking) | edited files kept |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        pause = f", pause after step {r.pause}" if r.pause else ""
        after = f"{r.after_pause:.2f}x" if r.after_pause is not None else "-"
        current = " / ".join(str(n) for n in r.current)
        edited = " / ".join(str(n) for n in r.edits)
        lines.append(
            f"| {r.agent} | {r.steps} x {r.chars:,}{pause} "
            f"| {r.direct_largest:,} ({r.direct_compactions}) "
            f"| {r.tomc_largest:,} ({r.tomc_compactions}) | {r.end:.2f}x "
            f"| {r.worst:.3f}x | {after} | {r.errors} | {current} of {r.facts} "
            f"| {edited} of {r.edited} |"
        )
    return "\n".join(lines)


def run_defaults(agents: list[str]) -> int:
    """Both CLIs at their true defaults (nothing shortened), direct and through ``tomc run``."""
    rows = defaults_rows(agents)
    print(defaults_heading() + "\n")
    print(defaults_table(rows))
    print("\nCommand: `python -m benchmarks.real_agents --defaults`")
    return 0 if all(r.finished for r in rows) else 1


def run_replay(agents: list[str], overrides: dict[str, object]) -> int:
    """The defaults cells direct, and TOMC priced offline on each recorded run
    (``tests/agent_cost_replay.py``) with ``overrides`` over the gateway's session options."""
    from dataclasses import replace

    from agent_cost_replay import replay_through_tomc
    from tomc._gateway.proxy.options import SESSION_OPTIONS

    options = replace(SESSION_OPTIONS, **overrides)
    print(f"## Offline replay of the defaults cells, session options {json.dumps(overrides)}\n")
    print("| agent | session | direct billed | replayed TOMC billed | vs direct | largest prompt |")
    print("|---|---|--:|--:|--:|--:|")
    for agent, steps, chars, pause in DEFAULT_CELLS:
        if agent not in agents or agent_binary(agent) is None:
            continue
        print(f"running {agent} {steps} x {chars} direct ...", file=sys.stderr, flush=True)
        script = cell_script(steps, chars, pause)
        direct = run_session(agent, "direct", script=script, settings={}, timeout_s=1800)
        replayed = replay_through_tomc(direct, options)
        note = " (direct compacted itself: the replay is not valid past it)" * bool(
            direct.compactions
        )
        print(
            f"| {agent} | {steps} x {chars:,}{', paused' if pause else ''}{note} "
            f"| {direct.billed_input:,.0f} | {replayed.billed_input:,.0f} "
            f"| {replayed.billed_input / direct.billed_input:.2f}x | {replayed.largest_prompt:,} |"
        )
    print(f"\nCommand: `python -m benchmarks.real_agents --replay '{json.dumps(overrides)}'`")
    return 0


def defaults_heading() -> str:
    return (
        "## Real agents at their true defaults, direct and through `tomc run` "
        f"(tokens: {COUNTER_NAME}; a pause lasts {PAUSE_S:g} s, the cache {TTL_S:g} s)"
    )


def defaults_rows(agents: list[str]) -> list[DefaultsRow]:
    """The defaults matrix's rows for the installed ``agents``."""
    rows = []
    for agent, steps, chars, pause in DEFAULT_CELLS:
        if agent not in agents or agent_binary(agent) is None:
            continue
        script = cell_script(steps, chars, pause)
        runs = {}
        for mode in ("direct", "tomc"):
            print(f"running {agent} {steps} x {chars} {mode} ...", file=sys.stderr, flush=True)
            runs[mode] = run_session(agent, mode, script=script, settings={}, timeout_s=1800)
        rows.append(DefaultsRow.of(runs["direct"], runs["tomc"]))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=64, help="tool steps in the session")
    parser.add_argument("--output-chars", type=int, default=4000, help="characters per output")
    parser.add_argument("--agents", default=",".join(AGENTS), help="claude,codex")
    parser.add_argument("--json", action="store_true", help="also print each run's summary")
    parser.add_argument(
        "--defaults",
        action="store_true",
        help="the matrix at the agents' true defaults (sessions of every length, with pauses)",
    )
    parser.add_argument(
        "--replay",
        metavar="JSON",
        help="run each defaults cell direct only and price TOMC offline on the recorded run, "
        "with these session options over the gateway's (e.g. '{\"payback_requests\": 2}')",
    )
    args = parser.parse_args(argv)
    parser_agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    if args.replay is not None:
        return run_replay(parser_agents, json.loads(args.replay))
    if args.defaults:
        return run_defaults(parser_agents)
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
