"""The real-agent benchmark's offline loop: cells named and picked, direct runs cached and
recorded again only when their script or CLI changed, and the tables it prints (no CLI runs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_upstream import FINAL_MARK, AgentRequest
from benchmarks import real_agents as bench
from real_agents import RunResult
from realistic_probe import ProbeScore, RealisticScript

REPO = Path(__file__).resolve().parents[2]


def test_every_cell_has_a_name_and_both_probes() -> None:
    names = [bench.cell_id(cell) for cell in bench.DEFAULT_CELLS]
    assert len(set(names)) == len(names)
    assert "claude-42x28000" in names and "codex-56x12000-pause28" in names
    realistic = bench.cell_script(42, 28_000, 20)
    assert isinstance(realistic, RealisticScript) and realistic.pause_after_step == 20
    assert realistic.cache_ttl_s == bench.TTL_S
    synthetic = bench.cell_script(56, 12_000, None, "synthetic")
    assert not isinstance(synthetic, RealisticScript) and "probe_limit_00" in synthetic.facts


def test_cells_are_picked_by_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "agent_binary", lambda agent: f"/bin/{agent}")
    assert bench.pick_cells("codex-56x12000,claude-42x28000", ["claude", "codex"]) == [
        ("codex", 56, 12_000, None),
        ("claude", 42, 28_000, None),
    ]
    assert len(bench.pick_cells(None, ["codex"])) == 4
    with pytest.raises(SystemExit, match="unknown cells"):
        bench.pick_cells("claude-1x1", ["claude"])


def test_the_cache_is_git_ignored() -> None:
    assert bench.CACHE.is_relative_to(REPO / ".bench-cache")
    assert ".bench-cache/" in (REPO / ".gitignore").read_text().splitlines()


def _fake_run(script: RealisticScript, billed: int) -> RunResult:
    body = {"messages": [{"role": "user", "content": script.task()}]}
    final = AgentRequest(1, "POST", "/v1/messages", "", {}, body, 0, "anthropic", kind="main")
    final.final, final.input_tokens = True, billed
    return RunResult("claude", "direct", [], 0, FINAL_MARK, "", 1.0, [final], script)


def test_a_direct_run_is_recorded_once_and_again_when_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(bench, "CACHE", tmp_path)
    monkeypatch.setattr(bench, "agent_binary", lambda agent: f"/bin/{agent}")
    monkeypatch.setattr(bench, "cli_version", lambda agent: "2.1.197 (Claude Code)")
    recorded: list[str] = []

    def run_session(agent: str, mode: str, *, script, settings, timeout_s) -> RunResult:
        recorded.append(f"{agent} {mode} {script.steps}")
        return _fake_run(script, 100 + len(recorded))

    monkeypatch.setattr(bench, "run_session", run_session)
    cell = ("claude", 24, 2_000, None)
    monkeypatch.setattr(bench, "DEFAULT_CELLS", (cell,))
    first = bench.recorded_direct(cell)
    again = bench.recorded_direct(cell)
    assert recorded == ["claude direct 24"]
    assert again.billed_input == first.billed_input == 101
    assert bench.cache_path(cell, "realistic") == tmp_path / "claude-24x2000-realistic.json.gz"
    monkeypatch.setattr(bench, "cli_version", lambda agent: "2.2.0 (Claude Code)")
    assert bench.recorded_direct(cell).billed_input == 102  # another CLI: recorded again
    assert bench.recorded_direct(cell, refresh=True).billed_input == 103
    assert bench.run_record(["claude"], "realistic", None, refresh=False) == 0
    assert len(recorded) == 3


def test_the_fingerprint_follows_what_the_agent_sees() -> None:
    a = bench.cell_script(24, 2_000, None)
    assert bench.script_fingerprint(a) == bench.script_fingerprint(
        bench.cell_script(24, 2_000, None)
    )
    assert bench.script_fingerprint(a) != bench.script_fingerprint(
        bench.cell_script(24, 2_100, None)
    )
    assert bench.script_fingerprint(a) != bench.script_fingerprint(
        bench.cell_script(24, 2_000, None, "synthetic")
    )


def test_the_fidelity_table_gives_ratios_to_direct_and_to_masking() -> None:
    def score(current: int) -> ProbeScore:
        return ProbeScore(current, 1, 30, 8, 20, 7, 42, 8)

    rows = [
        bench.FidelityRow(
            "claude-42x28000", "direct (recorded)", 369_000, score(20), 1000.0, None, 0
        ),
        bench.FidelityRow("claude-42x28000", "TOMC (offline)", 101_000, score(3), 740.0, 1.003, 2),
        bench.FidelityRow(
            "claude-42x28000", "masking (offline)", 106_000, score(0), 3000.0, 3.1, 1
        ),
    ]
    table = bench.fidelity_table(rows).splitlines()
    assert len(table) == 5
    tomc = table[3]
    assert "| 3/20 | 1/7 | 30/42 | 8/8 |" in tomc
    assert "| 0.74x | 0.25x | 1.003x |" in tomc
