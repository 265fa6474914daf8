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
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from .._core.errors import InvalidOptionError
from .._home import default_home

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_UPSTREAMS",
    "TARGET_OFF",
    "GatewaySettings",
    "atomic_write",
    "gateway_dir",
    "load_settings",
    "parse_context_target",
    "record_upstream",
    "save_settings",
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
    thinking_prefix: str = "drop_block"
    #: Keep every request's prompt at or under this many tokens (the ``context_target`` of
    #: each request; the output reservation does not count). ``None``: each agent's default
    #: (:mod:`tomc._gateway.agents.limits`); ``"off"``: no target, only the models' windows.
    #: The file's older ``context_limit`` key is read as this.
    context_target: int | str | None = None

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
        if self.thinking_prefix not in ("passthrough", "drop_block"):
            raise InvalidOptionError("thinking_prefix must be 'passthrough' or 'drop_block'")
        object.__setattr__(self, "context_target", parse_context_target(self.context_target))

    def upstream(self, kind: str) -> str:
        """The base URL for ``kind``, without a trailing slash."""
        url = self.upstreams.get(kind)
        return (url if url is not None else DEFAULT_UPSTREAMS[kind]).rstrip("/")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["upstreams"] = dict(self.upstreams)
        return data


TARGET_OFF = "off"


def parse_context_target(value: object) -> int | str | None:
    """A context target as settings, options and headers spell it: ``None``, ``"off"``, or an
    integer of at least 1024 tokens (``"120000"`` and ``"120_000"`` too)."""
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
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidOptionError(
            f"context target must be a number of tokens or 'off', not {value!r}"
        )
    if value < 1024:
        raise InvalidOptionError(f"context target must be >= 1024 tokens, not {value}")
    return value


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
            thinking_prefix=data.get("thinking_prefix", "drop_block"),
            context_target=data.get("context_target", data.get("context_limit")),
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
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
