"""TOMC as a LiteLLM proxy hook (see :mod:`tomc.litellm`)."""
