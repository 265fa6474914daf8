"""End to end: the real Claude Code and Codex CLIs, offline, direct and through ``tomc run``.

Each agent runs the same scripted long session (:class:`agent_upstream.Script`: many shell
steps with large outputs, facts planted early) twice: straight to the scripted upstream, and
through ``tomc run claude|codex`` with no TOMC options. The CLIs come from ``npm ci`` at the
repository root (``package.json`` pins them; ``.ci/run`` installs them); without them these tests
skip and say so.

With no TOMC options, TOMC must manage the context instead of the agent: the agent's own
compaction never runs through TOMC, the provider rejects nothing, every request stays within the
gateway's ``context_target``, and the session bills clearly less than the direct run's input
(at most 0.9x; cache reads and writes priced as each provider documents them for the model:
today's default models read at 0.05x, and the runs measure 0.79x for Claude Code and 0.87x for
Codex, whose 13K tokens of instructions leave little of its 24K target; 0.77x and 0.76x when
reads were priced at 0.1x).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_upstream import Script
from fake_providers import BINDING_BETA
from real_agents import (
    AGENTS,
    RunResult,
    agent_binary,
    compare_headers,
    protected_parts,
    run_session,
)

SCRIPT = Script(steps=64, output_chars=4_000)
_RUNS: dict[tuple[str, str], RunResult] = {}


def _needs(agent: str) -> None:
    if agent_binary(agent) is None:
        pytest.skip(
            f"the real {agent} CLI is not installed: run `npm ci` at the repository root "
            "(package.json pins it; .ci/run does this when npm exists)"
        )


def _run(agent: str, mode: str) -> RunResult:
    _needs(agent)
    key = (agent, mode)
    if key not in _RUNS:
        _RUNS[key] = run_session(agent, mode, script=SCRIPT, timeout_s=240)
    return _RUNS[key]


def _explain(result: RunResult) -> str:
    return (
        f"{result.agent} {result.mode}: exit {result.exit_code}; summary "
        f"{json.dumps(result.summary())}\nstdout tail: {result.stdout[-800:]}\nstderr tail: "
        f"{result.stderr[-1500:]}\ngateway log tail: {result.gateway_log[-1500:]}"
    )


@pytest.mark.parametrize("agent", AGENTS)
def test_agent_finishes_direct_and_through_tomc(agent: str) -> None:
    for mode in ("direct", "tomc"):
        result = _run(agent, mode)
        assert result.finished, _explain(result)
        steps = [r.step for r in result.main_calls if r.step]
        assert max(steps) == SCRIPT.steps, _explain(result)


@pytest.mark.parametrize("agent", AGENTS)
def test_direct_session_makes_the_agent_compact_itself(agent: str) -> None:
    # The set-up's premise: the session is long enough for the agent's own auto-compaction.
    direct = _run(agent, "direct")
    assert direct.compactions >= 1, _explain(direct)


@pytest.mark.parametrize("agent", AGENTS)
def test_tomc_causes_no_upstream_4xx(agent: str) -> None:
    """Every 4xx the upstream sent through TOMC, the direct run got too (same message): TOMC
    itself never makes the provider reject a request."""
    direct, tomc = _run(agent, "direct"), _run(agent, "tomc")
    direct_errors = [r.error for r in direct.client_errors]
    for request in tomc.client_errors:
        assert request.error in direct_errors, (
            f"request {request.number} got {request.status} only through TOMC: {request.error}"
        )
    assert len(tomc.client_errors) <= len(direct.client_errors)


@pytest.mark.parametrize("agent", AGENTS)
def test_no_upstream_4xx_through_tomc(agent: str) -> None:
    tomc = _run(agent, "tomc")
    assert [(r.number, r.status, r.error) for r in tomc.client_errors] == []


@pytest.mark.parametrize("agent", AGENTS)
def test_headers_reach_the_upstream_unchanged(agent: str) -> None:
    direct, tomc = _run(agent, "direct"), _run(agent, "tomc")
    diff = compare_headers(direct, tomc)
    assert diff["pairs"] >= 3
    assert diff["added"] == {}, f"TOMC added headers: {diff['added']}"
    assert diff["dropped"] == {}, f"TOMC dropped headers: {diff['dropped']}"
    changed = dict(diff["changed"])
    beta = changed.pop("anthropic-beta", None)
    if beta is not None:
        # The one documented addition: the thinking-binding beta joined to the agent's own list,
        # on rewritten Claude requests whose raw turns keep signed thinking.
        before, after = beta
        assert agent == "claude" and after == f"{before},{BINDING_BETA}", beta
    assert changed == {}, f"TOMC changed headers: {changed}"


def _by_step(result: RunResult) -> dict[Any, Any]:
    """Main-loop requests that got an answer, by the script step they were answered with."""
    return {("final" if r.final else r.step): r for r in result.main_calls}


@pytest.mark.parametrize("agent", AGENTS)
def test_protected_parts_reach_the_upstream_verbatim(agent: str) -> None:
    """System / tools / the first user message (Responses: the items up to the task) of each
    request through TOMC equal the direct run's request at the same script step."""
    direct, tomc = _run(agent, "direct"), _run(agent, "tomc")
    before, through = _by_step(direct), _by_step(tomc)
    # After its own compaction the direct run's history starts over (a summary as the first
    # message): only the steps before it are comparable.
    own = [r.number for r in direct.ok_calls if r.kind == "compaction"]
    common = sorted(
        (s for s in before.keys() & through.keys() if not own or before[s].number < own[0]),
        key=str,
    )
    assert len(common) >= 20  # the steps before the direct run compacted itself
    for step in common:
        a = protected_parts(direct, before[step])
        b = protected_parts(tomc, through[step])
        for part in a:
            assert a[part] == b[part], (
                f"step {step}: {part} differs through TOMC (request {through[step].number})"
            )


# ---------------------------------------------------------------------- the targets


@pytest.mark.parametrize("agent", AGENTS)
def test_target_agent_never_compacts_itself_through_tomc(agent: str) -> None:
    tomc = _run(agent, "tomc")
    assert tomc.compactions == 0, _explain(tomc)


@pytest.mark.parametrize("agent", AGENTS)
def test_target_every_request_within_the_context_target(agent: str) -> None:
    tomc = _run(agent, "tomc")
    conversations = tomc.conversations()
    assert conversations, _explain(tomc)
    targets = [c.get("context_target") for c in conversations]
    assert all(isinstance(t, int) and t > 0 for t in targets), (
        f"/status.json gives no context_target: {json.dumps(conversations)[:1500]}"
    )
    limit = max(targets)
    over = [(r.number, r.prompt_tokens) for r in tomc.ok_calls if r.prompt_tokens > limit]
    assert over == [], f"requests over the context target {limit}: {over}"


@pytest.mark.parametrize("agent", AGENTS)
def test_target_billed_input_at_most_90_percent_of_direct(agent: str) -> None:
    direct, tomc = _run(agent, "direct"), _run(agent, "tomc")
    assert tomc.billed_input <= 0.9 * direct.billed_input, (
        f"billed input through TOMC {tomc.billed_input:.0f} vs direct {direct.billed_input:.0f}"
    )
