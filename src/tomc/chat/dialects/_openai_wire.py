"""What the two OpenAI formats (Chat Completions and Responses) share on the wire: where their
requests go, the error shape of OpenAI's SDKs, and usage that reports the whole prompt with its
cached part."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from ._pricing import OPENAI_BILLING, CacheBilling, CachePricing, openai_pricing
from ._wire import Upstream, WireUsage, whole_prompt_usage

__all__ = ["CHATGPT", "OPENAI", "OpenAIWire", "openai_usage"]

OPENAI = Upstream("openai", "https://api.openai.com/v1", prefix="/v1")
#: The endpoint Codex itself uses when it is signed in with a ChatGPT account: its requests
#: carry a ``ChatGPT-Account-ID`` header and a ChatGPT bearer token the OpenAI API refuses.
CHATGPT = Upstream("chatgpt", "https://chatgpt.com/backend-api/codex", prefix="/v1")


def openai_usage(usage: Any, whole: str, details: str, output: str) -> WireUsage | None:
    """OpenAI's ``usage``: the whole prompt under ``whole``, its cache reads (and writes, where
    reported) under ``details``, the answer under ``output``."""
    if not isinstance(usage, Mapping):
        return None
    parts = usage.get(details)
    parts = parts if isinstance(parts, Mapping) else {}
    return whole_prompt_usage(
        usage.get(whole),
        parts.get("cached_tokens"),
        parts.get("cache_write_tokens"),
        usage.get(output),
    )


class OpenAIWire:
    """The wire facts both OpenAI dialects share (mixed in before :class:`BaseDialect`)."""

    upstreams: ClassVar[tuple[Upstream, ...]] = (OPENAI, CHATGPT)
    cache_billing: ClassVar[CacheBilling] = OPENAI_BILLING

    def upstream(self, headers: Mapping[str, str]) -> Upstream:
        return CHATGPT if "chatgpt-account-id" in headers else OPENAI

    def cache_pricing(self, request: Mapping[str, Any]) -> CachePricing:
        return openai_pricing(request)

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": kind, "param": None, "code": None}}
