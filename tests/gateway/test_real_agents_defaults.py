"""The real Claude Code and Codex CLIs at their TRUE defaults: what a session bills through
``tomc run`` against going direct, at every step, across a pause, and what it keeps.

Nothing is shortened here (no ``CLAUDE_CODE_AUTO_COMPACT_WINDOW``, no
``model_auto_compact_token_limit``): each agent runs a fidelity probe
(:func:`agent_upstream.probe_script`: 20 exact values planted early, a third set again halfway,
8 files edited along the way) long enough for TOMC's priced policy to rewrite it, with a pause
longer than the (shortened, for the test's sake) cache lifetime, straight to the scripted
upstream and through ``tomc run`` (told the same lifetime). This is the short version of
``python -m benchmarks.real_agents --defaults``; the CLIs come from ``npm ci``.
"""

from __future__ import annotations

import json

import pytest

from agent_cost_replay import replay_through_tomc
from agent_upstream import probe_script
from real_agents import AGENTS, RunResult, agent_binary, run_session

#: Long enough to pass the priced trigger (Claude Code's base prompt is about 20K tokens,
#: Codex's 13K), with the pause after the first rewrite.
SCRIPTS = {
    "claude": probe_script(30, 28_000, pause_after_step=20, pause_s=10.0, cache_ttl_s=6.0),
    "codex": probe_script(48, 12_000, pause_after_step=34, pause_s=10.0, cache_ttl_s=6.0),
}
_RUNS: dict[tuple[str, str], RunResult] = {}


def _run(agent: str, mode: str) -> RunResult:
    if agent_binary(agent) is None:
        pytest.skip(f"the real {agent} CLI is not installed: run `npm ci` at the repository root")
    key = (agent, mode)
    if key not in _RUNS:
        _RUNS[key] = run_session(agent, mode, script=SCRIPTS[agent], settings={}, timeout_s=600)
    return _RUNS[key]


def _explain(direct: RunResult, tomc: RunResult) -> str:
    return (
        f"direct {json.dumps(direct.summary())}\ntomc {json.dumps(tomc.summary())}\n"
        f"gateway log tail: {tomc.gateway_log[-2500:]}"
    )


@pytest.mark.parametrize("agent", AGENTS)
def test_a_session_at_the_defaults_never_bills_above_direct(agent: str) -> None:
    direct, tomc = _run(agent, "direct"), _run(agent, "tomc")
    assert direct.finished and tomc.finished, _explain(direct, tomc)
    assert tomc.billed_input <= direct.billed_input, _explain(direct, tomc)
    # Wherever the session might have ended.
    assert tomc.worst_ratio(direct) <= 1.02, _explain(direct, tomc)
    # The policy did rewrite it: the largest prompt is well under direct's.
    assert tomc.largest_prompt < 0.8 * direct.largest_prompt, _explain(direct, tomc)
    assert tomc.compactions == 0 and not tomc.client_errors, _explain(direct, tomc)
    # The policy priced each rewrite by what the provider would still have cached; the
    # provider's reported cache reads agree (a miss is logged and counted per conversation).
    assert tomc.status is not None, _explain(direct, tomc)
    misses = [c["tomc_cost_estimate"]["cache_misses"] for c in tomc.status["conversations"]]
    assert misses and not any(misses), _explain(direct, tomc)


@pytest.mark.parametrize("agent", AGENTS)
def test_the_first_request_after_a_pause_is_cheap(agent: str) -> None:
    direct, tomc = _run(agent, "direct"), _run(agent, "tomc")
    paused = direct.after_pause(), tomc.after_pause()
    assert paused[0] is not None and paused[1] is not None, _explain(direct, tomc)
    # Direct writes its whole prompt again; the pause's request has the cache cold for both.
    assert paused[0].cache_read_tokens == 0, _explain(direct, tomc)
    assert paused[1].billed_input <= 0.4 * paused[0].billed_input, _explain(direct, tomc)


@pytest.mark.parametrize("agent", AGENTS)
def test_every_current_value_and_edited_file_is_kept(agent: str) -> None:
    direct, tomc = _run(agent, "direct"), _run(agent, "tomc")
    facts, edits = len(SCRIPTS[agent].facts), len(SCRIPTS[agent].edits)
    assert direct.current_kept == (facts, facts), _explain(direct, tomc)
    assert tomc.current_kept == (facts, facts), _explain(direct, tomc)
    assert tomc.edits_kept == (edits, edits), _explain(direct, tomc)


@pytest.mark.parametrize("agent", AGENTS)
def test_an_offline_replay_of_the_direct_run_bills_what_tomc_run_billed(agent: str) -> None:
    # What lets the policy be tuned without the CLIs: the direct run's requests, decided by the
    # gateway's steps and billed by a fresh scripted upstream on the recorded clock.
    direct, tomc = _run(agent, "direct"), _run(agent, "tomc")
    replayed = replay_through_tomc(direct)
    assert replayed.billed_input == pytest.approx(tomc.billed_input, rel=0.02), (
        replayed,
        _explain(direct, tomc),
    )
    assert replayed.largest_prompt == pytest.approx(tomc.largest_prompt, rel=0.02)
