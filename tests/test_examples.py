"""examples/multi_turn.py runs offline and demonstrates what it claims."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tomc import compile_memory

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "multi_turn.py"


@pytest.fixture
def example(monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """A fresh copy of the example module for each test (tests may change its settings)."""
    spec = importlib.util.spec_from_file_location("multi_turn_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses resolve their module through sys.modules while the class is created.
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def test_example_runs_as_a_script_and_all_checks_pass() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "FAILED" not in out
    assert out.count("[ok]") == 4
    # The fake reader prints what it was given: every task, and the memory lines before it.
    for number, task in enumerate(
        ["What is the current value of deploy_target?", "Where did the archive bucket move?"],
        start=1,
    ):
        assert f"=== turn {number}: {task}" in out
        assert f"     user | {task}" in out
    assert "system | STATE deploy_target = prod" in out
    assert "system | RELATION alice -[assigned]-> payments -[owns]-> ledger-service" in out


def test_each_turn_is_compiled_from_the_retained_original(
    example: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    history = [dict(m) for m in example.ORIGINAL_HISTORY]
    turns = example.run_loop(history, example.TASKS)
    capsys.readouterr()

    # Rebuild each turn's view independently: the original plus the exchanges before it.
    seen = [dict(m) for m in example.ORIGINAL_HISTORY]
    for turn in turns:
        expected = compile_memory(
            seen, turn.task, budget_tokens=example.BUDGET_TOKENS, strategy=example.STRATEGY
        )
        assert turn.memory == expected.compiled_memory
        assert turn.memory_tokens <= example.BUDGET_TOKENS < turn.input_tokens
        seen += [
            {"role": "user", "content": turn.task},
            {"role": "assistant", "content": turn.answer},
        ]
    assert history == seen

    first, second = turns[0], turns[1]
    assert example.EVIDENCE not in first.memory
    assert example.EVIDENCE in second.memory
    assert example.EVIDENCE not in example.chained_memory(first.memory, second.task)


def test_the_checks_can_fail(example: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    """With a budget that keeps everything, turn 1 no longer omits the evidence: exit 1."""
    example.BUDGET_TOKENS = 10_000
    assert example.main() == 1
    assert "[FAILED] turn 1 memory leaves the archive move out" in capsys.readouterr().out
