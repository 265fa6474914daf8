"""How to install an optional extra, in words that work where TOMC is actually installed.

No package index serves ``tomc``: it is installed from a clone (``make demo``, ``make install``
or ``pip install -e .``). So ``pip install 'tomc[bpe]'`` would fail; the hint names the
interpreter that is running and the clone it was installed from.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from importlib import metadata
from pathlib import Path

__all__ = ["install_hint", "source_checkout"]


def source_checkout() -> Path | None:
    """The clone this package runs from (an editable install), or ``None``."""
    package = Path(__file__).resolve().parent  # <clone>/src/tomc
    root = package.parent.parent
    if package.parent.name == "src" and (root / "pyproject.toml").is_file():
        return root
    return None


_PERCENT = re.compile(rb"%([0-9A-Fa-f]{2})")
#: A word cmd.exe and PowerShell both read as itself, unquoted.
_PLAIN_ON_WINDOWS = re.compile(r"[\w.:\\/-]+")


def _quoted(word: str) -> str:
    """``word`` as one argument of the shell the hint is pasted into: POSIX quoting, or on
    Windows double quotes, which cmd.exe and PowerShell both read (to cmd.exe single quotes
    are characters of the word)."""
    if sys.platform != "win32":
        return shlex.quote(word)
    return word if _PLAIN_ON_WINDOWS.fullmatch(word) else f'"{word}"'


def installed_from(direct_url: str | None) -> tuple[Path, bool] | None:
    """The local directory a ``pip install <dir>`` recorded (PEP 610's ``direct_url.json``),
    and whether it was editable; ``None`` for anything else (a wheel file, a URL, nothing)."""
    try:
        found = json.loads(direct_url or "")
    except ValueError:
        return None
    if not isinstance(found, dict) or not isinstance(found.get("dir_info"), dict):
        return None
    url = str(found.get("url", ""))
    if not url.startswith("file://"):
        return None
    # file://[host]/path, percent-encoded as UTF-8 (decoded here: urllib is not for the core)
    path = url[len("file://") :]
    path = path[path.find("/") :] if "/" in path else ""
    raw = _PERCENT.sub(lambda m: bytes([int(m.group(1), 16)]), path.encode("utf-8"))
    path = raw.decode("utf-8", "replace")
    if len(path) > 2 and path[0] == "/" and path[2] == ":":  # file:///C:/... on Windows
        path = path[1:]
    return Path(path), bool(found["dir_info"].get("editable"))


def _recorded_install() -> tuple[Path, bool] | None:
    try:
        return installed_from(metadata.distribution("tomc").read_text("direct_url.json"))
    except metadata.PackageNotFoundError:
        return None


def install_hint(extra: str) -> str:
    """The command that adds ``extra`` to the running installation, and ``make install``.

    >>> "pip install -e" in install_hint("bpe")
    True
    """
    python = _quoted(sys.executable or "python3")
    root = source_checkout()
    if root is None:
        recorded = _recorded_install()
        if recorded is not None:
            # Installed from a clone without -e: the same command with the extra.
            where, editable = recorded
            flag = "-e " if editable else ""
            return f"{python} -m pip install {flag}{_quoted(f'{where}[{extra}]')}"
        return (
            f"{python} -m pip install -e {_quoted(f'/path/to/your/tomc/clone[{extra}]')} (tomc "
            "is installed from a clone; no package index serves it)"
        )
    clone = _quoted(f"{root}[{extra}]")
    return f"{python} -m pip install -e {clone} (or `make install` in {root}: every extra, on PATH)"
