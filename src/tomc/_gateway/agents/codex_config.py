"""Codex's ``config.toml``: where it lives, which model provider it uses, and the edit (or the
``-c`` overrides) that send Codex's requests to the gateway.

Codex reads ``$CODEX_HOME/config.toml`` (default ``~/.codex``). The built-in ``openai``
provider cannot be redefined by a ``[model_providers.openai]`` table, so TOMC adds its own
provider, ``[model_providers.tomc]``, and selects it with ``model_provider = "tomc"``. Its
``name`` is not "OpenAI" on purpose: Codex keys zstd bodies, websockets and remote compaction
on that name. Auth: a user of the built-in provider gets ``requires_openai_auth = true`` (the
ChatGPT sign-in or the API key in ``auth.json``), or ``env_key = "OPENAI_API_KEY"`` when that
variable is set and there is no ``auth.json``; a user of a custom provider keeps that
provider's own auth keys, headers and query parameters. Edits go through ``tomlkit``, so the
user's comments, order and formatting stay as they were.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError
from tomlkit.items import InlineTable

from ..._core.errors import GatewayError
from ..health import gateway_root, loopback_port
from .agent_config import ConfigEdit, ConfigRestore, KeyChange, user_home

__all__ = [
    "PROVIDER_ID",
    "CodexProvider",
    "codex_activate",
    "codex_auth_mode",
    "codex_config_path",
    "codex_deactivate",
    "codex_home",
    "codex_provider",
    "codex_run_overrides",
    "tomc_provider_table",
]

PROVIDER_ID = "tomc"
PROVIDER_NAME = "TOMC gateway"
BUILTIN = "openai"
#: Provider ids Codex defines itself and refuses as tables.
RESERVED = frozenset({"openai", "ollama", "lmstudio"})
_AUTH_KEYS = ("env_key", "experimental_bearer_token", "auth", "requires_openai_auth")
#: Keys of the user's previous provider that say where and how, not who: not carried over.
_NOT_COPIED = frozenset({"name", "base_url", "wire_api", "supports_websockets"})
_PROVIDER_PATH = ("model_providers", PROVIDER_ID)


def codex_home(environ: Mapping[str, str]) -> Path:
    """``$CODEX_HOME``, else ``~/.codex``."""
    value = environ.get("CODEX_HOME", "").strip()
    return Path(value).expanduser() if value else user_home(environ) / ".codex"


def codex_config_path(environ: Mapping[str, str]) -> Path:
    return codex_home(environ) / "config.toml"


def codex_auth_mode(environ: Mapping[str, str]) -> str:
    """``"env_key"`` when ``OPENAI_API_KEY`` is set and Codex has no ``auth.json``, else
    ``"openai_auth"`` (Codex's own sign-in: ChatGPT, or an API key it stored)."""
    key_set = bool(environ.get("OPENAI_API_KEY", "").strip())
    if key_set and not (codex_home(environ) / "auth.json").exists():
        return "env_key"
    return "openai_auth"


@dataclass(frozen=True)
class CodexProvider:
    """The model provider a configuration selects: its id, its table (``None`` for a
    built-in), the profile that chose it, and its explicit base URL."""

    id: str
    table: Mapping[str, Any] | None
    profile: str | None
    base_url: str | None

    @property
    def known(self) -> bool:
        return self.id == BUILTIN or self.table is not None

    def is_gateway(self) -> bool:
        return self.id == PROVIDER_ID and loopback_port(self.base_url) is not None


def _load(text: str, where: str) -> tomlkit.TOMLDocument:
    try:
        return tomlkit.parse(text)
    except TOMLKitError as exc:
        raise GatewayError(f"{where} is not valid TOML ({exc}); fix or move it first") from None


def _mapping(value: object) -> dict[str, Any] | None:
    if isinstance(value, Mapping):
        return {str(key): item for key, item in value.items()}
    return None


def _unwrap(value: object) -> Any:
    return value.unwrap() if hasattr(value, "unwrap") else value


def _provider_of(doc: Mapping[str, Any], *, use_profile: bool) -> CodexProvider:
    data = _unwrap(doc)
    provider_id = data.get("model_provider", BUILTIN)
    profile = data.get("profile") if use_profile else None
    chosen_by = None
    if isinstance(profile, str):
        settings = _mapping((data.get("profiles") or {}).get(profile))
        if settings and "model_provider" in settings:
            provider_id, chosen_by = settings["model_provider"], profile
    provider_id = str(provider_id)
    providers = _mapping(data.get("model_providers")) or {}
    table = None if provider_id in RESERVED else _mapping(providers.get(provider_id))
    if provider_id == BUILTIN:
        base_url = data.get("openai_base_url")
    else:
        base_url = (table or {}).get("base_url")
    return CodexProvider(
        provider_id, table, chosen_by, base_url if isinstance(base_url, str) else None
    )


def codex_provider(text: str | None, where: str = "config.toml") -> CodexProvider:
    """The provider Codex uses with this configuration (an active profile included)."""
    return _provider_of(_load(text or "", where), use_profile=True)


def _upstreams(provider: CodexProvider, port: int) -> dict[str, str]:
    """Where the provider sent requests, when that was not OpenAI's default: the gateway's
    ``openai`` upstream, and its ``chatgpt`` one too when the provider carries Codex's
    sign-in (those requests went to the same address)."""
    url = provider.base_url
    if provider.is_gateway() or not url or loopback_port(url) == port:
        return {}
    url = url.rstrip("/")
    kinds = ["openai"]
    if provider.id == BUILTIN or (provider.table or {}).get("requires_openai_auth") is True:
        kinds.append("chatgpt")
    return dict.fromkeys(kinds, url)


def tomc_provider_table(
    port: int, auth_mode: str, previous: CodexProvider | None = None
) -> dict[str, Any]:
    """The ``[model_providers.tomc]`` table for a gateway on ``port``.

    ``previous`` is the provider the user had: a custom provider's auth keys, headers, query
    parameters and retry settings are carried over; TOMC's own earlier table keeps its keys.
    """
    table: dict[str, Any] = {
        "name": PROVIDER_NAME,
        "base_url": f"{gateway_root(port)}/v1",
        "wire_api": "responses",
    }
    if previous is not None and previous.table is not None:
        for key, value in previous.table.items():
            if key not in _NOT_COPIED:
                table[key] = _unwrap(value)
        if previous.is_gateway():
            table["name"] = previous.table.get("name", PROVIDER_NAME)
        return table
    if auth_mode == "env_key":
        table["env_key"] = "OPENAI_API_KEY"
    else:
        table["requires_openai_auth"] = True
    return table


def _check_known(provider: CodexProvider, where: str) -> None:
    if provider.known:
        return
    if provider.id in RESERVED:
        raise GatewayError(
            f"{where} selects Codex's built-in provider {provider.id!r}, whose address TOMC "
            "cannot read; use `tomc run codex` with that provider's address in a "
            "[model_providers.<name>] table"
        )
    raise GatewayError(
        f"{where} selects model_provider {provider.id!r} but has no "
        f"[model_providers.{provider.id}] table; fix it first"
    )


def codex_activate(
    text: str | None, port: int, auth_mode: str, where: str = "config.toml"
) -> ConfigEdit:
    """Add ``[model_providers.tomc]`` pointing at the gateway and select it with the
    top-level ``model_provider``; the upstream recorded is the previous provider's address."""
    text = text or ""
    doc = _load(text, where)
    provider = _provider_of(doc, use_profile=False)
    _check_known(provider, where)
    table = tomc_provider_table(port, auth_mode, None if provider.id == BUILTIN else provider)
    notes: list[str] = []
    chosen = _provider_of(doc, use_profile=True)
    if chosen.profile is not None and chosen.id != PROVIDER_ID:
        notes.append(
            f"profile {chosen.profile!r} (the active profile in {where}) selects "
            f"model_provider {chosen.id!r}, which wins over the top-level key: Codex will not "
            "use the gateway while that profile is active"
        )
    current_id = doc.get("model_provider")
    providers = doc.get("model_providers")
    current_table = providers.get(PROVIDER_ID) if providers is not None else None
    pointed = provider.is_gateway()
    changes = (
        KeyChange(
            ("model_provider",),
            current_id is not None and not pointed,
            None if pointed else _unwrap(current_id),
            PROVIDER_ID,
        ),
        KeyChange(
            _PROVIDER_PATH,
            current_table is not None and not pointed,
            None if pointed else _unwrap(current_table),
            table,
        ),
    )
    created = (("model_providers",),) if providers is None else ()
    changed = False
    if _unwrap(current_id) != PROVIDER_ID:
        doc["model_provider"] = PROVIDER_ID
        changed = True
    if _unwrap(current_table) != table:
        if providers is None:
            providers = tomlkit.table(is_super_table=True)
            doc["model_providers"] = providers
        providers[PROVIDER_ID] = _table_item(table, inline=isinstance(providers, InlineTable))
        changed = True
    return ConfigEdit(
        _render(doc, text) if changed else text,
        changed,
        changes,
        created,
        _upstreams(provider, port),
        tuple(notes),
    )


_BARE_LF = re.compile(r"(?<!\r)\n")


def _table_item(values: Mapping[str, Any], *, inline: bool) -> Any:
    """A TOML table (or inline table) of ``values``; nested tables are written inline, the
    way a provider's ``query_params`` and ``http_headers`` usually are."""
    item = tomlkit.inline_table() if inline else tomlkit.table()
    for key, value in values.items():
        item[key] = _table_item(value, inline=True) if isinstance(value, Mapping) else value
    if not inline:
        item.add(tomlkit.nl())  # a blank line before whatever table follows
    return item


def _render(doc: tomlkit.TOMLDocument, before: str) -> str:
    text = doc.as_string()
    if text.endswith("\n\n") and not before.endswith("\n\n"):
        text = text[:-1]  # the table's blank line, when it landed at the end of the file
    if "\r\n" in before and before.count("\r\n") == before.count("\n"):
        # tomlkit ends the lines it adds with LF alone: a CRLF file (Notepad's, Windows
        # editors') keeps CRLF on every line.
        text = _BARE_LF.sub("\r\n", text)
    return text


def codex_deactivate(
    text: str,
    changes: tuple[KeyChange, ...],
    created: tuple[tuple[str, ...], ...],
    where: str = "config.toml",
) -> ConfigRestore:
    """Take TOMC's keys out of a configuration the user changed after activation: put back
    what they held before, but only while they still select the gateway."""
    doc = _load(text, where)
    kept: list[str] = []
    for change in changes:
        if change.path == ("model_provider",):
            current = _unwrap(doc.get("model_provider"))
            if current is None:
                continue
            if current != PROVIDER_ID:
                kept.append("model_provider")
                continue
            if change.existed:
                doc["model_provider"] = change.previous
            else:
                del doc["model_provider"]
        elif change.path == _PROVIDER_PATH:
            providers = doc.get("model_providers")
            if providers is None or PROVIDER_ID not in providers:
                continue
            if loopback_port(_unwrap(providers[PROVIDER_ID]).get("base_url")) is None:
                kept.append("model_providers.tomc")
                continue
            if change.existed and isinstance(change.previous, Mapping):
                inline = isinstance(providers, InlineTable)
                providers[PROVIDER_ID] = _table_item(change.previous, inline=inline)
            else:
                del providers[PROVIDER_ID]
    providers = doc.get("model_providers")
    if ("model_providers",) in created and providers is not None and not _unwrap(providers):
        del doc["model_providers"]
    result = _render(doc, text)
    return ConfigRestore(result, not result.strip(), tuple(kept))


def codex_run_overrides(
    text: str | None,
    port: int,
    auth_mode: str,
    where: str = "config.toml",
    extra_headers: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str], list[str]]:
    """``-c`` arguments that send one Codex process to the gateway, the upstreams its own
    configuration used, and notes. Nothing is written; an unreadable configuration only
    costs the upstream detection (Codex will report the file itself). ``extra_headers``
    join the provider's ``http_headers`` (the user's own provider's headers are kept)."""
    notes: list[str] = []
    try:
        provider = codex_provider(text, where)
    except GatewayError as exc:
        provider, notes = CodexProvider(BUILTIN, None, None, None), [str(exc)]
    if not provider.known:
        notes.append(
            f"Codex's model_provider {provider.id!r} has no address TOMC can read; the "
            "gateway sends its requests to its configured OpenAI upstream"
        )
    previous = None if provider.id == BUILTIN else provider
    table = tomc_provider_table(port, auth_mode, previous if provider.known else None)
    if extra_headers:
        own = table.get("http_headers")
        table["http_headers"] = {**(own if isinstance(own, Mapping) else {}), **extra_headers}
    args = [
        "-c",
        f"model_providers.{PROVIDER_ID}={_table_item(table, inline=True).as_string()}",
        "-c",
        f'model_provider="{PROVIDER_ID}"',
    ]
    return args, _upstreams(provider, port), notes
