"""Progress of long commands: a bar on a terminal, plain lines otherwise."""

from __future__ import annotations

import io

import pytest

from tomc import _progress as tp


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_lines_at_the_start_each_tenth_and_the_end() -> None:
    out = io.StringIO()
    with tp.Progress("work", 20, stream=out, prefix="bench: ") as bar:
        assert not bar.bar  # a StringIO is not a terminal
        for step in range(20):
            bar.update(label=f"step {step}")
    lines = out.getvalue().splitlines()
    assert lines[0] == "bench: work: 0/20"
    assert lines[1].startswith("bench: work: 2/20 (") and lines[1].endswith("; now step 1")
    assert len(lines) == 1 + 9 + 1  # the start, 10% ... 90%, the end
    assert lines[-1].startswith("bench: work: 20/20 done in ")
    assert "\r" not in out.getvalue()


def test_plain_lines_also_come_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 10_000, 40))  # 40 s between calls
    monkeypatch.setattr(tp.time, "perf_counter", lambda: next(clock))
    out = io.StringIO()
    bar = tp.Progress("slow", None, stream=out)
    bar.update()
    bar.update()
    bar.close()
    assert out.getvalue().splitlines() == [
        "slow: 0",
        "slow: 1 (40 s)",
        "slow: 2 (80 s)",
        "slow: 2 done in 120 s",
    ]


def test_a_terminal_gets_one_redrawn_bar() -> None:
    out = Terminal()
    with tp.Progress("work", 4, stream=out) as bar:
        assert bar.bar
        bar.update(2, "half")
        bar.update(2)
    text = out.getvalue()
    assert text.count("\n") == 1 and text.endswith("\n")
    assert "work [############............] 2/4" in text and "half" in text
    assert "[########################] 4/4" in text.split("\r")[-1]


def test_benchmark_wrapper_is_plain_off_a_terminal() -> None:
    from benchmarks.progress import tqdm

    out = io.StringIO()
    assert list(tqdm(range(3), desc="cases", file=out)) == [0, 1, 2]
    lines = out.getvalue().splitlines()
    assert lines[0] == "bench: cases: 0/3" and lines[-1].startswith("bench: cases: 3/3 done")
