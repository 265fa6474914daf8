"""What a session store is: its URL, the options every shared kind takes, and the two interfaces.

``--session-store URL`` names where conversations live. ``memory`` keeps them in this process
(the default); ``redis://host:port/db`` (also ``rediss://`` for TLS, ``valkey://``) keeps each
conversation's state where every gateway process sees it. A shared kind takes these options as
query parameters (``redis://cache:6379/0?lease_s=30&cache=64``):

==============  =======  ======================================================================
option          default  meaning
==============  =======  ======================================================================
``prefix``      tomc:    namespace of every key, so one server can hold several deployments
``lease_s``     30       a request's lease on its conversation expires after this (renewed
                         every third of it while the request streams)
``wait_s``      10       how long a request waits for a conversation another one holds; after
                         that it is prepared from the latest saved state and saves nothing
``idle_s``      21600    a conversation unused this long is dropped from the store
``cache``       64       conversations this process keeps ready in memory (0: none)
``timeout_s``   2        connect and reply timeout of the store; past it the store counts down
``connections`` 64       connections this process opens to the store at most; a command finding
                         them all busy waits for one (up to ``wait_s``, at least
                         ``timeout_s``), and past that the store counts down, the log saying
                         the pool is too small for the load
==============  =======  ======================================================================

A connection is held only while a command runs (a request's few commands take a millisecond or
so each), so 64 serve hundreds of concurrent streams; a burst beyond it queues for a moment
rather than failing.

One store protocol: :class:`Conversations` (with :class:`Checkout`) is what the gateway and the
LiteLLM hook ask of every kind: check a conversation out, hand it back, count, read the figures,
open the kind's usage book. A kind keeps its records its own way: ``memory`` in this process
(its ``SessionStore``), a shared kind in a server that does :class:`StateStore`'s few things
(leases, versioned opaque blobs, summed counters). A kind module (``memory.py``, ``redis.py``)
names its URL schemes in ``SCHEMES`` and opens itself with ``open_conversations(url, factory)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ...._core.errors import GatewayError, InvalidOptionError
from ....chat import AutomaticChatSession
from ..conversation import ConversationRecord
from ..metering.ledger import Ledger

__all__ = [
    "Checkout",
    "Conversations",
    "Lease",
    "SavedState",
    "SessionFactory",
    "StateStore",
    "StoreOptions",
    "StoreURL",
    "StoreUnavailableError",
    "parse_store_url",
]

SessionFactory = Callable[[], AutomaticChatSession]


class StoreUnavailableError(GatewayError):
    """The shared store did not answer (down, unreachable, timed out, refused a command)."""


@dataclass(frozen=True)
class StoreOptions:
    """A shared store's tunables (see the module docstring for each)."""

    prefix: str = "tomc:"
    lease_s: float = 30.0
    wait_s: float = 10.0
    idle_s: float = 6 * 3600.0
    cache: int = 64
    timeout_s: float = 2.0
    connections: int = 64

    def __post_init__(self) -> None:
        for name in ("lease_s", "idle_s", "timeout_s"):
            if not getattr(self, name) > 0:
                raise InvalidOptionError(f"session store option {name} must be > 0")
        if self.wait_s < 0 or self.cache < 0:
            raise InvalidOptionError("session store options wait_s and cache must be >= 0")
        if self.idle_s < self.lease_s:
            raise InvalidOptionError("session store option idle_s must be >= lease_s")
        if self.connections < 1:
            raise InvalidOptionError("session store option connections must be >= 1")

    @property
    def pool_wait_s(self) -> float:
        """How long a command waits for a free connection: as long as a request waits for a
        conversation another one holds, and never less than one reply may take."""
        return max(self.wait_s, self.timeout_s)

    @property
    def lease_ms(self) -> int:
        return math.ceil(self.lease_s * 1000)

    @property
    def idle_ms(self) -> int:
        return math.ceil(self.idle_s * 1000)


_FIELDS: dict[str, Callable[[str], Any]] = {
    "prefix": str,
    "lease_s": float,
    "wait_s": float,
    "idle_s": float,
    "cache": int,
    "timeout_s": float,
    "connections": int,
}


@dataclass(frozen=True)
class StoreURL:
    """A parsed ``--session-store`` value. ``shown`` hides the password (for logs and pages)."""

    text: str
    scheme: str
    host: str = ""
    port: int | None = None
    path: str = ""
    username: str | None = None
    password: str | None = None
    options: StoreOptions = field(default_factory=StoreOptions)

    @property
    def shown(self) -> str:
        if self.scheme == "memory":
            return "memory"
        netloc = self.host if ":" not in self.host else f"[{self.host}]"
        if self.port is not None:
            netloc = f"{netloc}:{self.port}"
        if self.username or self.password:
            netloc = f"{self.username or ''}:***@{netloc}"
        return urlunsplit((self.scheme, netloc, self.path, "", ""))


def parse_store_url(text: str, schemes: Mapping[str, object]) -> StoreURL:
    """Parse ``text`` for one of ``schemes`` (the kinds installed); a clear error otherwise."""
    value = (text or "").strip()
    known = ", ".join(sorted(schemes))
    if value.lower() in ("memory", "memory://"):
        return StoreURL(value, "memory")
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError as exc:
        raise InvalidOptionError(f"session store {value!r} is not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in schemes or scheme == "memory":
        raise InvalidOptionError(
            f"session store {value!r}: unknown kind {scheme or '(none)'}; use memory or a URL "
            f"such as redis://host:6379/0 (kinds: {known})"
        )
    if not parts.hostname:
        raise InvalidOptionError(f"session store {value!r} names no host")
    options: dict[str, Any] = {}
    for name, raw in parse_qsl(parts.query, keep_blank_values=True):
        if name not in _FIELDS:
            raise InvalidOptionError(
                f"session store option {name!r} is unknown; use {', '.join(_FIELDS)}"
            )
        try:
            options[name] = _FIELDS[name](raw)
        except ValueError:
            raise InvalidOptionError(f"session store option {name}={raw!r} is not valid") from None
    return StoreURL(
        value,
        scheme,
        parts.hostname,
        port,
        parts.path,
        parts.username,
        parts.password,
        StoreOptions(**options),
    )


@dataclass(frozen=True)
class Lease:
    """A request's hold on one conversation: released (or expired) before another takes it.

    ``version`` is the saved state's version when the lease was taken (0: none saved yet).
    """

    key: str
    token: str
    version: int


@dataclass(frozen=True)
class SavedState:
    """One conversation's state as saved: an opaque blob and its version."""

    version: int
    data: bytes


class StateStore(Protocol):
    """A shared kind's server. Every method raises :class:`StoreUnavailableError` when the store
    cannot be used; none blocks the event loop."""

    url: StoreURL

    async def acquire(self, key: str) -> Lease | None:
        """Lease ``key`` (waiting up to ``wait_s`` while another holds it); ``None`` if the wait
        ran out."""

    async def version(self, key: str) -> int:
        """The saved state's version (0: none)."""

    async def renew(self, lease: Lease) -> bool:
        """Extend the lease; ``False`` when it was lost (expired, taken over)."""

    async def load(self, key: str) -> SavedState | None:
        """The saved state, ``None`` when there is none."""

    async def save(self, lease: Lease, data: bytes | None) -> int | None:
        """Store ``data`` (``None``: keep the state) and release the lease, in one step; the new
        version, or ``None`` when the lease was lost (then nothing is written)."""

    async def release(self, lease: Lease) -> None:
        """Give the lease back without saving."""

    async def count(
        self, figures: Mapping[str, int], conversation: str, details: Mapping[str, str]
    ) -> None:
        """Add ``figures`` to the totals and to ``conversation``'s own figures (with its
        latest ``details``: api, model, last decision)."""

    async def totals(self) -> dict[str, int]:
        """Every figure summed over all processes."""

    async def recent(self, limit: int) -> list[dict[str, Any]]:
        """The latest conversations' own figures, most recent first."""

    def open_ledger(self, guard: Any = None) -> Ledger:
        """The usage ledger kept in this store (billed input, its direct estimate, the chart),
        summed over all processes; ``guard`` (an ``OutageGuard``) is the conversations' own,
        so an outage is noticed and logged once."""

    async def close(self) -> None:
        """Drop the connections."""


class Checkout(Protocol):
    """A conversation checked out for one request: ``conversation`` is ready to prepare (or
    ``None``: the request goes out unchanged); :meth:`finish` hands it back once the answer
    has been relayed and its usage fed to the session."""

    conversation: ConversationRecord | None

    def changed(self) -> None:
        """The conversation changed (a decision, usage learned): a store without leases
        keeps it now; a leased one waits for :meth:`finish`."""

    async def finish(self) -> None:
        """Save and release (idempotent, never raises)."""


class Conversations(Protocol):
    """What the gateway asks of a session store."""

    url: StoreURL
    #: Whether other processes see the same conversations (``--workers`` above 1 needs it).
    shared: bool

    async def checkout(self, key: str, api: str) -> Checkout:
        """The conversation ``key``, created on first use, leased for one request."""

    async def count(self, figures: Mapping[str, int]) -> None:
        """Add figures outside any conversation (a shared kind sums them in the store)."""

    async def status(self) -> dict[str, Any]:
        """The figures the status page shows: ``conversations`` (latest first) and
        ``tokens_saved``; a shared kind adds ``requests``, ``passthrough_paths`` and
        ``session_store``, summed over every process."""

    def open_ledger(self) -> Ledger | None:
        """The usage ledger kept in this store, summed over every process (``None``: the store
        keeps none, and the gateway keeps its own)."""

    async def close(self) -> None:
        """Release what the store holds (connections)."""
