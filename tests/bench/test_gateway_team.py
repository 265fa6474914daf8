"""The team benchmark's report: round robin split into a process's first and later requests."""

from __future__ import annotations

from benchmarks import gateway_team as team


def _row(name: str, over: list[float], first: list[float], again: list[float]) -> dict:
    return {
        "name": name,
        "processes": 3,
        "intact": 4,
        "p50_s": 1.0,
        "p99_s": 2.0,
        "added_p50_s": 0.5,
        "added_p99_s": 1.0,
        "rps": 10.0,
        "alone_added": [0.004] * len(over),
        "alone_over_memory": over,
        "alone_over_memory_first": first,
        "alone_over_memory_again": again,
    }


def test_the_report_splits_round_robin_into_first_and_later_requests() -> None:
    result = {
        "conversations": 2,
        "tokens": 1000,
        "requests": 4,
        "body_kb": 4.0,
        "direct_p50_s": 0.1,
        "direct_rps": 40.0,
        "alone_direct_p50_s": 0.1,
        "rows": [
            _row("memory, 1 process", [0.0, 0.0], [], [0.0, 0.0]),
            _row("Redis, 3 processes, round robin", [0.02, 0.002, 0.003], [0.02], [0.002, 0.003]),
        ],
    }
    text = "\n".join(team.to_markdown(result))
    assert "round robin: a process's first request of a conversation +20.0 ms" in text
    assert "its later ones +2.5 ms" in text
    # A set-up whose every request finds its process warm gets no such sentence.
    assert "memory, 1 process: a process's first" not in text
