"""Temporary files a killed write left beside the files activation manages.

The atomic writer (:func:`~tomc._gateway.settings.atomic_write`) writes a temporary file beside
its target and renames it; a process killed in between (``kill -9``, a power cut) leaves
``.<name>.XXXXXXXX`` behind, e.g. ``.settings.json.k3j9x0ab`` beside Claude Code's settings.
``tomc gateway activate`` and ``tomc restore-direct`` remove those of the agent's configuration
file, its backup and its journal, and nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..settings import remove_leftover_temps
from .config_files import client_config_path
from .journal import backup_path, load_record, record_path

__all__ = ["leftover_places", "remove_leftovers"]


def leftover_places(folder: Path, client: str, environ: Mapping[str, str]) -> list[Path]:
    """The agent's configuration file, as configured now (and the file it links to) and as
    recorded at activation."""
    path = client_config_path(client, environ)
    places = [path, path.resolve()]
    record = load_record(folder, client)
    if record is not None:
        places += [Path(record.config), Path(record.target)]
    return places


def remove_leftovers(folder: Path, client: str, *paths: Path) -> list[str]:
    """Remove what an interrupted write left beside ``paths`` (the agent's file) and beside
    ``client``'s backup and journal in the gateway ``folder``; say what went, in words."""
    managed = (*paths, backup_path(folder, client), record_path(folder, client))
    removed = [temp for path in dict.fromkeys(managed) for temp in remove_leftover_temps(path)]
    return [
        f"{client}: removed {temp}, a temporary file left by an interrupted write"
        for temp in removed
    ]
