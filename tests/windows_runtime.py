"""What the tests need to know about the Windows runtime ``make test-windows`` runs them on:
python.org's embeddable CPython for Windows under Wine (``scripts/windows/``), which is
Windows CPython, but not Windows.

:func:`tolerate_wine_keepalive_options` is the one place the suite works around Wine itself
rather than Windows: Wine 8.0 refuses ``TCP_KEEPIDLE``, ``TCP_KEEPINTVL`` and ``TCP_KEEPCNT``
(``WSAENOPROTOOPT``), which Windows has had since Windows 10 1709 and which the anthropic and
openai SDKs set on every connection they open.
"""

from __future__ import annotations

import socket
import sys

__all__ = ["ON_WINDOWS", "UNDER_WINE", "tolerate_wine_keepalive_options"]

ON_WINDOWS = sys.platform == "win32"
#: The Windows error Wine gives for a socket option it does not implement.
_WSAENOPROTOOPT = 10042
_KEEPALIVE_OPTIONS = frozenset(
    getattr(socket, name)
    for name in ("TCP_KEEPIDLE", "TCP_KEEPINTVL", "TCP_KEEPCNT")
    if hasattr(socket, name)
)


def _under_wine() -> bool:
    """Whether this Windows process runs under Wine (its ntdll exports ``wine_get_version``)."""
    if not ON_WINDOWS:
        return False
    import ctypes

    try:
        return hasattr(ctypes.WinDLL("ntdll"), "wine_get_version")
    except OSError:
        return False


UNDER_WINE = _under_wine()


def tolerate_wine_keepalive_options() -> None:
    """Under Wine, setting a TCP keep-alive timing option Wine lacks is a no-op instead of an
    error (the connection keeps ``SO_KEEPALIVE`` with Wine's timings); elsewhere nothing."""
    if not UNDER_WINE or getattr(socket.socket.setsockopt, "tolerates_wine", False):
        return
    original = socket.socket.setsockopt

    def setsockopt(self: socket.socket, level: int, option: int, *value: object) -> None:
        try:
            original(self, level, option, *value)  # type: ignore[arg-type]
        except OSError as exc:
            unsupported = getattr(exc, "winerror", None) == _WSAENOPROTOOPT
            if not (unsupported and level == socket.IPPROTO_TCP and option in _KEEPALIVE_OPTIONS):
                raise

    setsockopt.tolerates_wine = True  # type: ignore[attr-defined]
    socket.socket.setsockopt = setsockopt  # type: ignore[method-assign]
