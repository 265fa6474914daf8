"""The agents' own compaction thresholds and TOMC's default target derived from them."""

from __future__ import annotations

import pytest

from tomc._gateway.agents.limits import (
    DEFAULT_TARGET_SHARE,
    TARGET_FLOOR,
    claude_code_limit,
    codex_limit,
    default_target,
    detect_agent,
    request_limit,
)


def test_default_target_is_a_share_of_the_threshold_with_a_floor():
    assert default_target(167_000) == int(167_000 * DEFAULT_TARGET_SHARE)
    assert default_target(None, 200_000, 20_000) == int(180_000 * DEFAULT_TARGET_SHARE)
    assert default_target(10_000) == TARGET_FLOOR
    assert default_target(None, None) is None


@pytest.mark.parametrize(
    ("model", "environ", "settings", "betas", "window", "threshold", "source"),
    [
        # Out of the box: no proactive compaction, the API's window decides (1M for Opus 4.8).
        (None, {}, {}, "", 1_000_000, 980_000, "reactive (provider window)"),
        ("claude-haiku-4-5", {}, {}, "", 200_000, 180_000, "reactive (provider window)"),
        # Per-model compaction windows: 4.6 below 1M, Sonnet 5 always.
        ("claude-sonnet-4-6", {}, {}, "", 200_000, 167_000, "model default"),
        ("claude-sonnet-4-6", {}, {}, "context-1m-2025-08-07", 1_000_000, 980_000, "reactive"),
        ("claude-sonnet-5", {}, {}, "context-1m-2025-08-07", 967_000, 934_000, "model default"),
        ("claude-sonnet-5", {}, {}, "", 200_000, 167_000, "model default"),
        # CLAUDE_CODE_AUTO_COMPACT_WINDOW: capped at the assumed window, raised to 100K.
        (None, {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "150000"}, {}, "", 150_000, 117_000, "CLAUDE"),
        (
            "claude-opus-4-8[1m]",
            {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "500000"},
            {},
            "",
            500_000,
            467_000,
            "CLAUDE",
        ),
        (None, {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "500000"}, {}, "", 200_000, 167_000, "CLAUDE"),
        (None, {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "50000"}, {}, "", 100_000, 67_000, "CLAUDE"),
        (None, {"CLAUDE_CODE_AUTO_COMPACT_WINDOW": "bad"}, {}, "", 1_000_000, 980_000, "reactive"),
        # The settings key, below the variable.
        (None, {}, {"autoCompactWindow": 120_000}, "", 120_000, 87_000, "settings"),
        # The percentage override only lowers it.
        (
            "claude-sonnet-4-6",
            {"CLAUDE_AUTOCOMPACT_PCT_OVERRIDE": "50"},
            {},
            "",
            200_000,
            90_000,
            "model default + CLAUDE_AUTOCOMPACT_PCT_OVERRIDE",
        ),
        # A lower output limit reserves less.
        (
            "claude-sonnet-4-6",
            {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000"},
            {},
            "",
            200_000,
            179_000,
            "model default",
        ),
        # Off: no threshold, the target comes from the window.
        (None, {"DISABLE_AUTO_COMPACT": "1"}, {}, "", 200_000, None, "auto-compaction off"),
        (None, {}, {"autoCompactEnabled": False}, "", 200_000, None, "auto-compaction off"),
    ],
)
def test_claude_code_thresholds(model, environ, settings, betas, window, threshold, source):
    limit = claude_code_limit(model, environ, settings, betas=betas)
    assert (limit.window, limit.threshold) == (window, threshold)
    assert limit.source.startswith(source)
    expected = default_target(threshold, window, limit.output_reserve)
    assert limit.target == expected and limit.target >= TARGET_FLOOR


def test_claude_code_model_from_its_environment_and_settings():
    assert claude_code_limit(None, {"ANTHROPIC_MODEL": "claude-sonnet-4-6"}).threshold == 167_000
    assert claude_code_limit(None, {}, {"model": "claude-sonnet-4-6"}).threshold == 167_000
    assert claude_code_limit("claude-sonnet-4-6-20260101").model == "claude-sonnet-4-6"


@pytest.mark.parametrize(
    ("model", "config", "window", "threshold", "source"),
    [
        (None, {}, 500_000, 450_000, "catalog 90%"),  # the default, gpt-6.2-sol
        ("gpt-5.5", {}, 272_000, 244_800, "catalog 90%"),
        ("gpt-5.6-sol", {}, 272_000, 244_800, "catalog 90%"),
        (None, {"model": "gpt-6-sol"}, 272_000, 244_800, "catalog 90%"),
        ("gpt-5.5", {"model_auto_compact_token_limit": 100_000}, 272_000, 100_000, "model_auto"),
        # A configured limit above 90% is capped there.
        ("gpt-5.5", {"model_auto_compact_token_limit": 260_000}, 272_000, 244_800, "catalog"),
        # model_context_window replaces the catalog's, capped at max_context_window.
        ("gpt-6-sol", {"model_context_window": 800_000}, 800_000, 720_000, "model_context"),
        ("gpt-5.5", {"model_context_window": 800_000}, 272_000, 244_800, "model_context"),
        # The active profile wins over the top level.
        (
            None,
            {"model": "gpt-5.5", "profile": "deep", "profiles": {"deep": {"model": "gpt-6.1-sol"}}},
            500_000,
            450_000,
            "catalog",
        ),
        # A model outside the catalog: its profile's window (family rule).
        ("gpt-5.6-codex-mini", {}, 872_000, 784_800, "model profile"),
        ("local-model", {}, None, None, "unknown"),
        ("local-model", {"model_auto_compact_token_limit": 50_000}, None, 50_000, "model_auto"),
    ],
)
def test_codex_thresholds(model, config, window, threshold, source):
    limit = codex_limit(model, config)
    assert (limit.window, limit.threshold, limit.output_reserve) == (window, threshold, 0)
    assert limit.source.startswith(source)
    assert limit.target == default_target(threshold, window)


def test_agents_are_told_apart_by_their_headers():
    assert detect_agent({"x-app": "cli", "user-agent": "claude-cli/2.1.197"}) == "claude"
    assert detect_agent({"originator": "codex_cli_rs"}) == "codex"
    assert detect_agent({"user-agent": "codex_exec/0.171.0"}) == "codex"
    assert detect_agent({"user-agent": "python-httpx"}) is None


def test_a_request_without_a_target_gets_its_agents_default():
    claude = request_limit("messages", {"x-app": "cli"}, {"model": "claude-sonnet-4-6"})
    assert claude.threshold == 167_000 and claude.agent == "claude"
    codex = request_limit("responses", {"originator": "codex_cli_rs"}, {"model": "gpt-5.5"})
    assert codex.threshold == 244_800
    # Another client gets no default target: only the model's window limits its requests.
    other = request_limit("chat", {}, {"model": "gpt-4o", "max_tokens": 8_000})
    assert other.threshold is None and other.window == 128_000 and other.target is None
    assert request_limit("chat", {}, {"model": "my-local-model"}).target is None
    assert (
        request_limit("chat", {}, {"model": "gpt-4o", "max_tokens": 8_000}).output_reserve == 8_000
    )


def test_the_output_reserve_is_read_from_the_requests_own_format():
    def reserve(api: str, body: dict) -> int:
        return request_limit(api, {}, {"model": "gpt-4o", **body}).output_reserve

    assert reserve("chat", {"max_completion_tokens": 9_000, "max_tokens": 1}) == 9_000
    assert reserve("responses", {"max_output_tokens": 7_000}) == 7_000
    assert reserve("messages", {"max_tokens": 6_000}) == 6_000
    # Another format's field says nothing about this one's output.
    assert reserve("chat", {"max_output_tokens": 7_000}) == 0
    assert reserve("responses", {"max_tokens": 6_000}) == 0
    assert reserve("no-such-format", {"max_tokens": 6_000}) == 0
    assert request_limit("chat", {}, {"messages": []}) is None
