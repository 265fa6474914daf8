"""The three dialects by name, and the one a request's body implies."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..._core.errors import InvalidOptionError
from ._anthropic_messages import AnthropicMessages
from ._base import Dialect
from ._chat_completions import ChatCompletions
from ._openai_responses import OpenAIResponses

__all__ = ["DIALECTS", "dialect_for"]

DIALECTS: dict[str, Dialect] = {
    "chat": ChatCompletions(),
    "messages": AnthropicMessages(),
    "responses": OpenAIResponses(),
}


def dialect_for(api: str | None, request: Mapping[str, Any]) -> Dialect:
    """The named dialect, or the one a request body's keys imply (``input`` -> Responses)."""
    if api is None:
        api = "responses" if "input" in request and "messages" not in request else "chat"
    dialect = DIALECTS.get(api)
    if dialect is None:
        raise InvalidOptionError(
            f"api must be one of {', '.join(map(repr, DIALECTS))}, not {api!r}"
        )
    return dialect
