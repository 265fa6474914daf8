"""The benchmark generators must be right, or the retention figures mean nothing."""

from __future__ import annotations

import pytest

import tomc
from benchmarks import baselines, workloads


@pytest.mark.parametrize(
    "case",
    [
        workloads.state_log(3_000, 1),
        workloads.mixed_log(3_000, 1),
        workloads.copy_chain(300),
        workloads.variable_tracking(5, 100, 2),
        workloads.variable_tracking(5, 100, 2, reassign=True),
        workloads.counting(200, 3),
        workloads.counting(200, 3, chinese=True),
        workloads.common_words(500, 4),
        workloads.relation_chains(20, 3, 5),
    ],
    ids=lambda c: c.family,
)
def test_cases_are_consistent(case: workloads.Case) -> None:
    lines = set(case.history.splitlines())
    assert all(line in lines for line in case.evidence)
    # The whole history always retains the answer; a memory with nothing in it never does.
    assert case.retained(case.history)
    assert not case.retained("")
    # An independent check of the expected records: the uncapped records-only memory has them.
    result = tomc.compile_memory(
        case.history, case.task, budget_tokens=10**7, strategy="tomc", uncapped=True
    )
    assert all(text in result.compiled_memory for text in case.expected)


def test_generators_are_deterministic() -> None:
    assert workloads.state_log(2_000, 7) == workloads.state_log(2_000, 7)
    assert workloads.mixed_log(2_000, 7) == workloads.mixed_log(2_000, 7)
    assert workloads.relation_chains(20, 4, 1) == workloads.relation_chains(20, 4, 1)


def test_recency_baseline_keeps_newest_lines_that_fit() -> None:
    memory = baselines.recency_truncation(["one two", "three", "four five six"], 4)
    assert memory == "three\nfour five six\n"


def test_bm25s_baseline_packs_best_match_in_source_order() -> None:
    lines = ["apples are red", "bananas are yellow", "cherries are red too", "nothing"]
    memory = baselines.bm25s_select(lines, "red apples", 8)
    assert memory.splitlines()[0] == "apples are red"
    assert tomc.LexicalCounter().count(memory) <= 8


def test_a_fresh_clone_skips_locomo_with_the_file_named(
    tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without ../shared/data the LoCoMo section says which file is missing, and the suite
    still renders its results."""
    from benchmarks import locomo
    from benchmarks import run as suite

    monkeypatch.setattr(locomo, "DEFAULT_PATH", tmp_path / "locomo10.json")
    assert suite.locomo_recall(quick=True) == ({}, 0, 0)
    assert f"{tmp_path / 'locomo10.json'} not found" in capsys.readouterr().err
    text = suite.render({"state_log": [], "mixed_log": []}, [], {}, {}, 0, 0, [], [], [], True, 1.0)
    assert "Skipped: locomo10.json not found in" in text
    assert "TOMC_BENCH_DATA" in text
