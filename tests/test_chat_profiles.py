"""The bundled model profiles: complete, sourced, and overridable."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tomc.chat.profiles import ModelProfile, ProfileTable, bundled_profiles, effective_window
from tomc.errors import InvalidOptionError


def test_every_bundled_entry_has_limits_and_a_source():
    raw = json.loads(resources.files("tomc").joinpath("data/model_profiles.json").read_text())
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


def test_effective_window_is_the_smaller_known_limit():
    profile = ModelProfile("m", 200_000)
    assert effective_window(profile, None) == 200_000
    assert effective_window(profile, 50_000) == 50_000
    assert effective_window(None, 50_000) == 50_000
    assert effective_window(None, None) is None
