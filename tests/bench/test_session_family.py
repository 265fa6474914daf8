"""The session family must plant what it scores, and its evaluation set must stay apart."""

from __future__ import annotations

import json

from benchmarks import session_family as sf
from benchmarks.family_formats import COMMAND_FORMATS, FORMATS


def test_a_seed_always_gives_the_same_session():
    one, two = sf.generate(5), sf.generate(5)
    assert json.dumps(one.messages) == json.dumps(two.messages)
    assert one.plants == two.plants and sf.generate(6).messages != one.messages


def test_every_value_is_planted_and_the_unchanged_history_carries_each():
    for seed in (1, 2, 3, 4):
        session = sf.generate(seed)
        assert len(session.plants) == sf.PLANTS
        text = json.dumps(session.messages, ensure_ascii=False)
        result = sf.score(session, text)
        assert result.kept == sf.PLANTS and result.stale == 0 and result.wrong == 0
        # Every ask is in the task (or the follow-up message), in words or as an identifier.
        asks = "\n".join(m["content"] for m in session.messages if m["role"] == "user")
        assert all(plant.ask in asks for plant in session.plants)


def test_a_dropped_value_scores_as_missing_stale_or_another_owner_s():
    session = next(
        s
        for s in map(sf.generate, range(200))
        if any(len(p.values) > 1 for p in s.plants) and any(p.distractor for p in s.plants)
    )
    changed = next(p for p in session.plants if len(p.values) > 1)
    shadowed = next(p for p in session.plants if p.distractor)
    text = json.dumps(session.messages, ensure_ascii=False)
    text = text.replace(changed.values[-1], "gone").replace(shadowed.values[-1], "gone")
    result = sf.score(session, text)
    assert result.kept == sf.PLANTS - len({changed.key, shadowed.key})
    assert result.stale >= 1 and result.wrong >= 1


def test_the_family_spans_its_axes_and_forty_formats():
    assert len(FORMATS) + len(COMMAND_FORMATS) >= 40
    sessions = [sf.generate(seed) for seed in range(60)]
    assert {s.phrasing for s in sessions} == set(sf.PHRASINGS)
    assert {s.filler for s in sessions} == set(sf.FILLERS)
    assert {s.agent for s in sessions} == set(sf.AGENTS)
    plants = [p for s in sessions for p in s.plants]
    assert {len(p.values) for p in plants} == {1, 2, 3}
    assert any(p.by_command for p in plants) and any(p.distractor for p in plants)


def test_the_evaluation_set_is_fixed_large_and_apart_from_tuning():
    seeds = sf.eval_seeds()
    assert len(seeds) >= 100 and len(set(seeds)) == len(seeds)
    assert max(seeds) < sf.TUNE_SEEDS


def test_a_session_replays_through_the_session_and_is_scored():
    session = sf.generate(12)  # a Codex session of 40 steps of 8,000 characters
    text, before, after = sf.replay(session)
    assert after < before  # compacted: the final request is far below the history
    result = sf.score(session, text, (before, after))
    assert 0 <= result.kept <= sf.PLANTS and result.tokens == (before, after)
