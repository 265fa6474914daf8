"""The held-out formats check of the work memory: its session and what it counts."""

from __future__ import annotations

from benchmarks import work_memory_formats as wmf
from tomc.chat._conversation import TOOL


def test_each_plant_sits_in_its_own_call_and_the_task_never_names_its_value():
    entries = wmf.session()
    outputs = [e.outputs[0].text for e in entries if e.kind == TOOL]
    assert len(outputs) == wmf.CALLS
    for i, (words, lines, value) in enumerate(wmf.PLANTS):
        holders = [n for n, text in enumerate(outputs) if lines in text]
        assert holders == [wmf.at_call(i)], words
        assert value not in wmf.TASK


def test_a_memory_large_enough_for_the_whole_session_carries_every_value():
    assert len(wmf.carried(200_000)) == len(wmf.PLANTS)


def test_a_tiny_memory_carries_fewer_and_the_count_is_deterministic():
    entries = wmf.session()
    small = wmf.carried(1_000, entries)
    assert small == wmf.carried(1_000, entries)
    assert len(small) < len(wmf.PLANTS)
