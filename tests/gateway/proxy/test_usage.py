"""Reading the providers' usage (JSON and streams, three formats), the billing rules, and the
estimate of what a rewritten request would have cost direct."""

from __future__ import annotations

import json
from typing import Any

import pytest

from chat.dialects.gemini_like import registered
from tomc._gateway.proxy.metering.meter import UsageSniffer
from tomc._gateway.proxy.metering.usage import (
    ANTHROPIC,
    OPENAI,
    ProviderUsage,
    StreamUsage,
    billed_input,
    billing_of,
    estimate_direct,
    usage_from_json,
)
from tomc.chat.dialects import DIALECTS, CacheTerms
from tomc.testing import wire
from tomc.testing.wire import Reply, Usage

USAGE = Usage(input_tokens=900, output_tokens=77, cache_write_tokens=100, cache_read_tokens=9000)
MISMATCH = "prefix_binding_mismatch"
DROPPED = (
    {"type": "thinking_dropped", "path": "messages.1.content.0", "reason": MISMATCH},
    {"type": "thinking_dropped", "path": "messages.3.content.0", "reason": MISMATCH},
    {"type": "thinking_mismatch_allowed", "path": "messages.5.content.0", "reason": MISMATCH},
)
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}


def sniff(api: str, chunks: list[bytes], *, streaming: bool, split: int = 0) -> UsageSniffer:
    """Feed the sniffer as the relay does; ``split`` cuts the bytes into pieces of that size."""
    sniffer = UsageSniffer(api, DIALECTS[api].prompt_tokens)
    sniffer.streaming = streaming
    data = b"".join(chunks)
    pieces = [data[i : i + split] for i in range(0, len(data), split)] if split else chunks
    for piece in pieces:
        sniffer.feed(piece)
    sniffer.finish()
    return sniffer


# ---------------------------------------------------------------------- Anthropic Messages


@pytest.mark.parametrize("split", [0, 7])
def test_anthropic_stream_usage_and_dropped_thinking(split):
    reply = Reply(usage=USAGE, input_transformations=DROPPED)
    events = wire.anthropic_stream(BODY, 1, reply, binding_beta=True)
    sniffer = sniff("messages", events, streaming=True, split=split)
    assert sniffer.found == 10_000  # the prompt size, from message_start, as before
    assert sniffer.usage == ProviderUsage(
        ANTHROPIC,
        prompt_tokens=10_000,
        cache_read_tokens=9000,
        cache_write_tokens=100,
        output_tokens=77,  # from the final message_delta, not message_start's 1
        thinking_dropped=2,  # thinking_mismatch_allowed entries were shown, not dropped
    )


def test_anthropic_json_usage_and_dropped_thinking():
    reply = Reply(usage=USAGE, input_transformations=DROPPED[:1])
    body = json.dumps(wire.anthropic_message(BODY, 1, reply, binding_beta=True)).encode()
    sniffer = sniff("messages", [body[:50], body[50:]], streaming=False)
    assert sniffer.found == 10_000
    assert sniffer.usage is not None
    assert (sniffer.usage.prompt_tokens, sniffer.usage.thinking_dropped) == (10_000, 1)
    assert sniffer.usage.output_tokens == 77


def test_anthropic_without_the_beta_reports_no_transformations():
    events = wire.anthropic_stream(BODY, 1, Reply(usage=USAGE))
    usage = sniff("messages", events, streaming=True).usage
    assert usage is not None and usage.thinking_dropped is None


def test_a_model_fallback_replaces_the_transformations_of_message_start():
    reader = StreamUsage("messages")
    start = {"input_tokens": 10, "output_tokens": 1}
    reader.event(
        {
            "type": "message_start",
            "message": {"usage": start, "input_transformations": list(DROPPED)},
        }
    )
    assert not reader.complete
    reader.event(
        {
            "type": "message_delta",
            "delta": {},
            "usage": {"output_tokens": 5, "input_tokens": 12, "cache_read_input_tokens": 3},
            "input_transformations": [],
        }
    )
    assert reader.complete
    assert reader.result() == ProviderUsage(ANTHROPIC, 15, 3, 0, 5, 0)


# ---------------------------------------------------------------------- OpenAI


@pytest.mark.parametrize("split", [0, 11])
def test_responses_stream_usage(split):
    events = wire.responses_stream(BODY, 1, Reply(usage=USAGE))
    sniffer = sniff("responses", events, streaming=True, split=split)
    assert sniffer.found == 10_000
    assert sniffer.usage == ProviderUsage(OPENAI, 10_000, 9000, 100, 77, None)


def test_responses_json_usage():
    body = json.dumps(wire.response_object(BODY, 1, Reply(usage=USAGE))).encode()
    usage = sniff("responses", [body], streaming=False).usage
    assert usage == ProviderUsage(OPENAI, 10_000, 9000, 100, 77, None)


def test_chat_stream_usage_needs_include_usage():
    body = {**BODY, "stream": True, "stream_options": {"include_usage": True}}
    sniffer = sniff("chat", wire.chat_stream(body, 1, Reply(usage=USAGE)), streaming=True)
    assert sniffer.found == 10_000
    assert sniffer.usage == ProviderUsage(OPENAI, 10_000, 9000, 0, 77, None)
    without = sniff("chat", wire.chat_stream(BODY, 1, Reply(usage=USAGE)), streaming=True)
    assert without.found is None and without.usage is None


def test_chat_json_usage():
    body = json.dumps(wire.chat_completion(BODY, 1, Reply(usage=USAGE))).encode()
    sniffer = sniff("chat", [body], streaming=False)
    assert sniffer.found == 10_000
    assert sniffer.usage == ProviderUsage(OPENAI, 10_000, 9000, 0, 77, None)


@pytest.mark.parametrize(
    ("api", "body"),
    [
        ("messages", {"usage": {"output_tokens": 3}}),
        ("responses", {"usage": None}),
        ("chat", {"usage": {"prompt_tokens": -1}}),
        ("chat", ["not", "a", "mapping"]),
        ("messages", {"type": "error", "error": {"type": "overloaded_error"}}),
    ],
)
def test_answers_without_usable_usage_give_none(api, body):
    assert usage_from_json(api, body) is None


def test_errors_and_garbage_do_not_break_the_sniffer():
    error = json.dumps({"type": "error", "error": {"message": "usage limit"}}).encode()
    assert sniff("messages", [error], streaming=False).usage is None
    garbage = [b"data: {not json usage\n\n", b"data: [DONE]\n\n", b"data: 42 usage\n\n"]
    sniffer = sniff("chat", garbage, streaming=True)
    assert (sniffer.found, sniffer.usage) == (None, None)
    assert sniff("chat", [b'{"usage": '], streaming=False).usage is None


# ---------------------------------------------------------------------- chunk boundaries

STREAMS = {
    "messages": lambda: wire.anthropic_stream(
        BODY, 1, Reply(usage=USAGE, input_transformations=DROPPED), binding_beta=True
    ),
    "responses": lambda: wire.responses_stream(BODY, 1, Reply(usage=USAGE)),
    "chat": lambda: wire.chat_stream(
        {**BODY, "stream_options": {"include_usage": True}}, 1, Reply(usage=USAGE)
    ),
}


def fed(api: str, pieces: list[bytes]) -> tuple[int | None, ProviderUsage | None]:
    sniffer = UsageSniffer(api)  # the format's own prompt reader by default
    sniffer.streaming = True
    for piece in pieces:
        sniffer.feed(piece)
    return sniffer.finish(), sniffer.usage


@pytest.mark.parametrize("api", sorted(STREAMS))
def test_a_stream_cut_anywhere_gives_the_same_figures(api):
    events = STREAMS[api]()
    whole = fed(api, events)
    assert whole[0] == 10_000 and whole[1] is not None and whole[1].output_tokens == 77
    data = b"".join(events)
    for cut in range(1, len(data)):  # two chunks, split at every byte
        assert fed(api, [data[:cut], data[cut:]]) == whole, cut
    assert fed(api, [data[i : i + 1] for i in range(len(data))]) == whole


def test_a_responses_stream_that_ends_incomplete_still_reports_its_usage():
    events = wire.responses_stream(BODY, 1, Reply(usage=USAGE))
    ended = [event.replace(b"response.completed", b"response.incomplete") for event in events]
    assert b"".join(ended) != b"".join(events)
    assert fed("responses", ended) == (10_000, ProviderUsage(OPENAI, 10_000, 9000, 100, 77, None))


def test_a_registered_formats_stream_is_read_by_its_own_rules():
    first = {"candidates": [{"index": 0}], "usageMetadata": {"promptTokenCount": 10_000}}
    last = {
        "candidates": [{"index": 0, "finishReason": "STOP"}],
        "usageMetadata": {
            "promptTokenCount": 10_000,
            "cachedContentTokenCount": 9000,
            "candidatesTokenCount": 77,
        },
    }
    data = b"".join(f"data: {json.dumps(e)}\r\n\r\n".encode() for e in (first, last))
    with registered():
        whole = fed("gemini", [data])
        assert whole == (10_000, ProviderUsage(OPENAI, 10_000, 9000, 0, 77, None))
        for cut in range(1, len(data)):
            assert fed("gemini", [data[:cut], data[cut:]]) == whole
        assert billing_of("gemini") == OPENAI


# ---------------------------------------------------------------------- billing


def test_billing_rules():
    anthropic = ProviderUsage(ANTHROPIC, 10_000, cache_read_tokens=9000, cache_write_tokens=100)
    assert billed_input(anthropic) == pytest.approx(900 + 1.25 * 100 + 0.1 * 9000)
    openai = ProviderUsage(OPENAI, 10_000, cache_read_tokens=9000, cache_write_tokens=100)
    assert openai.billed_input == pytest.approx(1000 + 0.1 * 9000)  # writes cost nothing extra
    assert [billing_of(api) for api in ("messages", "responses", "chat")] == [
        ANTHROPIC,
        OPENAI,
        OPENAI,
    ]


def test_a_models_own_cache_prices_replace_its_familys():
    usage = ProviderUsage(ANTHROPIC, 10_000, cache_read_tokens=9000, cache_write_tokens=100)
    opus_5_5 = usage.priced(CacheTerms(read=0.05))
    assert opus_5_5.billed_input == pytest.approx(900 + 1.25 * 100 + 0.05 * 9000)
    # DeepSeek's Anthropic-format endpoint bills no cache write.
    deepseek = usage.priced(CacheTerms(read=0.02, write=1.0))
    assert deepseek.billed_input == pytest.approx(900 + 100 + 0.02 * 9000)
    # OpenAI's family does not tell writes apart: only the read price changes.
    openai = ProviderUsage(OPENAI, 10_000, cache_read_tokens=9000, cache_write_tokens=100)
    assert openai.priced(CacheTerms(read=0.05, write=2.0)).billed_input == pytest.approx(
        1000 + 0.05 * 9000
    )
    assert usage.priced(None) is usage and usage.priced(None).billed_input == usage.billed_input


# ---------------------------------------------------------------------- the direct estimate


def direct(usage: ProviderUsage, **changes: Any) -> tuple[float, float]:
    fields: dict[str, Any] = {
        "rewritten": True,
        "tokens_before": 20_000,
        "tokens_after": 10_000,
        "previous_prompt": None,
        "seconds_since_previous": None,
        "caching_seen": True,
    }
    fields.update(changes)
    estimate = estimate_direct(usage, **fields)
    return estimate.prompt_tokens, estimate.billed_input


def test_a_request_sent_unchanged_costs_what_it_cost():
    usage = ProviderUsage(ANTHROPIC, 10_000, cache_read_tokens=9000, cache_write_tokens=100)
    assert direct(usage, rewritten=False) == (10_000, usage.billed_input)
    assert direct(usage, tokens_after=0) == (10_000, usage.billed_input)


def test_anthropic_rewritten_request_is_scaled_and_cached_as_an_append_only_history():
    usage = ProviderUsage(ANTHROPIC, 10_000, cache_read_tokens=8000)
    # 10,000 x 20,000 / 10,000 = 20,000 tokens direct; 15,000 of them cached 60 s ago.
    prompt, billed = direct(usage, previous_prompt=15_000, seconds_since_previous=60)
    assert prompt == 20_000
    assert billed == pytest.approx(0.1 * 15_000 + 1.25 * 5000)
    # Older than the cache's 5 minutes: nothing cached, everything written.
    assert direct(usage, previous_prompt=15_000, seconds_since_previous=301)[1] == 1.25 * 20_000
    # A conversation that never used the cache is billed plain input.
    assert direct(usage, caching_seen=False)[1] == 20_000
    # The cached part never exceeds the prompt.
    assert direct(usage, previous_prompt=50_000, seconds_since_previous=1)[1] == 0.1 * 20_000


def test_the_direct_estimate_uses_the_models_prices_and_longer_retention():
    usage = ProviderUsage(OPENAI, 10_000, cache_read_tokens=4096).priced(
        CacheTerms(read=0.05, ttl_s=1800)
    )
    cached = 15_000 // 128 * 128
    # 20 minutes later the model's 30-minute retention still holds the previous prompt.
    prompt, billed = direct(usage, previous_prompt=15_000, seconds_since_previous=1200)
    assert (prompt, billed) == (20_000, pytest.approx((20_000 - cached) + 0.05 * cached))
    assert direct(usage, previous_prompt=15_000, seconds_since_previous=1801)[1] == 20_000
    plain = ProviderUsage(OPENAI, 10_000, cache_read_tokens=4096)
    assert direct(plain, previous_prompt=15_000, seconds_since_previous=1200)[1] == 20_000


def test_openai_rewritten_request_caches_from_1024_in_steps_of_128():
    usage = ProviderUsage(OPENAI, 10_000, cache_read_tokens=4096)
    prompt, billed = direct(usage, previous_prompt=15_000, seconds_since_previous=10)
    assert prompt == 20_000
    cached = 15_000 // 128 * 128  # 14,976
    assert billed == pytest.approx((20_000 - cached) + 0.1 * cached)
    assert direct(usage, previous_prompt=1000, seconds_since_previous=10)[1] == 20_000
    assert direct(usage, previous_prompt=1100, seconds_since_previous=10)[1] == pytest.approx(
        (20_000 - 1024) + 0.1 * 1024
    )
    assert direct(usage)[1] == 20_000  # no earlier request
