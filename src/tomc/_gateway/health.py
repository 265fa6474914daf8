"""Is a TOMC gateway answering, and does a URL point at one?

"Answering" means ``GET /healthz`` on loopback returns the gateway's JSON with
``"service": "tomc-gateway"``: another program on the port does not count. Plain
:mod:`http.client`, so no proxy variable of the environment can send the probe elsewhere.
"""

from __future__ import annotations

import http.client
import ipaddress
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from .._core.errors import GatewayError

__all__ = [
    "LOOPBACK",
    "Probe",
    "gateway_root",
    "loopback_port",
    "probe",
    "send_stop",
    "wait_until_answering",
]

LOOPBACK = "127.0.0.1"
SERVICE_NAME = "tomc-gateway"  # what app.SERVICE_NAME says; importing app would load Starlette


@dataclass(frozen=True)
class Probe:
    """What answered on a port: ``answering`` is a TOMC gateway; ``other`` is some other
    program (the port is taken); neither means nothing listens."""

    port: int
    answering: bool
    other: bool = False
    version: str | None = None

    @property
    def url(self) -> str:
        return gateway_root(self.port)


def gateway_root(port: int) -> str:
    """The gateway's root URL (what Claude Code's ``ANTHROPIC_BASE_URL`` holds)."""
    return f"http://{LOOPBACK}:{port}"


def probe(port: int, timeout_s: float = 1.0) -> Probe:
    """Ask ``http://127.0.0.1:<port>/healthz`` who is there."""
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout_s)
    try:
        connection.request("GET", "/healthz", headers={"Host": f"{LOOPBACK}:{port}"})
        response = connection.getresponse()
        body = response.read(65536)
    except (OSError, http.client.HTTPException):
        return Probe(port, answering=False)
    finally:
        connection.close()
    try:
        data = json.loads(body)
    except ValueError:
        return Probe(port, answering=False, other=True)
    if response.status == 200 and isinstance(data, dict) and data.get("service") == SERVICE_NAME:
        return Probe(port, answering=True, version=str(data.get("version", "")) or None)
    return Probe(port, answering=False, other=True)


def send_stop(port: int, token: str, timeout_s: float = 2.0) -> bool:
    """Ask the gateway on ``port`` to stop (``POST /_tomc/stop`` with its secret); whether
    it agreed. The path and header are :mod:`.proxy.stop`'s (not imported: it loads
    Starlette)."""
    connection = http.client.HTTPConnection(LOOPBACK, port, timeout=timeout_s)
    headers = {"Host": f"{LOOPBACK}:{port}", "x-tomc-stop-token": token, "Content-Length": "0"}
    try:
        connection.request("POST", "/_tomc/stop", headers=headers)
        response = connection.getresponse()
        response.read(65536)
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()
    return response.status == 202


def wait_until_answering(
    port: int,
    timeout_s: float,
    *,
    still_starting: Callable[[], str | None] = lambda: None,
    interval_s: float = 0.1,
) -> Probe:
    """Poll until a gateway answers on ``port``; raise :class:`GatewayError` after
    ``timeout_s`` or as soon as ``still_starting`` returns a reason to give up (say, the
    process that was to serve exited)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = probe(port)
        if found.answering:
            return found
        reason = still_starting()
        if reason:
            raise GatewayError(f"the gateway did not start on {gateway_root(port)}: {reason}")
        if time.monotonic() >= deadline:
            raise GatewayError(
                f"no TOMC gateway answered on {gateway_root(port)} within {timeout_s:g} s"
            )
        time.sleep(interval_s)


def loopback_port(url: object) -> int | None:
    """The port of an ``http://`` URL on this machine's loopback, else ``None``: the test for
    "this configuration points at a local gateway"."""
    if not isinstance(url, str):
        return None
    try:
        parts = urlsplit(url.strip())
        host, port = parts.hostname, parts.port
    except ValueError:
        return None
    if parts.scheme != "http" or host is None:
        return None
    if host != "localhost":
        try:
            if not ipaddress.ip_address(host).is_loopback:
                return None
        except ValueError:
            return None
    return port if port is not None else 80
