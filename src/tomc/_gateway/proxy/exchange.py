"""One request as the gateway handles it, worked out once when it arrives.

An :class:`Exchange` holds everything the later steps ask of a request: its upstream URL, its
wire format (a dialect object, not a name to look up again), the headers to forward and the
lower-cased ones to read (TOMC's own ``x-tomc-*`` headers taken out of both and read into
:class:`~tomc._gateway.proxy.options.RequestOptions`), and the body. The rewrite step
(:mod:`.rewrite`), the relay (:mod:`.relay`) and the meter (:mod:`.metering`) each read it; none
of them routes again.
"""

from __future__ import annotations

from dataclasses import dataclass

from starlette.requests import Request

from ...chat.dialects import DEFAULT_DIALECT, Dialect
from ..settings import GatewaySettings
from .options import OWN_PREFIX, RequestOptions
from .routing import compaction_dialect, route_request

__all__ = ["Exchange", "read_exchange"]


@dataclass(frozen=True)
class Exchange:
    """One request: where it goes, in which format, with which headers and body.

    ``dialect`` is set for a ``POST`` the gateway may rewrite; ``compaction`` for a ``POST`` to a
    format's own compaction endpoint (``/v1/responses/compact``), which goes out unchanged and
    tells the conversation's session that the agent compacted. ``answers`` names the format
    whose provider gets the request: the gateway's own error answers take its shape.
    """

    method: str
    path: str
    url: str
    #: The client's headers as sent (names as spelled, ``x-tomc-*`` removed), to forward.
    items: tuple[tuple[str, str], ...]
    #: The same headers with lower-cased names, to read.
    headers: dict[str, str]
    options: RequestOptions
    body: bytes
    dialect: Dialect | None = None
    compaction: Dialect | None = None
    answers: str = DEFAULT_DIALECT

    @property
    def api(self) -> str | None:
        """The name of ``dialect`` (``None`` with it)."""
        return self.dialect.name if self.dialect is not None else None


async def read_exchange(request: Request, settings: GatewaySettings) -> Exchange:
    """Read a request's headers and body and route it (:func:`.routing.route_request`)."""
    path = request.url.path
    raw = request.headers.items()
    items = tuple((n, v) for n, v in raw if not n.lower().startswith(OWN_PREFIX))
    headers = {name.lower(): value for name, value in raw}
    options = RequestOptions.from_headers(headers)
    headers = {name: value for name, value in headers.items() if not name.startswith(OWN_PREFIX)}
    route = route_request(path, request.url.query, headers, settings)
    body = await request.body()
    post = request.method == "POST"
    dialect = route.dialect if post else None
    return Exchange(
        method=request.method,
        path=path,
        url=route.url,
        items=items,
        headers=headers,
        options=options,
        body=body,
        dialect=dialect,
        compaction=compaction_dialect(path) if post else None,
        answers=route.answers,
    )
