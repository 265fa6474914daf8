"""A rebuild's work grows with the history, not with its square.

A whole build is what a resumed or evicted long session meets on its next request; while
pricing the action log rendered and counted a folded row for every candidate line, a history of
1M tokens took 137 s. These count the work (what the meter is asked to count, the calls the
folded rows render), not seconds, so they are deterministic: for four times the calls, at most
:data:`LINEAR` times the work, where a quadratic rebuild does about sixteen times as much.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest

from tomc.chat import _action_log, _work_memory
from tomc.chat._conversation import ASSISTANT, TOOL, Entry, ToolCall, ToolOutput
from tomc.chat._meter import TokenMeter, meter_for

#: Four times the history may cost at most this many times the work (a linear rebuild: about 4).
LINEAR = 6.0


class Tally:
    """A meter that counts what it is asked: calls and characters, whole texts and parts."""

    def __init__(self, meter: TokenMeter) -> None:
        self.meter, self.calls, self.chars = meter, 0, 0

    def _seen(self, text: str) -> None:
        self.calls += 1
        self.chars += len(text)

    def count(self, text: str) -> int:
        self._seen(text)
        return self.meter.count(text)

    def parts(self) -> tuple[Callable[[str], int], Callable[[int, int], int]]:
        raw, finish = self.meter.parts()

        def counted(text: str) -> int:
            self._seen(text)
            return raw(text)

        return counted, finish


def _history(calls: int, *, tools: Sequence[str]) -> list[Entry]:
    """A coding agent's calls, each printing 40 lines (the request-overhead benchmark's)."""
    entries = []
    for step in range(calls):
        command = f"sed -n '{step * 40},{step * 40 + 39}p' src/service/module_{step % 7}.py"
        call = ToolCall(f"c{step}", tools[step % len(tools)], f'{{"command": "{command}"}}')
        output = "\n".join(
            f"{step * 40 + k}: value_{step}_{k} = compute(item_{k}, retries={k % 5})  # {step}"
            for k in range(40)
        )
        entries += [
            Entry(ASSISTANT, f"Step {step}: reading module_{step % 7}.py.", calls=(call,)),
            Entry(TOOL, "tool", outputs=(ToolOutput(call.id, output),)),
        ]
    return entries


def _work(calls: int, tools: Sequence[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, int]:
    """What one whole build of ``calls`` calls asks the meter to count (characters) and how
    many calls its folded rows render, with a budget that grows with the history (as a
    window's share does)."""
    tally = Tally(meter_for("o200k_base"))
    rendered = [0]
    folded = _action_log.folded

    def counting(run: Sequence[_action_log.LoggedCall]) -> list[str]:
        rendered[0] += len(run)
        return folded(run)

    monkeypatch.setattr(_action_log, "folded", counting)
    monkeypatch.setattr(_work_memory, "folded", counting)
    memory = _work_memory.build_work_memory(
        _history(calls, tools=tools),
        task="Fix the retry bug in src/service: compute() ignores retries.",
        focus=(),
        later_text="",
        budget=60 * calls,
        count=tally.count,
        header="[work memory]",
    )
    assert memory.tokens <= 60 * calls and memory.kept_lines > 0
    return tally.chars, rendered[0]


@pytest.mark.parametrize("tools", [("bash",), ("bash", "read", "bash", "edit")])
def test_four_times_the_calls_is_at_most_linear_work(tools, monkeypatch):
    small_chars, small_renders = _work(150, tools, monkeypatch)
    large_chars, large_renders = _work(600, tools, monkeypatch)
    assert large_chars <= LINEAR * small_chars, (small_chars, large_chars)
    assert large_renders <= LINEAR * small_renders, (small_renders, large_renders)
