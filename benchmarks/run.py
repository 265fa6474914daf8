"""The benchmark suite: speed, scale and answer retention beside the baselines, in one command.

    python -m benchmarks.run [--quick]      (or: make bench / make bench-quick)

Writes benchmarks/RESULTS.md (a quick run: RESULTS-quick.md) and PNG plots, and says where.
Figures are whole-compile wall times on this machine (best of several runs); they are
CPU/compiler timings, not provider latency. Sections that need a data set (LoCoMo, the agent
trajectories) read it from ../shared/data, or the folder $TOMC_BENCH_DATA names, and are
skipped with a note naming the file when it is missing. Progress goes to stderr: bars on a
terminal, plain lines otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import tomc
from benchmarks import baselines, locomo, workloads

# tqdm here is tqdm's bar on a terminal and plain progress lines otherwise.
from benchmarks.progress import DATA_DIR, reporter, say, step, tqdm
from tomc._core.lexicon import LEXICAL_PATTERN

OUT = Path(__file__).resolve().parent
STRATEGIES = ("tomc", "tomc_raw", "rag", "auto")
METHODS = (*STRATEGIES, "recency", "bm25s")
SHARES = (0.1, 0.2, 0.4, 0.8)


def best_time(fn: Callable[[], object], repeat: int) -> float:
    return best_times([fn], repeat)[0]


def best_times(fns: list[Callable[[], object]], repeat: int) -> list[float]:
    """Best wall time of each function, run in turn ``repeat`` times, so that a ratio of two
    is measured under the same machine load (the machine is shared)."""
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for k, fn in enumerate(fns):
            started = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - started)
    return best


#: Scaling fixtures: the seed's state/log history (1 operation line in 8) and a mixed history
#: (every other line a SET, COPY or relation edge).
SPEED_FIXTURES = {"state_log": workloads.state_log, "mixed_log": workloads.mixed_log}
#: Every route is timed on the mixed history (it has variables, relation edges and log words):
#: the fixture's own value question (state), and these tasks.
ROUTE_TASKS = {
    "count": "How many times did a build pass?",
    "top words": "What are the 10 most common words?",
    "relation": "relation: assigned > owns, which team does alpha.dev reach?",
    "raw": "What did the user say about the dashboard?",
}


def speed(fixture: str, sizes: list[int], repeat: int) -> list[dict]:
    rows = []
    make = SPEED_FIXTURES[fixture]
    for size in tqdm(sizes, desc=f"speed {fixture}", file=sys.stderr):
        case = make(size)
        lines = baselines.lines_of(case.history)
        budget = int(0.8 * size)
        routes = ROUTE_TASKS if fixture == "mixed_log" else {}
        floor, compile_s, *route_s = best_times(
            [
                lambda c=case: LEXICAL_PATTERN.findall(c.history),
                lambda c=case, b=budget: tomc.compile_memory(c.history, c.task, budget_tokens=b),
                *(
                    lambda c=case, t=task, b=budget: tomc.compile_memory(
                        c.history, t, budget_tokens=b
                    )
                    for task in routes.values()
                ),
            ],
            repeat,
        )
        bm25s_s = best_time(
            lambda ls=lines, c=case, b=budget: baselines.bm25s_select(ls, c.task, b),
            max(1, repeat // 2),
        )
        probe = subprocess.run(
            [sys.executable, "-m", "benchmarks.rss_probe", fixture, str(size)],
            capture_output=True,
            text=True,
            check=True,
            cwd=OUT.parent,
        )
        rss = json.loads(probe.stdout)
        rows.append(
            {
                "tokens": size,
                "chars": len(case.history),
                "floor_s": floor,
                "compile_s": compile_s,
                "bm25s_s": bm25s_s,
                "x_floor": compile_s / floor,
                "x_bm25s": compile_s / bm25s_s,
                "peak_mb": rss["peak_mb"],
                "retained": rss["ok"],
                "routes": {
                    route: {"compile_s": t, "x_floor": t / floor}
                    for route, t in zip(routes, route_s, strict=True)
                },
            }
        )
    return rows


def chain_speed(lengths: list[int], repeat: int) -> list[dict]:
    """``V0 = 1`` then ``V{i} copies V{i-1}``: replay must stay linear in the chain length."""
    rows = []
    for n in tqdm(lengths, desc="copy chain", file=sys.stderr):
        case = workloads.copy_chain(n)
        floor, compile_s = best_times(
            [
                lambda c=case: LEXICAL_PATTERN.findall(c.history),
                lambda c=case: tomc.compile_memory(c.history, c.task),
            ],
            repeat,
        )
        memory = tomc.compile_memory(case.history, case.task).compiled_memory
        rows.append(
            {
                "lines": n,
                "floor_s": floor,
                "compile_s": compile_s,
                "x_floor": compile_s / floor,
                "us_per_line": compile_s / n * 1e6,
                "retained": case.retained(memory),
            }
        )
    return rows


def memory_for(method: str, case: workloads.Case, lines: list[str], budget: int) -> str:
    if method == "recency":
        return baselines.recency_truncation(lines, budget)
    if method == "bm25s":
        return baselines.bm25s_select(lines, case.task, budget)
    return tomc.compile_memory(
        case.history, case.task, budget_tokens=budget, strategy=method
    ).compiled_memory


def retention_cases(quick: bool) -> list[workloads.Case]:
    seeds = range(2 if quick else 5)
    cases = []
    for seed in seeds:
        cases.append(workloads.state_log(20_000 if quick else 100_000, seed))
        for hops in (1, 4, 10) if quick else range(1, 11):
            cases.append(workloads.variable_tracking(hops, 300, seed))
            cases.append(workloads.variable_tracking(hops, 300, seed, reassign=True))
        cases.append(workloads.counting(400, seed))
        cases.append(workloads.counting(400, seed, chinese=True))
        cases.append(workloads.common_words(900, seed))
        for labels in (2, 3, 4):
            cases.append(workloads.relation_chains(40, labels, seed))
    return cases


def retention(quick: bool) -> dict:
    table: dict[tuple[str, str, float], list[bool]] = defaultdict(list)
    cases = retention_cases(quick)
    for case in tqdm(cases, desc="retention", file=sys.stderr):
        lines = baselines.lines_of(case.history)
        size = tomc.LexicalCounter().count(case.history)
        for share in SHARES:
            budget = int(share * size)
            for method in METHODS:
                table[(case.family, method, share)].append(
                    case.retained(memory_for(method, case, lines, budget))
                )
    return table


def locomo_recall(quick: bool) -> tuple[dict, int, int]:
    """Recall per (method, budget, category); empty when the LoCoMo file is missing."""
    path = locomo.DEFAULT_PATH
    if not path.is_file():
        say(f"LoCoMo recall skipped: {path} not found")
        return {}, 0, 0
    conversations, questions, skipped = locomo.load(path)
    if quick:
        questions = questions[::8]
    budgets = (1000, 2000, 4000, 8000)
    methods = ("tomc_raw", "rag", "auto", "recency", "bm25s")
    scores: dict[tuple[str, int, int], list[float]] = defaultdict(list)
    indexes: dict[int, object] = {}
    for q in tqdm(questions, desc="locomo", file=sys.stderr):
        conv = conversations[q.conversation]
        history = "\n".join(conv.turns)
        lines = list(conv.turns)
        if q.conversation not in indexes:
            indexes[q.conversation] = baselines.bm25s_index(lines)
        for budget in budgets:
            for method in methods:
                if method == "recency":
                    memory = baselines.recency_truncation(lines, budget)
                elif method == "bm25s":
                    memory = baselines.bm25s_select(
                        lines, q.question, budget, indexes[q.conversation]
                    )
                else:
                    memory = tomc.compile_memory(
                        history, q.question, budget_tokens=budget, strategy=method
                    ).compiled_memory
                scores[(method, budget, q.category)].append(locomo.recall(memory, conv, q))
    return scores, len(questions), skipped


def plot_latency(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r["tokens"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(x, [r["compile_s"] for r in rows], "o-", label="tomc_raw compile (80% budget)")
    ax.loglog(x, [r["floor_s"] for r in rows], "s--", label="floor: one lexical regex pass")
    ax.loglog(x, [r["bm25s_s"] for r in rows], "^-", label="bm25s index + query + pack")
    ax.set_xlabel("history size (lexical tokens)")
    ax.set_ylabel("seconds (best of runs)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_retention(table: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = sorted({family for family, _, _ in table})
    cols = 4
    rows = (len(families) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, family in zip(axes.flat, families, strict=False):
        for method in METHODS:
            ys = [statistics.mean(table[(family, method, s)]) for s in SHARES]
            ax.plot([int(s * 100) for s in SHARES], ys, marker="o", label=method)
        ax.set_title(family)
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("budget (% of history)")
    for ax in list(axes.flat)[len(families) :]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def simulator_section(quick: bool) -> list[str]:
    from tomc._simulation.simulate import simulate

    path = locomo.DEFAULT_PATH
    if not path.is_file():
        say(f"the simulator's LoCoMo chats are skipped: {path} not found")
    progress, done = reporter("simulator replays")
    try:
        report = simulate(quick=quick, locomo=path, progress=progress)
    finally:
        done()
    return [
        "Produced by the same run (`tomc simulate` prints it alone).",
        "",
        *report.to_markdown().splitlines(),
    ]


def real_agents_section(quick: bool) -> list[str]:
    """The real Claude Code and Codex CLIs, direct and through ``tomc run`` (when installed)."""
    from benchmarks import real_agents

    script = real_agents.Script(steps=24 if quick else 64, output_chars=4000)
    results, missing = [], []
    for agent in real_agents.AGENTS:
        if real_agents.agent_binary(agent) is None:
            missing.append(agent)
            continue
        for mode in ("direct", "tomc"):
            results.append(real_agents.run_session(agent, mode, script=script, timeout_s=600))
    if not results:
        return ["Skipped: the agent CLIs are not installed (`npm ci` at the repository root)."]
    lines = [
        "Produced by the same run (`python -m benchmarks.real_agents"
        f"{' --steps 24' if quick else ''}` prints it alone): the real CLIs pinned in "
        f"package.json, {script.steps} shell steps of {script.output_chars:,} characters each "
        "against a loopback provider that emulates each provider's prompt caching, once direct "
        "and once through `tomc run` with no options; the agents' own compaction shortened the "
        f"same way in both ({real_agents.DEFAULT_SETTINGS}).",
        "",
        real_agents.table(results),
    ]
    if not quick:  # the defaults matrix takes minutes: full runs only
        from benchmarks.real_agents import defaults_heading, defaults_rows, defaults_table

        rows = defaults_rows(list(real_agents.AGENTS))
        lines += [
            "",
            "#" + defaults_heading(),
            "",
            "Produced by the same run (`python -m benchmarks.real_agents --defaults` prints it "
            "alone): nothing shortened; each session is the realistic probe (standard-library "
            "text, 20 values in 20 formats named in plain words, 7 set again later, 8 files "
            "edited); worst step: the highest ratio of billed input so far at any step; masking: "
            "observation masking of direct's final request; stale only: changed values carried "
            "only by their earlier setting; calls named: steps whose file path the final request "
            "names.",
            "",
            defaults_table(rows),
        ]
    if missing:
        lines += ["", f"Not installed: {', '.join(missing)}."]
    return lines


def agent_loop_section(quick: bool) -> list[str]:
    from benchmarks import agent_replay, trajectories

    path = trajectories.DEFAULT_DATA
    if not path.is_file():
        return [f"Skipped: {path.name} not found in {_data_dir_shown()}/ (read there at run time)."]
    report = agent_replay.run(
        path,
        windows=agent_replay.QUICK_WINDOWS if quick else agent_replay.WINDOWS,
        limit=agent_replay.QUICK_TRAJECTORIES if quick else None,
        dialects=agent_replay.QUICK_DIALECTS if quick else agent_replay.DIALECT_NAMES,
    )
    from benchmarks import gateway_load, request_overhead

    sizes = (100_000,) if quick else (100_000, 400_000, 1_000_000)
    overheads = [request_overhead.measure(size) for size in sizes]
    return [
        "Produced by the same run (`python -m benchmarks.agent_replay"
        f"{' --quick' if quick else ' --dialects chat,messages,responses'}` prints it alone).",
        "",
        *report.to_markdown().splitlines(),
        "",
        "### Per-request overhead",
        "",
        "`python -m benchmarks.request_overhead` (also part of this run): a request that passes "
        "through, one that reuses the frozen memory and a whole build, beside one `json.dumps` "
        "of the same messages.",
        "",
        *request_overhead.to_markdown(overheads),
        "",
        request_overhead.first_request_line(),
        "",
        "### The gateway under load",
        "",
        "`python -m benchmarks.gateway_load` (also part of this run):",
        "",
        *gateway_load.to_markdown(gateway_load.measure(50 if quick else 200)),
        "",
        "### A gateway for a team",
        "",
        "`python -m benchmarks.gateway_team` (also part of this run): the in-memory store "
        "against Redis (Debian's redis-server on loopback), one process against three.",
        "",
        *_team_section(quick),
        "",
        "### TOMC in a LiteLLM proxy",
        "",
        "`python -m benchmarks.litellm_hook` (also part of this run): LiteLLM's proxy (pinned, "
        "`.venv-litellm`) alone and with `callbacks: tomc.litellm.hook`, in front of a loopback "
        "Chat Completions upstream that answers at once.",
        "",
        *_litellm_section(quick),
    ]


def _litellm_section(quick: bool) -> list[str]:
    from benchmarks import litellm_hook

    try:
        return litellm_hook.to_markdown(litellm_hook.measure(10 if quick else 40))
    except SystemExit as exc:  # no LiteLLM environment on this machine
        return [f"Skipped: {exc}."]


def _team_section(quick: bool) -> list[str]:
    from benchmarks import gateway_team

    try:
        return gateway_team.to_markdown(gateway_team.measure(50 if quick else 200))
    except gateway_team.RedisMissing as exc:
        return [f"Skipped: {exc}."]


def _speed_table(rows: list[dict]) -> list[str]:
    out = [
        "| tokens | chars | floor s | tomc_raw s | x floor | bm25s s | x bm25s | peak RSS MB "
        "| answer kept |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['tokens']:,} | {r['chars']:,} | {r['floor_s']:.4f} | {r['compile_s']:.4f} | "
            f"{r['x_floor']:.2f} | {r['bm25s_s']:.4f} | {r['x_bm25s']:.2f} | {r['peak_mb']:.0f} | "
            f"{'yes' if r['retained'] else 'NO'} |"
        )
    routes = [route for route in ROUTE_TASKS if any(route in r.get("routes", {}) for r in rows)]
    if routes:
        out += [
            "",
            "Other routes on the same history (the state row above is the value question):",
            "",
            "| tokens | floor s | " + " | ".join(f"{route} s | x floor" for route in routes) + " |",
            "|---:|---:|" + "---:|---:|" * len(routes),
        ]
        for r in rows:
            cells = [
                f"{r['routes'][route]['compile_s']:.4f} | {r['routes'][route]['x_floor']:.2f}"
                for route in routes
            ]
            out.append(f"| {r['tokens']:,} | {r['floor_s']:.4f} | " + " | ".join(cells) + " |")
    by_size = {r["tokens"]: r for r in rows}
    if 100_000 in by_size and 1_000_000 in by_size:
        ratio = by_size[1_000_000]["compile_s"] / by_size[100_000]["compile_s"]
        out += ["", f"time(1M) / time(100K) = {ratio:.1f} (linear would be 10)."]
    return out


def _locomo_skipped() -> str:
    path = locomo.DEFAULT_PATH
    return (
        f"Skipped: {path.name} not found in {_data_dir_shown()}/ (read there at run time; set "
        "TOMC_BENCH_DATA to the folder that holds it)."
    )


def _data_dir_shown() -> str:
    """The data folder without this machine's paths when it is the default ../shared/data."""
    default = Path(__file__).resolve().parents[2] / "shared" / "data"
    return "../shared/data" if default == DATA_DIR else str(DATA_DIR)


#: ``tomc_raw`` in the full run of commit a84fd13 (benchmarks/RESULTS.md there), before the
#: window of three lines around a match, the named speakers' weight and the shared stamps: the
#: figures this run's are read against, per category, at 1K / 2K / 4K / 8K tokens.
LOCOMO_BEFORE = {
    "1-4": (0.744, 0.807, 0.860, 0.902),
    "1": (0.463, 0.562, 0.655, 0.735),
    "2": (0.783, 0.853, 0.895, 0.949),
    "3": (0.357, 0.418, 0.525, 0.627),
    "4": (0.863, 0.911, 0.949, 0.968),
}


def _locomo_table(loco: dict, n_questions: int, skipped: int) -> list[str]:
    out: list[str] = []
    out += [
        f"{n_questions} questions of categories 1-4 ({skipped} skipped for malformed or missing "
        "evidence ids); one unit per turn, `[session date] speaker: text`. Recall = share of "
        "evidence turns whose text is in the memory.",
        "",
    ]
    methods = sorted(
        {m for m, _, _ in loco}, key=["tomc_raw", "rag", "auto", "bm25s", "recency"].index
    )
    budgets = sorted({b for _, b, _ in loco})
    out += ["| method | categories | " + " | ".join(f"{b:,}" for b in budgets) + " |"]
    out += ["|---|---|" + "---:|" * len(budgets)]
    for method in methods:
        for cats, label in (
            ((1, 2, 3, 4), "1-4"),
            ((1,), "1"),
            ((2,), "2"),
            ((3,), "3"),
            ((4,), "4"),
        ):
            cells = []
            for budget in budgets:
                values = [v for c in cats for v in loco.get((method, budget, c), [])]
                cells.append(f"{statistics.mean(values):.3f}" if values else "-")
            out.append(f"| {method} | {label} | " + " | ".join(cells) + " |")
    if budgets == [1000, 2000, 4000, 8000]:
        for label, values in LOCOMO_BEFORE.items():
            cells = " | ".join(f"{v:.3f}" for v in values)
            out.append(f"| tomc_raw before (a84fd13) | {label} | {cells} |")
    return out


def render(
    speed_rows,
    chain_rows,
    table,
    loco,
    n_questions,
    skipped,
    sim_lines,
    agent_lines,
    real_lines,
    quick,
    elapsed,
) -> str:
    out = [
        "# Benchmark results",
        "",
        f"Produced by `python -m benchmarks.run{' --quick' if quick else ''}` on "
        f"{platform.machine()} ({platform.python_implementation()} {platform.python_version()}), "
        f"2 cores; whole run {elapsed:.0f} s. Times are the best of several runs of one "
        "compilation in-process: CPU/compiler timings, not provider latency or billing.",
        "",
        "## Speed and scale (`tomc_raw`, 80% budget)",
        "",
        "The floor is one pass of the lexical tokenizer's regular expression over the same text.",
        "",
        "### State/log fixture (one operation line in eight)",
        "",
        *_speed_table(speed_rows["state_log"]),
        "",
        "### Mixed fixture (every other line a SET, COPY or relation edge)",
        "",
        *_speed_table(speed_rows["mixed_log"]),
        "",
        "### Copy chain (`V0 = 1`, then `V{i} copies V{i-1}`; default budget)",
        "",
        "| lines | floor s | tomc_raw s | x floor | µs per line | answer kept |",
        "|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in chain_rows:
        out.append(
            f"| {r['lines']:,} | {r['floor_s']:.4f} | {r['compile_s']:.4f} | {r['x_floor']:.2f} | "
            f"{r['us_per_line']:.1f} | {'yes' if r['retained'] else 'NO'} |"
        )
    out += [
        "",
        "![latency](latency.png)",
        "",
        "## Answer retention (synthetic families)",
        "",
        "Retained = the memory contains the answer's record (final value, right count, every "
        "requested path) or every source line needed to derive it. Mean over seeds; budget as a "
        "share of the history's lexical tokens.",
        "",
    ]
    families = sorted({family for family, _, _ in table})
    header = "| family | budget | " + " | ".join(METHODS) + " |"
    out += [header, "|---|---:|" + "---:|" * len(METHODS)]
    for family in families:
        for share in SHARES:
            cells = [f"{statistics.mean(table[(family, m, share)]):.2f}" for m in METHODS]
            out.append(f"| {family} | {int(share * 100)}% | " + " | ".join(cells) + " |")
    out += ["", "![retention](retention.png)", ""]
    out += ["## LoCoMo evidence-turn recall", ""]
    out += _locomo_table(loco, n_questions, skipped) if loco else [_locomo_skipped()]
    out += ["", "## Prompt-cache cost simulation (AutomaticChatSession)", "", *sim_lines, ""]
    out += ["## Long agent loops (real trajectories)", "", *agent_lines, ""]
    out += ["## Real agents (Claude Code and Codex CLIs)", "", *real_lines, ""]
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller sizes and samples (under 2 minutes)"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    sizes = [1_000, 10_000, 100_000] if args.quick else [1_000, 10_000, 20_000, 100_000, 1_000_000]
    repeat = 3 if args.quick else 7
    # A quick run writes beside the committed full results, never over them.
    suffix = "-quick" if args.quick else ""
    results = OUT / f"RESULTS{suffix}.md"
    say(
        f"{'quick' if args.quick else 'full'} run ({'a few' if args.quick else 'about 25'} "
        f"minutes here); writes {_shown(results)} and its plots; data sets from {DATA_DIR}"
    )
    with step("speed and scale"):
        speed_rows = {name: speed(name, sizes, repeat) for name in SPEED_FIXTURES}
        chain_lengths = [10_000, 40_000] if args.quick else [10_000, 40_000, 100_000]
        chain_rows = chain_speed(chain_lengths, repeat)
    with step("answer retention"):
        table = retention(args.quick)
    with step("LoCoMo evidence-turn recall"):
        loco, n_questions, skipped = locomo_recall(args.quick)
    with step("prompt-cache cost simulation"):
        sim_lines = simulator_section(args.quick)
    with step("long agent loops, per-request overhead, gateway load"):
        agent_lines = agent_loop_section(args.quick)
        if agent_lines[0].startswith("Skipped:"):
            say(agent_lines[0])
    with step("real agents (Claude Code, Codex)"):
        real_lines = real_agents_section(args.quick)
        if real_lines[0].startswith("Skipped:"):
            say(real_lines[0])
    plots = (OUT / f"latency{suffix}.png", OUT / f"retention{suffix}.png")
    plot_latency(speed_rows["state_log"], plots[0])
    plot_retention(table, plots[1])
    text = render(
        speed_rows,
        chain_rows,
        table,
        loco,
        n_questions,
        skipped,
        sim_lines,
        agent_lines,
        real_lines,
        args.quick,
        time.perf_counter() - started,
    )
    text = text.replace("latency.png", f"latency{suffix}.png").replace(
        "retention.png", f"retention{suffix}.png"
    )
    results.write_text(text)
    print(text)
    say(
        f"done in {time.perf_counter() - started:.0f} s; results in {_shown(results)}, plots in "
        + " and ".join(_shown(p) for p in plots)
    )
    return 0


def _shown(path: Path) -> str:
    """A path as the user would type it from where they are (relative when it can be)."""
    try:
        return os.path.relpath(path)
    except ValueError:  # another drive on Windows
        return str(path)


if __name__ == "__main__":
    sys.exit(main())
