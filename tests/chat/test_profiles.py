"""The bundled model profiles: complete, sourced, and overridable."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tomc._core.errors import InvalidOptionError
from tomc.chat._profiles import ModelProfile, ProfileTable, bundled_profiles, effective_window
from tomc.chat.dialects import CacheTerms


def test_every_bundled_entry_has_limits_and_a_source():
    raw = json.loads(resources.files("tomc.chat").joinpath("data/model_profiles.json").read_text())
    assert raw["models"]
    for name, entry in raw["models"].items():
        assert entry["source"].startswith("https://"), name
        assert entry["context_window"] > entry.get("max_output_tokens", 0) > 0, name
    assert set(bundled_profiles()) == set(raw["models"])


def test_lookup_exact_snapshot_and_unknown():
    table = ProfileTable()
    assert table.get("gpt-4o").context_window == 128_000
    assert table.get("gpt-4o-mini-2024-07-18").model == "gpt-4o-mini"
    assert table.get("claude-opus-4-1-20250805").model == "claude-opus-4-1"
    assert table.get("gpt-4o-turbo-preview") is None
    assert table.get("unknown-model") is None


def test_overrides_and_validation():
    table = ProfileTable({"mine": {"context_window": 32_000, "source": "deployment docs"}})
    assert table.get("mine") == ModelProfile("mine", 32_000, None, "", "deployment docs")
    with pytest.raises(InvalidOptionError):
        ProfileTable({"bad": {"context_window": 0}})


def test_cache_terms_are_read_from_an_entry_and_checked_by_name():
    table = ProfileTable({"mine": {"context_window": 32_000, "cache": {"read": 0.02, "write": 1}}})
    assert table.get("mine").cache == CacheTerms(read=0.02, write=1.0)
    assert ProfileTable().get("gpt-4o").cache is None  # the format's rules
    bad = [
        ({"read": -0.1}, "read"),
        ({"write": 0}, "write"),
        ({"read": 1.5, "write": 1.25}, "less than a write"),
        ({"reads": 0.1}, "unknown cache key 'reads'"),
        ({"ttl_s": "5m"}, "ttl_s"),
        (0.1, "cache must be a mapping"),
    ]
    for cache, message in bad:
        with pytest.raises(InvalidOptionError, match=message):
            ProfileTable({"bad": {"context_window": 1000, "cache": cache}})


def test_the_bundled_cache_terms_are_the_documented_ones():
    """Each ``cache`` entry agrees with the prices its source note quotes."""
    table = ProfileTable()
    assert table.get("claude-opus-5-5").cache == CacheTerms(read=0.05)
    assert table.get("claude-opus-5").cache is None  # 0.1x, Anthropic's rule
    assert table.get("gpt-6.2-sol").cache == CacheTerms(read=0.05, ttl_s=1800)
    for model in ("deepseek-flash", "deepseek-v4-flash", "deepseek/deepseek-flash"):
        assert table.get(model).cache == CacheTerms(read=0.02, write=1.0), model
    assert table.get("kimi-k3").cache == CacheTerms(read=0.1, write=1.0)
    for name, profile in bundled_profiles().items():
        if profile.cache is not None and profile.cache.read is not None:
            assert f"{profile.cache.read}x" in profile.source, name


def test_effective_window_is_the_smaller_known_limit():
    profile = ModelProfile("m", 200_000)
    assert effective_window(profile, None) == 200_000
    assert effective_window(profile, 50_000) == 50_000
    assert effective_window(None, 50_000) == 50_000
    assert effective_window(None, None) is None


@pytest.mark.parametrize(
    ("model", "family"),
    [
        ("gpt-5.6-codex-mini", "gpt-5.6-"),  # a new variant of a known version
        ("gpt-6.3-sol", "gpt-6.2-sol"),  # a newer minor version: the nearest earlier one
        ("gpt-5.5-pro", "gpt-5.5"),
        ("openai/gpt-5.5", "gpt-5.5"),
        ("claude-opus-4-9", "claude-opus-4-8"),
        ("claude-opus-4-8-20260301", "claude-opus-4-8"),  # a dated snapshot
        ("claude-opus-4-8[1m]", "claude-opus-4-8"),  # Claude Code's 1M spelling
        ("us.anthropic.claude-opus-4-8-v1:0", "claude-opus-4-8"),
        ("claude-haiku-4-6", "claude-haiku-4-5"),
    ],
)
def test_a_new_id_of_a_known_family_gets_the_familys_window_and_encoding(model, family):
    profile = ProfileTable().get(model)
    assert profile is not None and profile.model.startswith(family)
    assert profile.encoding == bundled_profiles()[profile.model].encoding


def test_the_family_rule_does_not_cross_families_or_major_versions():
    table = ProfileTable()
    assert table.get("gpt-7") is None
    assert table.get("claude-newtier-1") is None
    assert table.get("llama-3-70b") is None


def test_the_agents_current_models_are_listed():
    profiles = bundled_profiles()
    for model in ("claude-opus-4-8", "claude-opus-4-7", "claude-sonnet-5", "gpt-5.5"):
        assert model in profiles
    for model in ("gpt-5.6-sol", "gpt-6-sol", "gpt-6.1-terra", "gpt-6.2-sol", "gpt-6.2-astra"):
        assert profiles[model].encoding == "o200k_base"
