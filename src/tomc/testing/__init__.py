"""A fake LLM provider on loopback, for trying TOMC offline and for its own tests.

``python -m tomc.testing.fake_provider [--port N]`` serves Chat Completions, Anthropic Messages
and OpenAI Responses (:mod:`tomc.testing.fake_provider`) with deterministic answers
(:mod:`tomc.testing.wire`, :mod:`tomc.testing.replies`) and the real APIs' request rules
(:mod:`tomc.testing.provider_rules`). Not part of the public API: what it answers may change
with the tests that use it.
"""
