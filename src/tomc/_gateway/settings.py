"""Where the gateway listens and where it forwards: one small JSON file, written atomically.

The file lives in the gateway's folder under the TOMC home (``$TOMC_HOME`` or the platform's user
data directory): ``<home>/gateway/settings.json``. ``tomc gateway activate`` records there the
upstream each agent used before it was pointed at the gateway; ``tomc gateway serve`` reads it at
start. Without the file the defaults are the providers' public APIs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .._core.errors import InvalidOptionError
from .._home import default_home
from .._http.origins import normalize_origin
from ..chat._options import (
    THINKING_PREFIX,
    SessionOptions,
    check_choice,
    check_seconds,
    check_tokens,
)

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_UPSTREAMS",
    "MIN_CONTEXT_TARGET",
    "TARGET_OFF",
    "GatewaySettings",
    "atomic_write",
    "gateway_dir",
    "load_settings",
    "normalize_origin",
    "parse_cache_ttl",
    "parse_context_target",
    "parse_upstream",
    "record_upstream",
    "remove_leftover_temps",
    "save_settings",
    "with_options",
]

DEFAULT_PORT = 8787
SETTINGS_FILE = "settings.json"


class _DefaultUpstreams(Mapping[str, str]):
    """The registered wire formats' upstream kinds and default base URLs, read from the
    dialect registry on each use, so that a format registered later counts too."""

    @staticmethod
    def _current() -> dict[str, str]:
        # Imported here: leases, journal and login use this module without the chat package.
        from ..chat.dialects import DIALECTS

        found: dict[str, str] = {}
        for dialect in DIALECTS.values():
            for upstream in dialect.upstreams:
                found.setdefault(upstream.kind, upstream.url)
        return found

    def __getitem__(self, kind: str) -> str:
        return self._current()[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())


#: Where each kind of request goes when nothing else is configured: ``anthropic``, ``openai``,
#: ``chatgpt`` (the endpoint Codex uses when signed in with a ChatGPT account), and those of any
#: format registered since (see :mod:`tomc.chat.dialects`).
DEFAULT_UPSTREAMS: Mapping[str, str] = _DefaultUpstreams()


@dataclass(frozen=True)
class GatewaySettings:
    """What the gateway needs to run: its port and the upstream base URL per kind of request.

    Upstream URLs are base URLs: the gateway appends the path after ``/v1`` (``/messages``,
    ``/responses``, ``/chat/completions``, ...), so ``openai`` ends in ``/v1`` and ``anthropic``
    does not (Anthropic's SDKs and Claude Code add ``/v1`` themselves).
    """

    port: int = DEFAULT_PORT
    upstreams: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_UPSTREAMS))
    #: ``"drop_block"`` lets Anthropic drop signed thinking after a rewritten prefix (see
    #: :mod:`tomc.chat.dialects._anthropic_messages`); ``"passthrough"`` sends such requests as
    #: they are.
    thinking_prefix: str = SessionOptions.thinking_prefix
    #: Keep every request's prompt at or under this many tokens (the ``context_target`` of
    #: each request; the output reservation does not count). ``None``: each agent's default
    #: (:mod:`tomc._gateway.agents.limits`); ``"off"``: no target, only the models' windows.
    #: The file's older ``context_limit`` key is read as this.
    context_target: int | str | None = None
    #: Web origins (``https://app.example``) whose pages may call the gateway from a browser:
    #: their cross-site requests and CORS preflights are answered. By default none may; SDKs
    #: and agent CLIs send no ``Origin`` and are not concerned.
    allow_origins: tuple[str, ...] = ()
    #: How long the provider keeps a cached prompt without use, in seconds (``None``: what
    #: each request says, else the provider's documented lifetime). A request that comes
    #: later finds the cache cold, so TOMC compiles it deep at no extra cost.
    cache_ttl_s: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.port < 65536:
            raise InvalidOptionError(f"gateway port must be 1-65535, not {self.port}")
        unknown = set(self.upstreams) - set(DEFAULT_UPSTREAMS)
        if unknown:
            raise InvalidOptionError(
                f"unknown upstream kind(s) {sorted(unknown)}; use {sorted(DEFAULT_UPSTREAMS)}"
            )
        for kind, url in self.upstreams.items():
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise InvalidOptionError(f"upstream {kind!r} must be an http(s) URL, not {url!r}")
        check_choice("thinking_prefix", self.thinking_prefix, THINKING_PREFIX)
        object.__setattr__(self, "context_target", parse_context_target(self.context_target))
        object.__setattr__(self, "allow_origins", _parse_origins(self.allow_origins))
        object.__setattr__(self, "cache_ttl_s", parse_cache_ttl(self.cache_ttl_s))

    def upstream(self, kind: str) -> str:
        """The base URL for ``kind``, without a trailing slash."""
        url = self.upstreams.get(kind)
        return (url if url is not None else DEFAULT_UPSTREAMS[kind]).rstrip("/")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["upstreams"] = dict(self.upstreams)
        data["allow_origins"] = list(self.allow_origins)
        return data


def parse_upstream(value: str, option: str = "--upstream") -> tuple[str, str]:
    """``NAME=URL`` as ``tomc gateway serve --upstream`` takes it: a kind of the settings'
    ``upstreams`` (``anthropic``, ``openai``, ``chatgpt``, ...) and its http(s) base URL."""
    name, sep, url = value.partition("=")
    name, url = name.strip(), url.strip()
    if not sep or not name or not url:
        raise InvalidOptionError(f"{option} expects NAME=URL, got {value!r}")
    if name not in DEFAULT_UPSTREAMS:
        known = ", ".join(sorted(DEFAULT_UPSTREAMS))
        raise InvalidOptionError(f"{option}: unknown NAME {name!r}; use one of: {known}")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidOptionError(
            f"{option} {name}=...: the URL must be http:// or https:// with a host, not {url!r}"
        )
    return name, url


def with_options(settings: GatewaySettings, options: Mapping[str, Any]) -> GatewaySettings:
    """``settings`` with the command line's ``options`` over them. ``upstreams`` among the
    options replace only the kinds they name; the others keep the settings' URLs."""
    changes = dict(options)
    if "upstreams" in changes:
        changes["upstreams"] = {**settings.upstreams, **changes["upstreams"]}
    return replace(settings, **changes)


def _parse_origins(values: Iterable[str]) -> tuple[str, ...]:
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise InvalidOptionError(f"allow_origins must be a list of web origins, not {values!r}")
    try:
        return tuple(dict.fromkeys(normalize_origin(value) for value in values))
    except InvalidOptionError as exc:
        raise InvalidOptionError(f"allow_origins: {exc}") from None


TARGET_OFF = "off"
#: The smallest context target the gateway takes: below it an agent could not work at all.
MIN_CONTEXT_TARGET = 1024


def parse_context_target(value: object) -> int | str | None:
    """A context target as settings, options and headers spell it: ``None``, ``"off"``, or an
    integer of at least :data:`MIN_CONTEXT_TARGET` tokens (``"120000"`` and ``"120_000"`` too),
    checked as the session checks its own ``context_target``."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        text = value.strip().lower()
        if text in (TARGET_OFF, "none", "false"):
            return TARGET_OFF
        try:
            value = int(text.replace("_", ""))
        except ValueError:
            raise InvalidOptionError(
                f"context target must be a number of tokens or 'off', not {text!r}"
            ) from None
    return check_tokens("context target", value, MIN_CONTEXT_TARGET)


def parse_cache_ttl(value: object) -> float | None:
    """A cache lifetime in seconds (a number >= 0, or its text), or ``None``; checked as the
    session checks its own ``cache_ttl_s``."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            return check_seconds("cache_ttl_s", float(value))
        except ValueError:
            pass  # not a number: refused below, naming the text as given
    return check_seconds("cache_ttl_s", value)


def gateway_dir(home: str | os.PathLike[str] | None = None) -> Path:
    """The gateway's folder: ``<home>/gateway`` (created on demand by writers, mode 0700)."""
    base = Path(home).expanduser() if home is not None else default_home()
    return base / "gateway"


def load_settings(home: str | os.PathLike[str] | None = None) -> GatewaySettings:
    """The saved settings, or the defaults when none were saved."""
    path = gateway_dir(home) / SETTINGS_FILE
    try:
        raw = path.read_text("utf-8")
    except FileNotFoundError:
        return GatewaySettings()
    except OSError as exc:
        raise InvalidOptionError(f"cannot read gateway settings {path}: {exc.strerror}") from None
    try:
        data = json.loads(raw)
        upstreams = {**DEFAULT_UPSTREAMS, **data.get("upstreams", {})}
        return GatewaySettings(
            port=int(data.get("port", DEFAULT_PORT)),
            upstreams=upstreams,
            thinking_prefix=data.get("thinking_prefix", SessionOptions.thinking_prefix),
            context_target=data.get("context_target", data.get("context_limit")),
            allow_origins=data.get("allow_origins", ()),
            cache_ttl_s=data.get("cache_ttl_s"),
        )
    except (ValueError, TypeError, AttributeError) as exc:
        raise InvalidOptionError(f"gateway settings {path} are not valid: {exc}") from None


def save_settings(settings: GatewaySettings, home: str | os.PathLike[str] | None = None) -> Path:
    """Write the settings atomically; return the file's path."""
    path = gateway_dir(home) / SETTINGS_FILE
    atomic_write(path, (json.dumps(settings.to_dict(), indent=2) + "\n").encode("utf-8"))
    return path


def record_upstream(kind: str, url: str, home: str | os.PathLike[str] | None = None) -> str | None:
    """Make ``url`` the upstream for ``kind`` in the saved settings (what ``tomc run`` and
    ``tomc gateway activate`` do with an agent's own non-default endpoint).

    Returns the URL it replaced when that was different, else ``None`` (nothing written).
    A running gateway reads its settings when it starts.
    """
    settings = load_settings(home)
    before = settings.upstream(kind)
    url = url.strip()
    if url.rstrip("/") == before:
        return None
    upstreams = {**settings.upstreams, kind: url}
    save_settings(replace(settings, upstreams=upstreams), home)
    return before


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` in one step (temporary file in the same folder, then
    rename), so a crash leaves either the old file or the new one, never half of either."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, temp = tempfile.mkstemp(prefix=_temp_prefix(path), dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        _discard(temp)
        raise


def _discard(temp: str) -> None:
    """Delete a temporary file that could not take its place. On Windows a read-only file
    cannot be deleted, and the temporary one has the (read-only) mode of the file it was to
    replace: it is made writable first."""
    with contextlib.suppress(OSError):
        os.unlink(temp)
        return
    with contextlib.suppress(OSError):
        os.chmod(temp, stat.S_IREAD | stat.S_IWRITE)
        os.unlink(temp)


# What mkstemp puts after the prefix: eight of these characters (CPython's tempfile).
_TEMP_NAME = re.compile(r"[a-z0-9_]{8}")


def _temp_prefix(path: Path) -> str:
    return f".{path.name}."


def remove_leftover_temps(path: Path) -> list[Path]:
    """Remove the temporary files :func:`atomic_write` left beside ``path`` when its process
    was killed mid-write (``.<name>.`` and eight characters of mkstemp's); other files, even
    with a similar name, stay. Returns what was removed."""
    prefix = _temp_prefix(path)
    try:
        entries = sorted(path.parent.iterdir())
    except OSError:  # no folder, or not readable: nothing of ours to find
        return []
    removed = []
    for entry in entries:
        name = entry.name
        if not (name.startswith(prefix) and _TEMP_NAME.fullmatch(name[len(prefix) :])):
            continue
        try:
            if not stat.S_ISREG(entry.lstat().st_mode):
                continue
            entry.unlink()
        except OSError:
            continue
        removed.append(entry)
    return removed
