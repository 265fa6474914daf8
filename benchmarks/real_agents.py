"""The real agent CLIs, direct and through ``tomc run``: what each run keeps and costs.

    python -m benchmarks.real_agents [--steps 64] [--output-chars 4000] [--agents claude,codex]
    python -m benchmarks.real_agents --defaults [--probe realistic|synthetic] [--cells ...]
    python -m benchmarks.real_agents --replay-fidelity [--cells ...] [--options JSON] [--refresh]
    python -m benchmarks.real_agents --record [--cells ...] [--refresh]
    python -m benchmarks.real_agents --replay JSON [--cells ...]

Claude Code and Codex (installed by ``npm ci`` at the repository root, or found through
``$TOMC_AGENTS_BIN`` / ``PATH``) run the same scripted long session against a loopback fake
provider (``tests/agent_upstream.py``: many shell steps printing large files, each provider's
prompt caching emulated), once straight to it and once through ``tomc run claude|codex`` with no
TOMC options.

**Without options** (the first line): the synthetic session (generated log lines, three facts
planted in the first files) with the agents' own auto-compaction shortened the same way in both
modes (``tests/real_agents.py``, ``DEFAULT_SETTINGS``) so that the direct run compacts itself.
Columns: model requests (every POST to the model, rejected ones included), the agent's own
compactions, the largest and mean prompt (o200k tokens of what was sent), billed input
(Anthropic: input + 1.25 x cache writes + 0.1 x cache reads; OpenAI: uncached + 0.1 x cached)
and its ratio to the direct run, 4xx answers, and how many planted facts the final request
still carried.

**--defaults**: the matrix of :data:`DEFAULT_CELLS` at the agents' true defaults (nothing
shortened), each cell a fidelity probe run direct and through ``tomc run``. The probe is
``--probe realistic`` by default (``tests/realistic_probe.py``: real text from the Python
standard library, 20 values in 20 formats that the task names in plain words only, 7 of them set
again later, 8 files edited); ``--probe synthetic`` runs the older one
(:func:`agent_upstream.probe_script`: ``name = value`` lines in generated logs, keys named in the
task). Each cell reports billed input against direct (at the end, at its worst step, on the
first request after a pause) and what the final request carries, direct / TOMC / observation
masking of direct's final request (the newest 10 tool outputs kept): current values, values
carried only by their stale setting, calls of the session named (each step's file path),
edited files named. Its direct runs are saved to the cache below too.

**The fast offline loop** (``--replay-fidelity``): each cell's direct run is recorded once, every
model request's body as the provider received it, to ``.bench-cache/real-agents/`` (git-ignored;
``<agent>-<steps>x<chars>[-pause<k>]-<probe>.json.gz``, 2-40 MB each, 120 MB for the nine
cells; recorded again when the script or the CLI's version changed, or with ``--refresh``;
``--record`` records without replaying; a direct run takes 10-60 s, the nine about 3 minutes).
Then TOMC's rewrite is replayed offline over the recorded requests, as the gateway would decide
them (``tests/agent_cost_replay.py``, with ``--options`` over the gateway's session options),
and so is observation masking; per cell it prints direct, TOMC and masking: the final request's
size, what it carries (as above), billed input and its ratio to direct and to masking. A cell
replays in 1-10 s, the nine in about a minute, with ``src/tomc`` as it is in the working tree
(``PYTHONPATH=<other tree>/src`` replays another). The offline figures can differ from a live
``tomc run`` (``--defaults``): a live agent reacts to the rewrite (the token counts it sees,
when it would compact itself), the replay sends what it sent direct.

**--replay JSON**: the cells' direct runs (from the cache) and TOMC priced offline with these
session options over the gateway's (e.g. ``'{"payback_requests": 2}'``).

``--cells`` names cells as ``claude-42x28000`` or ``codex-56x12000-pause28`` (comma-separated;
default: every cell). Not wired into ``benchmarks.run`` except ``--defaults``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent / "tests"
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

from agent_upstream import COUNTER_NAME, Script, probe_script  # noqa: E402
from real_agents import AGENTS, DEFAULT_SETTINGS, RunResult, agent_binary, run_session  # noqa: E402
from realistic_probe import ProbeScore, realistic_script  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
#: Where the offline loop keeps its recorded direct runs (git-ignored).
CACHE = REPO / ".bench-cache" / "real-agents"
PROBES = ("realistic", "synthetic")


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
    ("codex", 104, 12_000, None),  # the synthetic probe's direct run compacts itself once
)
Cell = tuple[str, int, int, "int | None"]
#: The pause in the matrix: the cache lives ``TTL_S`` seconds, the pause lasts ``PAUSE_S``.
PAUSE_S, TTL_S = 10.0, 6.0


def cell_id(cell: Cell) -> str:
    agent, steps, chars, pause = cell
    return f"{agent}-{steps}x{chars}" + (f"-pause{pause}" if pause else "")


def pick_cells(names: str | None, agents: list[str]) -> list[Cell]:
    """The cells ``--cells`` names (every cell when ``None``), of the installed ``agents``."""
    known = {cell_id(c): c for c in DEFAULT_CELLS}
    if names:
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in known]
        if unknown:
            raise SystemExit(f"unknown cells {unknown}; known: {', '.join(known)}")
        cells = [known[n] for n in wanted]
    else:
        cells = list(DEFAULT_CELLS)
    return [c for c in cells if c[0] in agents and agent_binary(c[0]) is not None]


@dataclass(frozen=True)
class DefaultsRow:
    """One cell of the defaults matrix: what TOMC billed against direct, at the end, at its
    worst step and on the first request after a pause, and what the final requests carry
    (direct / TOMC / observation masking of direct's final request)."""

    agent: str
    steps: int
    chars: int
    pause: int | None
    probe: str
    direct_largest: int
    tomc_largest: int
    direct_compactions: int
    tomc_compactions: int
    end: float
    worst: float
    after_pause: float | None
    errors: int
    scores: tuple[ProbeScore, ProbeScore, ProbeScore]
    finished: bool

    @classmethod
    def of(cls, direct: RunResult, tomc: RunResult, probe: str = "realistic") -> DefaultsRow:
        paused = direct.after_pause(), tomc.after_pause()
        after = None
        if paused[0] is not None and paused[1] is not None and paused[0].billed_input:
            after = paused[1].billed_input / paused[0].billed_input
        script = tomc.script
        return cls(
            agent=tomc.agent,
            steps=script.steps,
            chars=script.output_chars,
            pause=script.pause_after_step,
            probe=probe,
            direct_largest=direct.largest_prompt,
            tomc_largest=tomc.largest_prompt,
            direct_compactions=direct.compactions,
            tomc_compactions=tomc.compactions,
            end=tomc.billed_input / direct.billed_input,
            worst=tomc.worst_ratio(direct),
            after_pause=after,
            errors=len(tomc.client_errors),
            scores=(direct.final_score(), tomc.final_score(), direct.masked_score()),
            finished=direct.finished and tomc.finished,
        )


def cell_script(steps: int, chars: int, pause: int | None, probe: str = "realistic") -> Script:
    """The fidelity probe of one defaults cell, with its pause (the cache shortened alike)."""
    make = {"realistic": realistic_script, "synthetic": probe_script}[probe]
    if pause is None:
        return make(steps, chars)
    return make(steps, chars, pause_after_step=pause, pause_s=PAUSE_S, cache_ttl_s=TTL_S)


def _three(scores: tuple[ProbeScore, ...], field: str, total: str) -> str:
    return " / ".join(str(getattr(s, field)) for s in scores) + f" of {getattr(scores[0], total)}"


def defaults_table(rows: list[DefaultsRow]) -> str:
    lines = [
        "| agent | session | direct: largest prompt (own compactions) | `tomc run`: largest prompt "
        "(own compactions) | billed vs direct | worst step | first request after the pause "
        "| 4xx | current values (direct / TOMC / masking) | stale only | calls named "
        "| edited files |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        pause = f", pause after step {r.pause}" if r.pause else ""
        after = f"{r.after_pause:.2f}x" if r.after_pause is not None else "-"
        lines.append(
            f"| {r.agent} | {r.steps} x {r.chars:,}{pause} "
            f"| {r.direct_largest:,} ({r.direct_compactions}) "
            f"| {r.tomc_largest:,} ({r.tomc_compactions}) | {r.end:.2f}x "
            f"| {r.worst:.3f}x | {after} | {r.errors} "
            f"| {_three(r.scores, 'current', 'values')} "
            f"| {_three(r.scores, 'stale_only', 'changed')} "
            f"| {_three(r.scores, 'calls_named', 'calls')} "
            f"| {_three(r.scores, 'edits', 'edited')} |"
        )
    return "\n".join(lines)


def run_defaults(agents: list[str], probe: str = "realistic", cells: str | None = None) -> int:
    """Both CLIs at their true defaults (nothing shortened), direct and through ``tomc run``."""
    rows = defaults_rows(agents, probe, cells)
    print(defaults_heading(probe) + "\n")
    print(defaults_table(rows))
    shown = f" --probe {probe}" if probe != "realistic" else ""
    shown += f" --cells {cells}" if cells else ""
    print(f"\nCommand: `python -m benchmarks.real_agents --defaults{shown}`")
    return 0 if all(r.finished for r in rows) else 1


def defaults_heading(probe: str = "realistic") -> str:
    return (
        "## Real agents at their true defaults, direct and through `tomc run` "
        f"({probe} probe; tokens: {COUNTER_NAME}; a pause lasts {PAUSE_S:g} s, the cache "
        f"{TTL_S:g} s)"
    )


def defaults_rows(
    agents: list[str], probe: str = "realistic", cells: str | None = None
) -> list[DefaultsRow]:
    """The defaults matrix's rows for the installed ``agents`` (each direct run is saved to the
    offline loop's cache as well)."""
    rows = []
    for cell in pick_cells(cells, agents):
        agent, steps, chars, pause = cell
        script = cell_script(steps, chars, pause, probe)
        runs = {}
        for mode in ("direct", "tomc"):
            print(f"running {cell_id(cell)} {mode} ...", file=sys.stderr, flush=True)
            runs[mode] = run_session(agent, mode, script=script, settings={}, timeout_s=1800)
        save_direct(cell, probe, script, runs["direct"])
        rows.append(DefaultsRow.of(runs["direct"], runs["tomc"], probe))
    return rows


# ---------------------------------------------------------------------- the offline loop


_VERSIONS: dict[str, str] = {}


def cli_version(agent: str) -> str:
    """``<agent> --version`` of the installed CLI."""
    if agent not in _VERSIONS:
        binary = agent_binary(agent)
        try:
            done = subprocess.run(
                [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False
            )
            _VERSIONS[agent] = done.stdout.strip() or done.stderr.strip()
        except (OSError, subprocess.TimeoutExpired) as exc:
            _VERSIONS[agent] = f"unknown ({exc})"
    return _VERSIONS[agent]


def script_fingerprint(script: Script) -> str:
    """A hash of everything the agent sees of ``script``: the task, each step's command and
    file, the edited files, the pause and the cache lifetime."""
    digest = hashlib.sha256()
    parts = [script.task(), repr(sorted(script.edits.items())), repr(type(script).__name__)]
    parts += [repr((script.pause_after_step, script.pause_s, script.cache_ttl_s))]
    for step in range(1, script.steps + 1):
        parts += [script.command(step), script.file_text(step)]
    for part in parts:
        digest.update(part.encode("utf-8", "surrogatepass") + b"\x1f")
    return digest.hexdigest()[:16]


def cache_path(cell: Cell, probe: str) -> Path:
    return CACHE / f"{cell_id(cell)}-{probe}.json.gz"


def save_direct(cell: Cell, probe: str, script: Script, run: RunResult) -> Path:
    """Keep ``run`` (a direct run of ``cell``) for the offline loop."""
    path = cache_path(cell, probe)
    run.save(
        path,
        {
            "cell": cell_id(cell),
            "probe": probe,
            "fingerprint": script_fingerprint(script),
            "cli": cli_version(cell[0]),
            "python": platform.python_version(),
            "recorded": time.strftime("%Y-%m-%d %H:%M:%S"),
        },
    )
    return path


def recorded_direct(cell: Cell, probe: str = "realistic", refresh: bool = False) -> RunResult:
    """``cell``'s direct run from the cache, recorded first when it is missing or stale (its
    script or the CLI's version changed) or when ``refresh``."""
    agent, steps, chars, pause = cell
    script = cell_script(steps, chars, pause, probe)
    path = cache_path(cell, probe)
    if path.is_file() and not refresh:
        run, meta = RunResult.load(path, script)
        fresh = meta.get("fingerprint") == script_fingerprint(script) and meta.get(
            "cli"
        ) == cli_version(agent)
        if fresh:
            return run
        print(f"{path.name} is stale (script or CLI changed): recording again", file=sys.stderr)
    print(f"recording {cell_id(cell)} direct ({probe}) ...", file=sys.stderr, flush=True)
    run = run_session(agent, "direct", script=script, settings={}, timeout_s=1800)
    if not run.finished:
        print(f"warning: {cell_id(cell)} direct did not finish", file=sys.stderr)
    save_direct(cell, probe, script, run)
    return run


def _shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def run_record(agents: list[str], probe: str, cells: str | None, refresh: bool) -> int:
    for cell in pick_cells(cells, agents):
        run = recorded_direct(cell, probe, refresh)
        print(
            f"{cell_id(cell)} ({probe}): {len(run.model_calls)} requests, finished "
            f"{run.finished}, in {_shown(cache_path(cell, probe))}"
        )
    return 0


def run_replay(
    agents: list[str],
    overrides: dict[str, object],
    cells: str | None = None,
    probe: str = "realistic",
) -> int:
    """The defaults cells direct, and TOMC priced offline on each recorded run
    (``tests/agent_cost_replay.py``) with ``overrides`` over the gateway's session options."""
    from dataclasses import replace

    from agent_cost_replay import REPLAY_OPTIONS, replay_through_tomc

    options = replace(REPLAY_OPTIONS, **overrides)
    print(f"## Offline replay of the defaults cells, session options {json.dumps(overrides)}\n")
    print("| agent | session | direct billed | replayed TOMC billed | vs direct | largest prompt |")
    print("|---|---|--:|--:|--:|--:|")
    for cell in pick_cells(cells, agents):
        agent, steps, chars, pause = cell
        direct = recorded_direct(cell, probe)
        replayed = replay_through_tomc(direct, options)
        note = " (direct compacted itself: the replay is not valid past it)" * bool(
            direct.compactions
        )
        print(
            f"| {agent} | {steps} x {chars:,}{', paused' if pause else ''}{note} "
            f"| {direct.billed_input:,.0f} | {replayed.billed_input:,.0f} "
            f"| {replayed.billed_input / direct.billed_input:.2f}x | {replayed.largest_prompt:,} |"
        )
    shown = f" --cells {cells}" if cells else ""
    shown += f" --probe {probe}" if probe != "realistic" else ""
    print(
        f"\nCommand: `python -m benchmarks.real_agents --replay '{json.dumps(overrides)}'{shown}`"
    )
    return 0


@dataclass(frozen=True)
class FidelityRow:
    """One mode of one cell in the offline loop: the final request's size and score, billed
    input."""

    cell: str
    mode: str
    final_prompt: int
    score: ProbeScore
    billed: float
    worst: float | None
    seconds: float


def fidelity_rows(
    cell: Cell, probe: str, options: dict[str, object], refresh: bool = False
) -> list[FidelityRow]:
    """Direct (recorded), TOMC replayed offline and observation masking replayed offline."""
    from dataclasses import replace

    from agent_cost_replay import REPLAY_OPTIONS, replay_masked, replay_through_tomc

    direct = recorded_direct(cell, probe, refresh)
    own = f", {direct.compactions} own compaction(s): replays past it not valid" * bool(
        direct.compactions
    )
    rows = [_fidelity_row(cell, f"direct (recorded{own})", direct, direct, 0.0)]
    started = time.monotonic()
    tomc = replay_through_tomc(direct, replace(REPLAY_OPTIONS, **options)).run
    rows.append(_fidelity_row(cell, "TOMC (offline)", tomc, direct, time.monotonic() - started))
    started = time.monotonic()
    masked = replay_masked(direct).run
    rows.append(
        _fidelity_row(cell, "masking (offline)", masked, direct, time.monotonic() - started)
    )
    return rows


def _fidelity_row(
    cell: Cell, mode: str, run: RunResult | None, direct: RunResult, seconds: float
) -> FidelityRow:
    assert run is not None
    final = run._final()
    return FidelityRow(
        cell=cell_id(cell),
        mode=mode,
        final_prompt=final.prompt_tokens if final is not None else 0,
        score=run.final_score(),
        billed=run.billed_input,
        worst=run.worst_ratio(direct) if run is not direct else None,
        seconds=seconds,
    )


def fidelity_table(rows: list[FidelityRow]) -> str:
    lines = [
        "| cell | mode | final prompt | current values | stale only | calls named | edited files "
        "| billed input | vs direct | vs masking | worst step | replay s |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    base: dict[str, FidelityRow] = {}
    masked: dict[str, FidelityRow] = {}
    for r in rows:
        if r.mode.startswith("direct"):
            base[r.cell] = r
        if r.mode.startswith("masking"):
            masked[r.cell] = r
    for r in rows:
        s = r.score
        direct, mask = base.get(r.cell), masked.get(r.cell)
        vs_direct = f"{r.billed / direct.billed:.2f}x" if direct and direct.billed else "-"
        vs_mask = f"{r.billed / mask.billed:.2f}x" if mask and mask.billed else "-"
        lines.append(
            f"| {r.cell} | {r.mode} | {r.final_prompt:,} | {s.current}/{s.values} "
            f"| {s.stale_only}/{s.changed} | {s.calls_named}/{s.calls} | {s.edits}/{s.edited} "
            f"| {r.billed:,.0f} | {vs_direct} | {vs_mask} "
            f"| {f'{r.worst:.3f}x' if r.worst is not None else '-'} "
            f"| {r.seconds:.1f} |"
        )
    return "\n".join(lines)


def run_replay_fidelity(
    agents: list[str],
    probe: str,
    cells: str | None,
    options: dict[str, object],
    refresh: bool,
) -> int:
    """The offline loop (see the module docstring)."""
    rows: list[FidelityRow] = []
    for cell in pick_cells(cells, agents):
        rows += fidelity_rows(cell, probe, options, refresh)
        print(f"replayed {cell_id(cell)}", file=sys.stderr, flush=True)
    print(
        f"## Offline replay of recorded direct runs ({probe} probe, session options "
        f"{json.dumps(options)}; tokens: {COUNTER_NAME})\n"
    )
    print(fidelity_table(rows))
    print(
        "\nFinal prompt: tokens of the final request; stale only: changed values carried only by "
        "their earlier setting; calls named: steps whose file path the final request names; "
        "masking: every tool output but the newest 10 replaced by a placeholder. Offline: a live "
        "`tomc run` differs a little (the agent reacts to the rewrite)."
    )
    shown = f" --cells {cells}" if cells else ""
    shown += f" --probe {probe}" if probe != "realistic" else ""
    shown += f" --options '{json.dumps(options)}'" if options else ""
    print(f"\nCommand: `python -m benchmarks.real_agents --replay-fidelity{shown}`")
    return 0


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
        help="each defaults cell's recorded direct run, and TOMC priced offline on it with these "
        "session options over the gateway's (e.g. '{\"payback_requests\": 2}')",
    )
    parser.add_argument(
        "--replay-fidelity",
        action="store_true",
        help="the offline loop: record each cell's direct run once (.bench-cache/), replay TOMC "
        "and observation masking over it, print what each final request keeps and bills",
    )
    parser.add_argument(
        "--record", action="store_true", help="record the cells' direct runs only (the cache)"
    )
    parser.add_argument("--probe", choices=PROBES, default="realistic", help="the fidelity probe")
    parser.add_argument("--cells", help="comma-separated cells, e.g. claude-42x28000 (default all)")
    parser.add_argument(
        "--options", default="{}", help="--replay-fidelity: session options over the gateway's"
    )
    parser.add_argument(
        "--refresh", action="store_true", help="record the direct runs again even when cached"
    )
    args = parser.parse_args(argv)
    parser_agents = [a.strip() for a in args.agents.split(",") if a.strip()]
    if args.replay is not None:
        return run_replay(parser_agents, json.loads(args.replay), args.cells, args.probe)
    if args.replay_fidelity:
        options = json.loads(args.options)
        return run_replay_fidelity(parser_agents, args.probe, args.cells, options, args.refresh)
    if args.record:
        return run_record(parser_agents, args.probe, args.cells, args.refresh)
    if args.defaults:
        return run_defaults(parser_agents, args.probe, args.cells)
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
