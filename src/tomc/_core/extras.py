"""How to install an optional extra, in words that work where TOMC is actually installed.

No package index serves ``tomc``: it is installed from a clone (``make demo``, ``make install``
or ``pip install -e .``). So ``pip install 'tomc[bpe]'`` would fail; the hint names the
interpreter that is running and the clone it was installed from.
"""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

__all__ = ["install_hint", "source_checkout"]


def source_checkout() -> Path | None:
    """The clone this package runs from (an editable install), or ``None``."""
    package = Path(__file__).resolve().parent  # <clone>/src/tomc
    root = package.parent.parent
    if package.parent.name == "src" and (root / "pyproject.toml").is_file():
        return root
    return None


def install_hint(extra: str) -> str:
    """The command that adds ``extra`` to the running installation, and ``make install``.

    >>> "pip install -e" in install_hint("bpe")
    True
    """
    python = shlex.quote(sys.executable or "python3")
    root = source_checkout()
    if root is None:
        return (
            f"{python} -m pip install -e '/path/to/your/tomc/clone[{extra}]' (tomc is installed "
            "from a clone; no package index serves it)"
        )
    clone = shlex.quote(f"{root}[{extra}]")
    return f"{python} -m pip install -e {clone} (or `make install` in {root}: every extra, on PATH)"
