"""Every model the docs, the specification and the agents' defaults name has a profile of its own,
found by the lookup the session uses; the specification's own example compacts a long history."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from chat_fixtures import history_tokens, openai_client
from fake_providers import FakeProvider
from tomc import AutomaticChatSession, InvalidOptionError
from tomc._gateway.agents import limits
from tomc.chat._profiles import ProfileTable, bundled_profiles

ROOT = Path(__file__).resolve().parents[2]

#: Named by the specification: its example (``session.create(client, model="deepseek-flash",
#: ...)``) and the output default it cites (Kimi K3's documented 131,072).
SPECIFICATION = ("deepseek-flash", "kimi-k3")
#: The agents' current defaults: Claude Code 2.1.332's (docs/development.md) and Codex 0.171's,
#: and whatever the agent limits module names as each agent's default.
AGENT_DEFAULTS = (
    "claude-opus-5-5",
    "gpt-6.2-sol",
    limits.CLAUDE_DEFAULT_MODEL,
    limits.CODEX_DEFAULT_MODEL,
)

# A model id as the docs write one: a GPT, o-series, Claude tier, DeepSeek or Kimi id, whole
# (not a prefix such as "gpt-5.6-" or a word such as "claude-code-session-id", not o200k_base).
_MODEL_ID = re.compile(
    r"(?<![\w.-])("
    r"gpt-\d+(?:\.\d+)?o?(?:-[a-z]+)*"
    r"|o\d(?:-mini)?"
    r"|claude-(?:opus|sonnet|haiku|fable)-\d+(?:-\d+)?"
    r"|deepseek-[a-z][a-z0-9.]*(?:-[a-z0-9.]+)*"
    r"|kimi-k\d+(?:\.\d+)?"
    r")(?![\w.-])"
)


def _documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def models_in_docs() -> set[str]:
    """Every model id named in README.md and docs/."""
    return {
        match.group(1)
        for path in _documents()
        for match in _MODEL_ID.finditer(path.read_text(encoding="utf-8"))
    }


def named_models() -> list[str]:
    return sorted(models_in_docs() | set(SPECIFICATION) | set(AGENT_DEFAULTS))


def test_the_docs_scan_finds_the_models_they_name():
    found = models_in_docs()
    # A regression guard for the scan itself: ids the docs are known to name.
    assert {"gpt-4o", "claude-opus-4-8", "gpt-5-codex", "gpt-6.2-sol", "claude-opus-5-5"} <= found
    assert not {name for name in found if name.endswith("-")}


@pytest.mark.parametrize("model", named_models())
def test_every_named_model_has_a_profile_of_its_own(model):
    profile = ProfileTable().get(model)
    assert profile is not None, f"{model} has no profile: the session would pass it through"
    # Its own entry, not a sibling's by the family rule (claude-opus-5-5 is not claude-opus-5).
    assert profile.model == model
    assert profile.source.startswith("https://")
    assert profile.max_output_tokens is not None


@pytest.mark.parametrize(
    ("spelling", "model"),
    [
        ("deepseek/deepseek-flash", "deepseek-flash"),  # LiteLLM's and routers' spelling
        ("deepseek-v4-flash", "deepseek-v4-flash"),  # the legacy id DeepSeek still serves
        ("moonshot/kimi-k3", "kimi-k3"),  # LiteLLM
        ("moonshotai/kimi-k3", "kimi-k3"),  # OpenRouter
        ("claude-opus-5-5[1m]", "claude-opus-5-5"),  # Claude Code's 1M spelling
        ("claude-opus-5-5-20260922", "claude-opus-5-5"),  # a dated snapshot
        ("us.anthropic.claude-opus-5-5-v1:0", "claude-opus-5-5"),  # Bedrock
        ("anthropic/claude-opus-5-5", "claude-opus-5-5"),
        ("openai/gpt-6.2-sol", "gpt-6.2-sol"),
    ],
)
def test_the_spellings_of_the_named_models_resolve_to_their_entries(spelling, model):
    profile = ProfileTable().get(spelling)
    assert profile is not None and profile.model == model


def test_the_named_figures_are_the_documented_ones():
    profiles = bundled_profiles()
    figures = {
        name: (profiles[name].context_window, profiles[name].max_output_tokens)
        for name in ("deepseek-flash", "kimi-k3", "claude-opus-5-5", "gpt-6.2-sol")
    }
    assert figures == {
        "deepseek-flash": (1_000_000, 384_000),  # "1M", "384K", taken at their smaller readings
        "kimi-k3": (1_048_576, 131_072),  # the default max_completion_tokens the spec cites
        "claude-opus-5-5": (1_000_000, 128_000),
        "gpt-6.2-sol": (872_000, 128_000),  # Codex's catalog window, under the 922,000 input cap
    }
    assert profiles["kimi-k3"].provider == "moonshot"
    assert profiles["deepseek-flash"].provider == "deepseek"
    for name in ("deepseek-flash", "kimi-k3", "claude-opus-5-5", "gpt-6.2-sol"):
        assert "cach" in profiles[name].source, f"{name}: its caching terms are not recorded"


# ------------------------------------------------------------------ through the real session


@pytest.fixture(scope="module")
def server() -> Iterator[FakeProvider]:
    with FakeProvider() as fake:
        yield fake


@pytest.fixture
def client(server: FakeProvider) -> Iterator[openai.OpenAI]:
    with openai_client(server) as sdk:
        yield sdk


@pytest.mark.parametrize(
    "model",
    ["deepseek-flash", "deepseek/deepseek-flash", "kimi-k3", "moonshotai/kimi-k3",
     "claude-opus-5-5", "gpt-6.2-sol"],
)  # fmt: skip
def test_the_session_knows_the_named_models_window(client, model):
    """A short request to each is sent unchanged because it fits: not as an unknown model."""
    session = AutomaticChatSession()
    messages = [
        {"role": "system", "content": "You are the on-call assistant."},
        {"role": "user", "content": "Is the ingest queue healthy?"},
    ]
    session.create(client, model=model, messages=messages)
    decision = session.last_decision
    assert decision.code == "fits", decision.reason
    assert decision.effective_window == ProfileTable().get(model).context_window


_SERVICES = ("billing", "search", "ingest", "auth", "payments", "notify", "reports", "gateway")


def _day(day: int) -> list[dict[str, str]]:
    """One exchange of an on-call conversation: a deploy log pasted by the user, an answer."""
    service = _SERVICES[day % len(_SERVICES)]
    replicas = day % 9 + 1

    def status(step: int) -> str:
        return f"error: timeout talking to db-{step % 5}" if (day + step) % 11 == 0 else "ok"

    log = "\n".join(
        f"{service}-worker-{step} step {day}.{step}: processed batch {day * 40 + step} of run "
        f"r{day}, latency {(day * 7 + step * 13) % 900 + 20} ms, queue depth {(day + step) % 37}, "
        f"status {status(step)}"
        for step in range(40)
    )
    timeouts = sum(1 for step in range(40) if (day + step) % 11 == 0)
    return [
        {
            "role": "user",
            "content": f"Day {day}: here is the {service} deploy log, what changed?\n"
            f"{service}.replicas = {replicas}\n{log}",
        },
        {
            "role": "assistant",
            "content": f"On day {day} {service} ran with {replicas} replicas; {timeouts} batches "
            "timed out on the database. Next I would compare the slow batches with the queue "
            "depth before changing the pool.",
        },
    ]


def long_conversation(days: int) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You are the on-call assistant for the platform."}]
    for day in range(days):
        messages.extend(_day(day))
    messages.append(
        {"role": "user", "content": "Given all of this, what should we do about the timeouts?"}
    )
    return messages


def test_the_specifications_example_compacts_a_long_history(server, client):
    """The specification's example as written, with a history longer than deepseek-flash's 1M
    window: the request is compiled (it was ``unknown_model`` without the profile)."""
    messages = long_conversation(660)
    assert history_tokens(messages) > 1_000_000
    session = AutomaticChatSession(native_cooldown_requests=2)  # stable, cache-friendly prefix
    response = session.create(
        client,
        model="deepseek-flash",
        messages=messages,
        task="What should the agent do next?",
        max_tokens=8192,
        stream=True,
    )
    decision = session.last_decision
    assert (decision.action, decision.code) == ("compiled", "compiled"), decision.reason
    assert decision.effective_window == 1_000_000
    assert decision.output_reserve == 8192
    assert decision.tokens_after <= 1_000_000 - 8192 < decision.tokens_before
    assert isinstance(response, openai.Stream)  # returned unconsumed
    assert (
        "".join(chunk.choices[0].delta.content or "" for chunk in response if chunk.choices)
        == server.reply.text
    )
    sent = server.requests[-1].body
    assert (sent["model"], sent["max_tokens"], sent["stream"]) == ("deepseek-flash", 8192, True)
    assert len(sent["messages"]) < len(messages)
    assert sent["messages"][0] == messages[0]  # the system prompt stays byte-identical
    assert sent["messages"][-1] == messages[-1]  # and so does the latest user message


def test_a_request_without_an_output_limit_leaves_room_for_the_models_default() -> None:
    """Kimi K3 answers a request that sets no ``max_completion_tokens`` with up to 131,072
    tokens: the prompt must leave room for that, not for the session's 8,192."""
    messages = [{"role": "user", "content": "Summarise the incident."}]
    session = AutomaticChatSession()
    unset = session.prepare_request({"model": "kimi-k3", "messages": messages}, api="chat")
    assert unset.decision.output_reserve == 131_072
    own = {"model": "kimi-k3", "messages": messages, "max_completion_tokens": 4_096}
    assert session.prepare_request(own, api="chat").decision.output_reserve == 4_096
    other = session.prepare_request({"model": "gpt-4o", "messages": messages}, api="chat")
    assert other.decision.output_reserve == 8_192


@pytest.mark.parametrize("value", [0, -1, True, "131072", 2_000_000])
def test_a_default_output_is_checked_by_name(value: object) -> None:
    with pytest.raises(InvalidOptionError, match="default_output_tokens"):
        AutomaticChatSession(
            model_profiles={"m": {"context_window": 1_000_000, "default_output_tokens": value}}
        )
