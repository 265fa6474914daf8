"""What a LiteLLM proxy hands its hooks, read in TOMC's terms (no LiteLLM import here).

LiteLLM calls a hook's ``async_pre_call_hook(user_api_key_dict, cache, data, call_type)`` with
the request as it will send it (``data``: the client's body fields beside LiteLLM's own keys,
``proxy_server_request`` holding the client's headers and body as sent) and reports the answer
to ``async_log_success_event(kwargs, response_obj, ...)`` with its usage in OpenAI's terms,
whatever the provider. This module maps a call type to a wire format, reads the client's body
and headers, applies a rewritten body back to ``data``, reads the per-key and per-team settings
from their metadata, and turns the reported usage into a
:class:`~tomc._gateway.proxy.metering.usage.ProviderUsage`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._gateway.proxy.metering.usage import ProviderUsage
from .._gateway.settings import TARGET_OFF, parse_context_target
from ..chat.dialects import DIALECTS, Dialect

__all__ = [
    "CALL_TYPES",
    "METADATA_KEY",
    "KeySettings",
    "apply_body",
    "client_body",
    "client_headers",
    "dialect_of",
    "key_settings",
    "metadata_of",
    "note_in_spend_logs",
    "usage_of",
]

#: LiteLLM's call types for the three routes TOMC compacts, and their wire formats.
CALL_TYPES = {
    "completion": "chat",
    "acompletion": "chat",
    "anthropic_messages": "messages",
    "responses": "responses",
    "aresponses": "responses",
}
#: The key of a key's or team's metadata that holds TOMC's settings:
#: ``{"tomc": {"context_target": 60000}}`` or ``{"tomc": {"context_target": "off"}}``.
METADATA_KEY = "tomc"
# LiteLLM's own keys in ``data`` (never the client's fields): kept out of the view TOMC reads.
_LITELLM_KEYS = frozenset(
    {
        "litellm_call_id",
        "litellm_logging_obj",
        "litellm_metadata",
        "metadata",
        "proxy_server_request",
        "secret_fields",
        "provider_specific_header",
    }
)


def dialect_of(call_type: str) -> Dialect | None:
    """The wire format of a LiteLLM call type TOMC compacts, else ``None``."""
    name = CALL_TYPES.get(str(call_type))
    return DIALECTS[name] if name is not None else None


def client_headers(data: Mapping[str, Any]) -> dict[str, str]:
    """The client's request headers, names lower-cased (empty when LiteLLM kept none)."""
    server = data.get("proxy_server_request")
    headers = server.get("headers") if isinstance(server, Mapping) else None
    if not isinstance(headers, Mapping):
        return {}
    return {str(name).lower(): str(value) for name, value in headers.items()}


def client_body(data: Mapping[str, Any], dialect: Dialect) -> dict[str, Any]:
    """The request body TOMC decides on: the client's fields as LiteLLM will send them.

    The client's own body (``proxy_server_request.body``) names the conversation (its
    ``metadata``, ``prompt_cache_key``); the history and everything else come from ``data``,
    which LiteLLM (and hooks before this one) may have changed."""
    server = data.get("proxy_server_request")
    sent = server.get("body") if isinstance(server, Mapping) else None
    body = dict(sent) if isinstance(sent, Mapping) else {}
    body.update({key: value for key, value in data.items() if key not in _LITELLM_KEYS})
    if not isinstance(body.get(dialect.items_key), list):
        raise ValueError(f"the request has no {dialect.items_key} list")
    return body


def apply_body(data: dict[str, Any], view: Mapping[str, Any], sent: Mapping[str, Any]) -> None:
    """Make ``data`` carry the rewritten body ``sent`` (the session's answer for ``view``): every
    field it changed, added or dropped."""
    for key, value in sent.items():
        if key not in _LITELLM_KEYS and (key not in view or view[key] is not value):
            data[key] = value
    for key in view:
        if key not in sent and key in data and key not in _LITELLM_KEYS:
            del data[key]


def metadata_of(data: dict[str, Any]) -> dict[str, Any]:
    """The request's metadata LiteLLM logs (``litellm_metadata`` on the Anthropic and Responses
    routes, ``metadata`` on Chat Completions): spend logs and callbacks show what is put here."""
    key = "litellm_metadata" if isinstance(data.get("litellm_metadata"), dict) else "metadata"
    found = data.get(key)
    if not isinstance(found, dict):
        found = data[key] = {}
    return found


def note_in_spend_logs(data: dict[str, Any], figures: Mapping[str, Any]) -> None:
    """Put TOMC's ``figures`` under ``tomc`` in the request's ``spend_logs_metadata``: the one
    metadata field LiteLLM copies into its spend logs as it is (other keys are dropped there)."""
    metadata = metadata_of(data)
    logged = metadata.get("spend_logs_metadata")
    metadata["spend_logs_metadata"] = {
        **(logged if isinstance(logged, Mapping) else {}),
        "tomc": dict(figures),
    }


@dataclass(frozen=True)
class KeySettings:
    """What a key's or team's metadata asks of TOMC: a context target (a number of tokens, or
    ``"off"``), and where it came from."""

    target: int | str | None = None
    source: str = ""


def _target_in(metadata: object) -> int | str | None:
    if not isinstance(metadata, Mapping):
        return None
    own = metadata.get(METADATA_KEY)
    if not isinstance(own, Mapping) or "context_target" not in own:
        return None
    return parse_context_target(own["context_target"])


def key_settings(key_metadata: object, team_metadata: object) -> KeySettings:
    """The key's setting, else the team's (a value that does not parse raises
    :class:`~tomc._core.errors.InvalidOptionError`, naming it)."""
    for metadata, source in ((key_metadata, "key"), (team_metadata, "team")):
        target = _target_in(metadata)
        if target is not None:
            shown = "off" if target == TARGET_OFF else target
            return KeySettings(target, f"litellm {source} metadata ({shown})")
    return KeySettings()


def _number(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _field(source: object, name: str) -> object:
    if isinstance(source, Mapping):
        return source.get(name)
    return getattr(source, name, None)


def usage_of(response: object, dialect: Dialect) -> ProviderUsage | None:
    """The provider's usage as LiteLLM reports it (``usage.prompt_tokens`` with cache reads in
    ``prompt_tokens_details.cached_tokens`` or ``cache_read_input_tokens``, cache writes in
    ``cache_creation_input_tokens`` or ``prompt_tokens_details.cache_write_tokens``), in the
    format's billing family; ``None`` when it reports no prompt size."""
    usage = _field(response, "usage")
    prompt = _number(_field(usage, "prompt_tokens"))
    if not prompt:
        return None
    details = _field(usage, "prompt_tokens_details")
    read = _number(_field(usage, "cache_read_input_tokens")) or _number(
        _field(details, "cached_tokens")
    )
    write = _number(_field(usage, "cache_creation_input_tokens")) or _number(
        _field(details, "cache_write_tokens")
    )
    output = _number(_field(usage, "completion_tokens")) or None
    return ProviderUsage(dialect.billing, prompt, read, write, output_tokens=output)
