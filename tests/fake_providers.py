"""One fake LLM provider over loopback HTTP, speaking the real wire formats, recording everything.

It lives in the package, :mod:`tomc.testing.fake_provider` (also a command: ``python -m
tomc.testing.fake_provider``); this module keeps the name the tests import. ``with
FakeProvider() as fake:`` serves it on a free 127.0.0.1 port: ``fake.base_url`` for the OpenAI
SDK, ``fake.anthropic_url`` for Anthropic's, ``fake.requests`` for what arrived. The loopback
agent upstream (tests/agent_upstream.py) applies the same request rules.
"""

from tomc.testing.fake_provider import (
    BINDING_BETA,
    FakeProvider,
    ProviderError,
    Recorded,
    Reply,
    Usage,
    read_request,
    serve_in_thread,
    stop_served,
)
from tomc.testing.provider_rules import _messages_problem, _responses_problem

__all__ = [
    "BINDING_BETA",
    "FakeProvider",
    "ProviderError",
    "Recorded",
    "Reply",
    "Usage",
    "_messages_problem",
    "_responses_problem",
    "read_request",
    "serve_in_thread",
    "stop_served",
]
