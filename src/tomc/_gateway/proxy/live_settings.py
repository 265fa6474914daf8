"""The gateway's settings while it runs: what the command line pinned, over the settings file,
which is read again when it changes (``tomc gateway activate`` records upstreams there)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping
from typing import Any

from ..settings import SETTINGS_FILE, GatewaySettings, gateway_dir, load_settings, with_options

__all__ = ["LiveSettings"]

logger = logging.getLogger("tomc.gateway")


class LiveSettings:
    """``current`` settings; with a ``home``, the file there is checked at most once a second
    and, when it changed, read again under the ``pinned`` options (the port always stays)."""

    def __init__(
        self,
        settings: GatewaySettings,
        home: str | os.PathLike[str] | None = None,
        pinned: Mapping[str, Any] | None = None,
    ) -> None:
        self.current = settings
        # Options given on the command line win over the settings file, also after a reload.
        self._pinned = dict(pinned or {})
        self._file = gateway_dir(home) / SETTINGS_FILE if home is not None else None
        self._stamp = self._read_stamp()
        self._checked_at = 0.0

    def _read_stamp(self) -> int | None:
        if self._file is None:
            return None
        try:
            return self._file.stat().st_mtime_ns
        except OSError:
            return None

    def refresh(self) -> GatewaySettings:
        """The settings now, with what was saved since the gateway started."""
        now = time.monotonic()
        if self._file is None or now - self._checked_at < 1.0:
            return self.current
        self._checked_at = now
        stamp = self._read_stamp()
        if stamp == self._stamp:
            return self.current
        self._stamp = stamp
        try:
            fresh = load_settings(self._file.parent.parent)
        except Exception as exc:  # keep serving with what worked
            logger.warning("gateway settings not reloaded: %s", exc)
            return self.current
        self.current = with_options(fresh, {**self._pinned, "port": self.current.port})
        logger.info("gateway settings reloaded: upstreams %s", dict(self.current.upstreams))
        return self.current
