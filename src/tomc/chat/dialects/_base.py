"""What every wire-format dialect provides, and the helpers they share.

A dialect reads one request body (the keyword arguments of an SDK call, or the JSON body the
gateway receives) into neutral :class:`~tomc.chat._conversation.Entry` items, builds the memory
item in its own format, splices a rewritten item list back into the request, reads the output
reserve and the provider's usage, and finds the client method that sends it. The session policy
exists once and works only on what a dialect gives it.

For the gateway a dialect also states its wire facts: the paths it serves, where its model is,
the conversation hints its clients send, the usage its answers report, its error shape, its
compaction endpoint and its upstreams. A new format is one module implementing :class:`Dialect`
(most of it inherited from :class:`BaseDialect`) and one registry line.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Protocol

from .._conversation import Entry, pairing_problems
from ._pricing import DEFAULT_PRICING, OPENAI_BILLING, CacheBilling, CachePricing
from ._wire import Upstream, WireUsage

__all__ = [
    "BaseDialect",
    "Dialect",
    "PassThrough",
    "as_mapping",
    "canonical_digest",
    "part_text",
    "prompt_size",
    "text_parts",
]


class PassThrough(Exception):
    """The request must go out unchanged; ``code`` is the stable reason code.

    A dialect raises it for what its format forbids, and the session's own steps raise it for
    everything else (the request fits, nothing to compile, compilation failed): the one signal
    to send a request as it came."""

    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def as_mapping(item: Any) -> dict[str, Any] | None:
    """The item as a plain dict, or ``None`` when it is neither a mapping nor a pydantic model.

    SDK response objects (``response.choices[0].message``, ``response.output`` items) are often
    appended to histories as they are; they are read through ``model_dump`` without changing them.
    """
    if isinstance(item, Mapping):
        return dict(item)
    dump = getattr(item, "model_dump", None)
    if callable(dump):
        try:
            data = dump(exclude_none=True)
        except Exception:
            return None
        return data if isinstance(data, dict) else None
    return None


def canonical_digest(data: Any) -> bytes:
    """A digest of an item's exact content (sorted keys), to notice edits."""
    text = json.dumps(data, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def part_text(part: Any) -> str | None:
    """The text of a text content part in any of the three formats, else ``None``."""
    if isinstance(part, str):
        return part
    if isinstance(part, Mapping) and part.get("type") in ("text", "input_text", "output_text"):
        text = part.get("text")
        return text if isinstance(text, str) else None
    return None


def text_parts(content: Any) -> list[str]:
    """The texts of a content value: a string, or the text parts of a list of parts."""
    if isinstance(content, str):
        return [content]
    texts = [part_text(part) for part in content] if isinstance(content, list) else []
    return [text for text in texts if text is not None]


class Dialect(Protocol):
    """One wire format. Implementations are stateless; the session keeps all state."""

    name: ClassVar[str]
    #: The request key holding the history list ("messages" or "input").
    items_key: ClassVar[str]
    #: Tool results must directly follow the item that made the calls.
    adjacent_results: ClassVar[bool]
    #: Roles the memory item may take in this format.
    memory_roles: ClassVar[tuple[str, ...]]
    #: The client method that sends it, for messages ("chat.completions.create").
    method_name: ClassVar[str]

    def items(self, request: Mapping[str, Any]) -> Sequence[Any]:
        """The history list; raise :class:`PassThrough` when the request cannot be rewritten."""

    def read(self, item: Any, index: int) -> tuple[Entry, str]:
        """``(entry, text to count)``; the entry's ``tokens`` and ``digest`` are filled later."""

    def fixed_text(self, request: Mapping[str, Any]) -> str:
        """Text sent with every request outside the list: instructions, tool schemas."""

    def output_reserve(self, request: Mapping[str, Any]) -> int | None:
        """The request's own output limit, if it sets one."""

    def memory_item(self, text: str, role: str) -> dict[str, Any]:
        """The item that carries a compiled memory."""

    def with_items(self, request: Mapping[str, Any], items: list[Any]) -> dict[str, Any]:
        """A copy of the request with its history list replaced (nothing else changes)."""

    def pairing(self, entries: Sequence[Entry]) -> list[str]:
        """Tool-pairing problems of an original history (it then passes through)."""

    def validate(self, items: Sequence[Any]) -> list[str]:
        """The provider's structural rules a rewritten list must satisfy; empty when sound."""

    def finalize(
        self,
        body: dict[str, Any],
        raw_after_change: Sequence[Entry],
        thinking_prefix: str,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        """Last format rules for a rewritten body; ``raw_after_change`` are the entries sent
        unchanged after its first rewritten position: ``(body, headers to add)``; raise
        :class:`PassThrough` when it must go out unchanged."""

    def prompt_tokens(self, response: Any) -> int | None:
        """The prompt size a finished (non-streaming) response reports, if any."""

    def cache_memory(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        """``body`` with a prompt-cache breakpoint after the memory item at ``index`` of its
        history, where the format has explicit breakpoints and the request uses them."""

    def endpoint(self, client: Any) -> Callable[..., Any] | None:
        """The client's method that sends this format, or ``None`` when it has none."""

    def cache_pricing(self, request: Mapping[str, Any]) -> CachePricing:
        """What the provider charges to write and read this request's prompt cache, and how
        long the cache lives (:class:`~tomc.chat.dialects.CachePricing`)."""

    def provider_ceiling(self, request: Mapping[str, Any]) -> int | None:
        """The prompt size (in tokens) under which the provider's own context management,
        as the request asks for it, does nothing: a server-side compaction threshold, the
        trigger of an edit that clears tool results. TOMC keeps the request under it, so the
        provider never compacts the turns TOMC compiled. ``None``: the request asks for none."""

    # ------------------------------------------------------------------ wire facts

    #: The endpoints its requests go to; :meth:`upstream` picks one (the first by default).
    upstreams: ClassVar[tuple[Upstream, ...]]
    #: How its provider bills cached input, for the usage book (write and read prices, the
    #: smallest cached prefix and its step); ``billing`` is its family's name.
    cache_billing: ClassVar[CacheBilling]

    @property
    def billing(self) -> str:
        """The name of its billing family (``"anthropic"``, ``"openai"``)."""

    #: Bytes a stream event's line must contain to be read for usage (the rest are skipped).
    usage_marks: ClassVar[tuple[bytes, ...]]

    def claims(self, request: Mapping[str, Any]) -> bool:
        """Whether a body's own keys say it is in this format (``input`` -> Responses)."""

    def serves(self, path: str) -> bool:
        """Whether a ``POST`` to ``path`` carries a request in this format (one it may rewrite)."""

    def owns(self, path: str, headers: Mapping[str, str]) -> bool:
        """Whether a request on a path no format serves still goes to this format's provider
        (``/v1/messages/count_tokens``, or Anthropic's headers); ``headers`` are lower-cased."""

    def upstream(self, headers: Mapping[str, str]) -> Upstream:
        """Which of :attr:`upstreams` a request with these (lower-cased) headers goes to."""

    def model_of(self, path: str, body: Mapping[str, Any]) -> str | None:
        """The model a request names: a body field, or a part of the URL path."""

    def conversation_hint(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
        """The conversation's name as its client sends it (a session header or body field),
        prefixed by whose name it is (``claude:<session id>``), or ``None``."""

    def conversation_seed(self, body: Mapping[str, Any]) -> tuple[Any, ...]:
        """What stays the same for a whole conversation (its instructions and first user turn):
        hashed into its key when the client names none."""

    def response_usage(self, body: Any) -> WireUsage | None:
        """The usage a whole (non-streamed) JSON answer reports."""

    def event_usage(self, event: Mapping[str, Any]) -> tuple[WireUsage, bool] | None:
        """The usage one parsed stream event reports (a later event's figures replace earlier
        ones, figure by figure), and whether this event closes them; ``None`` when it has none."""

    def error_body(self, status: int, message: str, kind: str) -> dict[str, Any]:
        """An error the gateway answers itself, in the shape this format's SDKs parse; ``kind``
        is the error type (``api_error``, ``timeout_error``)."""

    def compacts(self, path: str) -> bool:
        """Whether a ``POST`` to ``path`` is the agent compacting through the provider's own
        endpoint (``/v1/responses/compact``): its conversation then cools down."""


_USAGE_PARTS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def prompt_size(usage: Any) -> int | None:
    """The prompt size a usage figure reports: an int; Chat Completions' ``prompt_tokens``;
    Responses' ``input_tokens``; Anthropic's ``input_tokens`` plus its cache creation and cache
    reads (there ``input_tokens`` is only the uncached remainder). Mappings or SDK objects."""

    def field(name: str) -> Any:
        return usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)

    def number(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0

    if usage is None or isinstance(usage, bool):
        return None
    if isinstance(usage, int):
        return usage if usage >= 0 else None
    if number(field("prompt_tokens")):
        return field("prompt_tokens")
    parts = [field(name) for name in _USAGE_PARTS]
    if not number(parts[0]):
        return None
    return sum(part for part in parts if number(part))


def cached_size(usage: Any) -> int | None:
    """The prompt tokens a usage figure says were read from the provider's cache: Anthropic's
    ``cache_read_input_tokens``; Chat Completions' ``prompt_tokens_details.cached_tokens``;
    Responses' ``input_tokens_details.cached_tokens``; a ``cache_read_tokens`` attribute (a
    usage read into one shape). ``None`` when it says nothing of it."""

    def field(source: Any, name: str) -> Any:
        return source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)

    if usage is None or isinstance(usage, (bool, int)):
        return None
    for value in (
        field(usage, "cache_read_input_tokens"),
        field(usage, "cache_read_tokens"),  # a usage already read into one shape (the gateway's)
        field(field(usage, "prompt_tokens_details"), "cached_tokens"),
        field(field(usage, "input_tokens_details"), "cached_tokens"),
    ):
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return None


class BaseDialect:
    """What the dialects share: splicing by ``items_key``, the pairing check by
    ``adjacent_results``, reading usage, no last rules; on the wire, the model in the body,
    the exact ``paths`` it serves, the first of its ``upstreams``, no conversation hint, and
    the ``compaction_paths`` of its provider's own compaction endpoint."""

    name: ClassVar[str]
    items_key: ClassVar[str]
    adjacent_results: ClassVar[bool]
    upstreams: ClassVar[tuple[Upstream, ...]]
    #: The paths a ``POST`` to which carries this format (see :meth:`serves`).
    paths: ClassVar[tuple[str, ...]] = ()
    #: Paths of the provider's own compaction endpoint (see :meth:`compacts`).
    compaction_paths: ClassVar[tuple[str, ...]] = ()
    usage_marks: ClassVar[tuple[bytes, ...]] = (b"usage",)
    #: Cached reads cheaper, writes not told apart, unless the format says otherwise.
    cache_billing: ClassVar[CacheBilling] = OPENAI_BILLING

    @property
    def billing(self) -> str:
        return self.cache_billing.family

    def _mapping(self, item: Any, index: int, what: str) -> dict[str, Any]:
        data = as_mapping(item)
        if data is None:
            raise PassThrough(
                "invalid_request", f"{what} {index} is a {type(item).__name__}, not a mapping"
            )
        return data

    def _list(self, request: Mapping[str, Any]) -> Sequence[Any]:
        items = request.get(self.items_key)
        if not isinstance(items, list | tuple):
            raise PassThrough(
                "invalid_request", f"{self.items_key} is a {type(items).__name__}, not a list"
            )
        return items

    def with_items(self, request: Mapping[str, Any], items: list[Any]) -> dict[str, Any]:
        return {**request, self.items_key: items}

    def pairing(self, entries: Sequence[Entry]) -> list[str]:
        return pairing_problems(entries, adjacent=self.adjacent_results, allow_pending_tail=True)

    def finalize(
        self,
        body: dict[str, Any],
        raw_after_change: Sequence[Entry],
        thinking_prefix: str,
    ) -> tuple[dict[str, Any], dict[str, str]]:
        return body, {}

    def cache_memory(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        return body  # OpenAI formats cache every prefix on their own

    def cache_pricing(self, request: Mapping[str, Any]) -> CachePricing:
        return DEFAULT_PRICING

    def provider_ceiling(self, request: Mapping[str, Any]) -> int | None:
        return None

    def prompt_tokens(self, response: Any) -> int | None:
        usage = response.get("usage") if isinstance(response, Mapping) else None
        return prompt_size(usage if usage is not None else getattr(response, "usage", None))

    def claims(self, request: Mapping[str, Any]) -> bool:
        return self.items_key in request

    def serves(self, path: str) -> bool:
        return path in self.paths

    def owns(self, path: str, headers: Mapping[str, str]) -> bool:
        return False

    def upstream(self, headers: Mapping[str, str]) -> Upstream:
        return self.upstreams[0]

    def model_of(self, path: str, body: Mapping[str, Any]) -> str | None:
        model = body.get("model")
        return model if isinstance(model, str) else None

    def conversation_hint(self, headers: Mapping[str, str], body: Mapping[str, Any]) -> str | None:
        return None

    def compacts(self, path: str) -> bool:
        return path in self.compaction_paths
