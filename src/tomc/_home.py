"""Where TOMC keeps its files: ``$TOMC_HOME``, else the platform's user data directory.

The notebook store, the gateway's settings, ledger and leases all live there; this module only
names the folder, so that the gateway can find it without loading the notebook store.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["HOME_ENV", "default_home"]

HOME_ENV = "TOMC_HOME"


def default_home() -> Path:
    """``$TOMC_HOME`` if set and nonempty, else the platform's user data directory for tomc."""
    env = os.environ.get(HOME_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("tomc", appauthor=False))
