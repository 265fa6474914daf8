"""SessionOptions: every session keyword as one frozen value, each bad value named."""

from __future__ import annotations

import inspect
from dataclasses import FrozenInstanceError, fields

import pytest

from tomc import InvalidOptionError
from tomc._gateway.settings import GatewaySettings, parse_context_target
from tomc.chat import AutomaticChatSession, ModelProfile, SessionOptions
from tomc.chat._options import THINKING_PREFIX


def test_the_session_takes_the_same_keywords_with_the_same_defaults():
    signature = inspect.signature(AutomaticChatSession)
    keywords = {
        name: parameter.default
        for name, parameter in signature.parameters.items()
        if name != "options"
    }
    assert keywords == {field.name: field.default for field in fields(SessionOptions)}
    assert list(keywords) == list(SessionOptions.names())


def test_keywords_and_options_make_the_same_session():
    kwargs = {"keep_recent_messages": 4, "min_recent_messages": 9, "backoff_thresholds": (0.9, 0.5)}
    by_keywords = AutomaticChatSession(**kwargs)
    by_options = AutomaticChatSession(options=SessionOptions(**kwargs))
    assert by_keywords.options == by_options.options
    assert by_keywords.options.min_recent_messages == 4  # resolved: never above the tail
    assert by_keywords.options.backoff_thresholds == (0.5, 0.9)
    assert by_keywords.keep_recent_messages == 4  # still readable on the session


def test_options_are_frozen_and_profiles_read_once():
    options = SessionOptions(model_profiles={"m": {"context_window": 1000}})
    assert options.model_profiles["m"] == ModelProfile("m", 1000)
    with pytest.raises(FrozenInstanceError):
        options.refresh_every = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        options.model_profiles["n"] = ModelProfile("n", 10)  # type: ignore[index]


def test_options_and_keywords_together_are_refused():
    with pytest.raises(InvalidOptionError, match=r"not both .*refresh_every"):
        AutomaticChatSession(refresh_every=3, options=SessionOptions())


@pytest.mark.parametrize(
    ("keywords", "named"),
    [
        ({"refresh_policy": "sometimes"}, "refresh_policy"),
        ({"work_query": "step"}, "work_query"),
        ({"thinking_prefix": "keep"}, "thinking_prefix"),
        ({"api": "completions"}, "api"),
        ({"memory_role": "tool"}, "memory_role"),
        ({"refresh_every": 0}, "refresh_every"),
        ({"growth_headroom": 1.0}, "growth_headroom"),
        ({"keep_recent_messages": -1}, "keep_recent_messages"),
        ({"output_reserve": -1}, "output_reserve"),
        ({"native_cooldown_requests": -1}, "native_cooldown_requests"),
        ({"native_pause_limit": 0}, "native_pause_limit"),
        ({"stable_growth_tokens": 0}, "stable_growth_tokens"),
        ({"deployment_context_limit": -5}, "deployment_context_limit"),
        ({"context_target": 0}, "context_target"),
        ({"context_target": 1.5e5}, "context_target"),
        ({"budget_tokens": True}, "budget_tokens"),
        ({"model_profiles": {"m": {"context_window": 0}}}, "profile 'm'"),
    ],
)
def test_a_bad_option_is_refused_by_name(keywords, named):
    with pytest.raises(InvalidOptionError, match=named):
        SessionOptions(**keywords)
    with pytest.raises(InvalidOptionError, match=named):
        AutomaticChatSession(**keywords)


def test_the_gateway_takes_the_sessions_choices():
    for choice in THINKING_PREFIX:
        assert GatewaySettings(thinking_prefix=choice).thinking_prefix == choice
    assert GatewaySettings().thinking_prefix == SessionOptions().thinking_prefix
    with pytest.raises(InvalidOptionError, match="thinking_prefix must be one of"):
        GatewaySettings(thinking_prefix="keep")
    assert parse_context_target("120_000") == 120_000 and parse_context_target("off") == "off"
    with pytest.raises(InvalidOptionError, match="context target must be >= 1024 tokens"):
        parse_context_target(1000)
    with pytest.raises(InvalidOptionError, match="context target must be a number of tokens"):
        parse_context_target(True)


def test_the_gateway_takes_a_cache_lifetime_from_its_settings_file(tmp_path):
    from tomc._gateway.settings import load_settings, save_settings

    assert GatewaySettings().cache_ttl_s is None
    assert GatewaySettings(cache_ttl_s="6").cache_ttl_s == 6.0
    for bad in (-1, "soon", True, float("inf")):
        with pytest.raises(InvalidOptionError, match="cache_ttl_s must be a number of seconds"):
            GatewaySettings(cache_ttl_s=bad)
    save_settings(GatewaySettings(cache_ttl_s=3600), tmp_path)
    assert load_settings(tmp_path).cache_ttl_s == 3600.0
