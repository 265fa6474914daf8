"""MkDocs hook: publish benchmarks/RESULTS.md and its plots as pages of the site.

The benchmark run writes benchmarks/RESULTS.md (and latency.png, retention.png beside it); the
site shows that very file at benchmarks/RESULTS/ rather than a copy that could drift, and the
docs pages link to it as `benchmarks/RESULTS.md` relative to the docs folder root.
"""

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
PUBLISHED = ("benchmarks/RESULTS.md", "benchmarks/latency.png", "benchmarks/retention.png")


def on_files(files, config):
    for path in PUBLISHED:
        if (ROOT / path).is_file():
            files.append(
                File(
                    path,
                    src_dir=str(ROOT),
                    dest_dir=config["site_dir"],
                    use_directory_urls=config["use_directory_urls"],
                )
            )
    return files
