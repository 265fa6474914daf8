"""The cache-cost simulator: provider pricing rules, replay, LoCoMo reading and the CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from tomc._cli import main
from tomc._simulation import simulate as sim
from tomc._simulation.workloads import agent_workload, locomo_workloads


def chain_of(*sizes: int) -> list[tuple[int, int]]:
    total, chain = 0, []
    for index, size in enumerate(sizes):
        total += size
        chain.append((hash(sizes[: index + 1]), total))  # same sizes stand for same messages
    return chain


def test_openai_prices_cached_prefixes_from_1024_in_128_steps():
    pricer = sim._Pricer("openai")
    pricer.charge(chain_of(1500, 500), 2000)
    assert pricer.billed == 2000
    pricer.charge(chain_of(1500, 500, 100), 2100)
    cached = 1024 + 7 * 128  # 2000 rounded down to the 128-token grid above 1,024
    assert pricer.cached == cached
    assert pricer.billed == pytest.approx(2000 + 2100 - cached + 0.1 * cached)
    small = sim._Pricer("openai")
    small.charge(chain_of(1000), 1000)
    small.charge(chain_of(1000, 10), 1010)
    assert small.cached == 0  # under 1,024 tokens nothing is cached


def test_anthropic_writes_at_125_and_reads_whole_earlier_requests():
    pricer = sim._Pricer("anthropic")
    pricer.charge(chain_of(1500, 500), 2000)
    assert pricer.billed == pytest.approx(1.25 * 2000)
    pricer.charge(chain_of(1500, 500, 100), 2100)
    assert pricer.billed == pytest.approx(1.25 * 2000 + 0.1 * 2000 + 1.25 * 100)
    # A prefix that was never the end of a request is not a cache entry.
    pricer.charge(chain_of(1500, 7), 1507)
    assert pricer.cached == 2000


def test_full_history_is_cached_and_stable_matches_it_while_it_fits():
    workload = agent_workload("a", turns=4, window=128_000, seed=3)
    full = sim.replay(workload, "full")
    stable = sim.replay(workload, "stable")
    assert full.requests == stable.requests > 4
    assert (stable.openai_billed, stable.anthropic_billed) == (
        full.openai_billed,
        full.anthropic_billed,
    )
    assert full.openai_hit_rate > 0.5 and full.over_window == 0


def test_stable_stays_inside_the_window_and_rebuilds_rarely():
    workload = agent_workload("a", turns=12, window=9_000, seed=5, max_tokens=1024)
    full = sim.replay(workload, "full")
    stable = sim.replay(workload, "stable")
    cadence = sim.replay(workload, "cadence-1")
    assert full.over_window > 0
    assert stable.over_window == 0 and stable.max_request <= 9_000 - 1024
    assert 0 < stable.rebuilds < cadence.rebuilds
    assert stable.openai_billed < cadence.openai_billed
    assert cadence.rebuilds + cadence.passthroughs == cadence.requests


def test_locomo_conversations_replay_as_chats(tmp_path):
    sample = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1 May 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi Bo"},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Hi Ann", "blip_caption": "a cat"},
            ],
            "session_2_date_time": "2 May 2023",
            "session_2": [
                {"speaker": "Bo", "dia_id": "D2:1", "text": "Back again"},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Great"},
            ],
        },
    }
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([sample]))
    (workload,) = locomo_workloads(path, window=8000)
    histories = list(workload.replay())
    assert workload.name == "LoCoMo conv-x"
    assert [len(h) for h in histories] == [2, 3]  # before each of Bo's turns
    assert histories[0][1] == {"role": "user", "content": "[1 May 2023] Ann: Hi Bo"}
    assert histories[1][2] == {"role": "assistant", "content": "Bo: Hi Ann [shares a cat]"}


def test_report_is_deterministic_and_checks_the_goals(monkeypatch):
    groups = [("tiny", [agent_workload("t", turns=6, window=6_000, max_tokens=512)])]
    first = sim.simulate(groups, policies=("stable", "cadence-2"))
    second = sim.simulate(groups, policies=("stable", "cadence-2"))
    assert first == second
    assert [r.policy for r in first.rows] == ["full", "stable", "cadence-2"]
    assert first.goals() == [
        f"tiny: full history overflows in {first.row('tiny', 'full').over_window} of "
        f"{first.rows[0].requests} requests; stable overflows in 0 (goal 0): met"
    ]
    table = first.to_markdown()
    assert table.startswith("| Workload | Policy |") and "| tiny | cadence-2 |" in table


def test_missing_locomo_file_is_a_note_not_an_error(tmp_path):
    groups, notes = sim.default_workloads(quick=True, locomo=tmp_path / "missing.json")
    assert len(groups) == 2 and "LoCoMo skipped" in notes[0]


def test_cli_simulate_prints_the_table(monkeypatch):
    tiny = [("tiny", [agent_workload("t", turns=3, window=128_000)])]
    monkeypatch.setattr(sim, "default_workloads", lambda **kwargs: (tiny, ["note"]))
    result = CliRunner().invoke(main, ["simulate", "--quick", "--no-locomo"])
    assert result.exit_code == 0, result.output
    assert "| tiny | stable |" in result.output and "stable costs 1.000x full" in result.output
    result = CliRunner().invoke(main, ["simulate", "--json", "--no-locomo"])
    assert json.loads(result.stdout)["rows"][0]["policy"] == "full"


def test_progress_counts_every_replay_then_ends():
    groups = [("tiny", [agent_workload("t", turns=3, window=128_000)])]
    calls = []
    sim.simulate(groups, policies=("stable",), progress=lambda *args: calls.append(args))
    assert calls == [("tiny: full", 0, 2), ("tiny: stable", 1, 2), ("", 2, 2)]


def test_cli_simulate_shows_progress_lines_off_a_terminal(monkeypatch):
    tiny = [("tiny", [agent_workload("t", turns=3, window=128_000)])]
    monkeypatch.setattr(sim, "default_workloads", lambda **kwargs: (tiny, []))
    result = CliRunner().invoke(main, ["simulate", "--quick"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    assert lines[0] == "tomc simulate: replays: 0/4"
    assert lines[-1].startswith("tomc simulate: replays: 4/4 done in ")
    assert "\r" not in result.stderr  # no bar redrawn into a log


def test_the_simulator_finds_every_kind_of_memory_item() -> None:
    """The simulator finds memory items by the mark every memory header begins with."""
    from tomc.chat import _memory

    headers = [
        value
        for name, value in vars(_memory).items()
        if name.endswith(("_HEADER", "_PREFIX")) and isinstance(value, str)
    ]
    assert len(headers) >= 4
    for header in headers:
        assert header.startswith(_memory.MEMORY_MARK), header
        assert sim.memory_marks([{"role": "user", "content": header}]) == (0,)
