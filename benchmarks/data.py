"""The benchmark data sets: where each comes from, and a check that a local copy is the one
the figures were measured on.

    python -m benchmarks.data                  # each file: source, licence, found where, sha256 ok?
    python -m benchmarks.data copy FOLDER      # verify FOLDER's copies, then copy them into place
    python -m benchmarks.data fetch [--mirror URL]   # download what has one public file, verified

The files are read at run time from ``$TOMC_BENCH_DATA``, else ``../shared/data`` beside the
clone (:data:`benchmarks.progress.DATA_DIR`); they are never copied into the repository (LoCoMo
is CC BY-NC 4.0). ``fetch`` needs the network: LoCoMo is one public file; the trajectories are
a conversion of many files from pull-request branches, so they can only be copied from a
verified local copy. Every file is checked against its SHA-256 before it is put in place; a
mismatch is refused and nothing is written.
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from benchmarks.progress import DATA_DIR


@dataclass(frozen=True)
class DataSet:
    """One benchmark data file and its provenance."""

    name: str
    sha256: str
    source: str
    licence: str
    url: str | None  # one public file to download, when there is one
    used_by: str


DATA_SETS = (
    DataSet(
        "locomo10.json",
        "79fa87e90f04081343b8c8debecb80a9a6842b76a7aa537dc9fdf651ea698ff4",
        "snap-research/LoCoMo on GitHub, data/locomo10.json (ten multi-session conversations)",
        "CC BY-NC 4.0 (non-commercial)",
        "https://raw.githubusercontent.com/snap-research/LoCoMo/main/data/locomo10.json",
        "LoCoMo evidence-turn recall; the session simulator's chats",
    ),
    DataSet(
        "agent_trajectories.jsonl.gz",
        "0fca61417c80fd6f9089d8ec4e68ffd05737e5b733a2c479dc15daafd7e3af74",
        "SWE-agent/mini-swe-agent on GitHub: 70 trajectories committed on the branches of pull "
        "requests 816 and 814 (mini-swe-agent driving deepseek-chat on SWE-bench Lite/dev), "
        "converted to one Chat Completions record each; every record's `source` names its file",
        "MIT (the repository's)",
        None,
        "the real-trajectory replay (benchmarks.agent_replay)",
    ),
)


class DataError(Exception):
    """A data file that cannot be verified or put in place (the message says which and why)."""


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def status(folder: Path = DATA_DIR) -> list[tuple[DataSet, str]]:
    """Each data set and what ``folder`` holds of it: ``ok``, ``missing`` or ``mismatch``."""
    out = []
    for data in DATA_SETS:
        path = folder / data.name
        if not path.is_file():
            out.append((data, "missing"))
        else:
            out.append((data, "ok" if sha256_of(path) == data.sha256 else "mismatch"))
    return out


def _put(source: Path, data: DataSet, folder: Path) -> Path:
    """Verify ``source`` and copy it into ``folder`` (through a temporary file, so a partial
    copy is never left under the real name)."""
    found = sha256_of(source)
    if found != data.sha256:
        raise DataError(
            f"{source}: sha256 {found} is not the {data.name} the figures were measured on "
            f"({data.sha256}); nothing was copied"
        )
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / data.name
    with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{data.name}.", delete=False) as tmp:
        temporary = Path(tmp.name)
    try:
        shutil.copyfile(source, temporary)
        temporary.replace(target)
    finally:
        temporary.unlink(missing_ok=True)
    return target


def copy_from(source_folder: Path, folder: Path = DATA_DIR) -> list[Path]:
    """Copy every data set found in ``source_folder`` into ``folder``, each verified first."""
    copied = []
    for data in DATA_SETS:
        source = source_folder / data.name
        if source.is_file():
            copied.append(_put(source, data, folder))
    if not copied:
        names = ", ".join(data.name for data in DATA_SETS)
        raise DataError(f"{source_folder} holds none of the data files ({names})")
    return copied


def fetch(folder: Path = DATA_DIR, mirror: str | None = None, timeout: float = 60.0) -> list[Path]:
    """Download each data set that has one public file (from ``mirror``/name instead, when
    given), verify it, and put it in ``folder``."""
    fetched = []
    for data in DATA_SETS:
        url = f"{mirror.rstrip('/')}/{data.name}" if mirror else data.url
        if url is None:
            continue
        with tempfile.TemporaryDirectory() as scratch:
            download = Path(scratch) / data.name
            try:
                with (
                    urllib.request.urlopen(url, timeout=timeout) as response,
                    download.open("wb") as handle,
                ):
                    shutil.copyfileobj(response, handle)
            except (urllib.error.URLError, OSError) as exc:
                raise DataError(f"could not download {data.name} from {url}: {exc}") from exc
            fetched.append(_put(download, data, folder))
    return fetched


def _report(folder: Path) -> int:
    print(f"benchmark data in {folder} (set TOMC_BENCH_DATA to read another folder)")
    missing = 0
    for data, state in status(folder):
        missing += state != "ok"
        print(f"\n{data.name}: {state}")
        print(f"  source:  {data.source}")
        print(f"  licence: {data.licence}")
        print(f"  sha256:  {data.sha256}")
        print(f"  used by: {data.used_by}")
        if data.url:
            print(f"  fetch:   python -m benchmarks.data fetch   ({data.url})")
        else:
            print(
                "  fetch:   no single public file; copy a verified local copy with "
                "python -m benchmarks.data copy FOLDER"
            )
    return 1 if missing else 0


def main(argv: list[str] | None = None) -> int:
    where = argparse.ArgumentParser(add_help=False)
    # SUPPRESS: a subcommand's default would otherwise undo a --folder given before it.
    where.add_argument(
        "--folder",
        type=Path,
        default=argparse.SUPPRESS,
        help=f"where the data is read ({DATA_DIR})",
    )
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.data", description=__doc__.split("\n\n")[0], parents=[where]
    )
    commands = parser.add_subparsers(dest="command")
    copy = commands.add_parser(
        "copy", help="verify a local copy and put it in place", parents=[where]
    )
    copy.add_argument("source", type=Path, help="a folder holding the data files")
    get = commands.add_parser(
        "fetch", help="download what has a public file (network needed)", parents=[where]
    )
    get.add_argument("--mirror", help="a base URL serving the files by name, instead")
    args = parser.parse_args(argv)
    folder = getattr(args, "folder", DATA_DIR)
    try:
        if args.command == "copy":
            for path in copy_from(args.source, folder):
                print(f"verified and copied: {path}")
        elif args.command == "fetch":
            for path in fetch(folder, args.mirror):
                print(f"downloaded and verified: {path}")
        return _report(folder)
    except DataError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
